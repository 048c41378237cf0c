"""The share-group streaming source against the batch offset-range source and the ceiling, in one run.

Per size, on one topic (N records of 100 B on 4 partitions, one broker subprocess):

* ``share``: the share-group streaming source (ShareFetch acquisition on the driver, plain Fetch on
  executors) into Spark's ``noop`` sink with availableNow and ``maxRecordsPerTrigger``;
* ``batch``: ``spark.read.format("shareq")`` reading the same records by offset ranges into ``noop``
  (run twice, the second run timed: warm, like the steady-state figures);
* ``memory``: a plain Python streaming data source yielding the same rows as Arrow batches from
  memory, same schema, micro-batch size and task count: what the Python data source API allows;
* ``kafka`` and ``kafka stream``: Spark's own Kafka connector (``format("kafka")``, the jars
  ``make kafka`` resolves into tests/spark-kafka/lib) reading the same topic on the same broker, as a
  batch (warm second run, ``minPartitions`` = tasks) and as a stream (availableNow,
  ``maxOffsetsPerTrigger`` = the batch size); skipped, with a note, without those jars.

The ratios to Spark's connector (batch/kafka, share/kafka stream) are the figures to compare across
runs; the machine's load average is printed beside them.

Streaming rates are steady state: rows over trigger time of every micro-batch after the first
non-empty one (start-up excluded). Also printed: records per micro-batch, the fixed cost per
micro-batch (trigger time outside the batch's tasks: offsets, planning, logs), and peak RSS of the
driver JVM and of the Python processes Spark starts (the streaming source's long-lived process
among them), with the largest Python process's RSS after the first and the last micro-batch.
With ``--rounds N`` the two pairs run N times in all, each shareq source right beside Spark's
connector, and the median of the per-round ratios is printed (load on a shared machine moves
single figures by tens of percent between minutes).
Usage: ``python bench/spark_source.py [--sizes N,N] [--batch N] [--tasks N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

VALUE_BYTES = 100
PARTITIONS = 4


def _value(partition: int, offset: int) -> bytes:
    return (b"%d:%d:" % (partition, offset)).ljust(VALUE_BYTES, b"x")


class _Slice(InputPartition):
    def __init__(self, partition: int, first: int, last: int) -> None:
        self.partition, self.first, self.last = partition, first, last


class MemoryStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The ceiling: offsets per partition, rows generated in the task straight into Arrow."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.total = int(options["records"])
        self.batch = int(options["batch"])
        self.tasks = int(options["tasks"])

    def initialOffset(self) -> dict[str, Any]:
        return {"next": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.batch)

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        cap = self.total if isinstance(limit, ReadAllAvailable) else int(start["next"]) + limit.max_rows
        return {"next": min(self.total, cap)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        # Row i lives in partition i % 4 at offset i // 4; split the range into `tasks` slices.
        first, last = int(start["next"]), int(end["next"])
        n = last - first
        if n <= 0:
            return []
        step = -(-n // self.tasks)
        return [_Slice(0, a, min(a + step, last) - 1) for a in range(first, last, step)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        assert isinstance(partition, _Slice)
        schema = to_arrow_schema(self.schema, timezone="UTC")
        rows = range(partition.first, partition.last + 1)
        now_us = int(time.time() * 1_000_000)
        for chunk_start in range(0, len(rows), 8192):
            chunk = rows[chunk_start : chunk_start + 8192]
            n = len(chunk)
            arrays = [
                pa.array([str(i % 1000).encode() for i in chunk], type=pa.binary()),
                pa.array([_value(i % PARTITIONS, i // PARTITIONS) for i in chunk], type=pa.binary()),
                pa.array(["bench"] * n, type=pa.string()),
                pa.array([i % PARTITIONS for i in chunk], type=pa.int32()),
                pa.array([i // PARTITIONS for i in chunk], type=pa.int64()),
                pa.array([now_us] * n, type=pa.int64()).cast(schema.field("timestamp").type),
                pa.array([0] * n, type=pa.int32()),
                pa.array([1] * n, type=pa.int32()),
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)


class MemorySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "membench"

    def schema(self) -> StructType:
        from shareq.spark.schema import source_schema

        return source_schema(False)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MemoryStream(schema, dict(self.options))


def steady_rate(query: Any) -> tuple[float, int, int]:
    """(rows/s over trigger time after the first non-empty batch, rows counted, batches counted)."""
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    steady = batches[1:] or batches
    rows = sum(int(p["numInputRows"]) for p in steady)
    ms = sum(int(p["durationMs"]["triggerExecution"]) for p in steady)
    return (rows * 1000.0 / ms if ms else 0.0), rows, len(steady)


def fixed_cost_ms(query: Any) -> float:
    """Mean trigger time outside ``addBatch`` (the tasks) per steady micro-batch."""
    steady = [p["durationMs"] for p in query.recentProgress if p["numInputRows"]][1:]
    if not steady:
        return 0.0
    return sum(int(d["triggerExecution"]) - int(d.get("addBatch", 0)) for d in steady) / len(steady)


def _rss_kb(pid: int) -> tuple[int, int]:
    """(current, peak) resident set of a process in KiB, from /proc; (0, 0) once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields.get("VmRSS", "0 kB").split()[0]), int(fields.get("VmHWM", "0 kB").split()[0])


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _is_python(pid: int) -> bool:
    try:
        return "python" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False


class MemoryWatch:
    """Samples the JVM and the Python workers under this process every 0.2 s (peak RSS per role)."""

    def __init__(self) -> None:
        self.jvm_peak = self.python_peak = self.python_sum_peak = self.largest_now = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self.sample()

    def sample(self) -> None:
        python_now = []
        for pid in _descendants(os.getpid()):
            now, peak = _rss_kb(pid)
            if _is_python(pid):
                python_now.append(now)
                self.python_peak = max(self.python_peak, peak)
            else:
                self.jvm_peak = max(self.jvm_peak, peak)
        self.largest_now = max(python_now, default=0)
        self.python_sum_peak = max(self.python_sum_peak, sum(python_now))

    def reset(self) -> None:
        self.sample()
        self.jvm_peak = self.python_peak = self.python_sum_peak = 0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def broker_process(data_dir: Path) -> Iterator[str]:
    """``shareq serve`` in its own process: the broker must not share a GIL with Spark's driver.

    With shareq's defaults: its bound on a group's in-flight window (1,000,000) lets the source set
    the window to a whole micro-batch."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shareq",
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
            "--log-level=WARNING",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening" not in line:
            raise RuntimeError(f"the broker did not start: {line!r}")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def run_stream(df: Any, checkpoint: Path, memory: MemoryWatch) -> tuple[Any, list[int]]:
    """Drain with availableNow into noop; the largest Python process's RSS (KiB) after each batch."""
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    after_batches: list[int] = []
    seen = 0
    while query.isActive:
        query.awaitTermination(0.2)
        progress = query.recentProgress
        if len(progress) > seen:
            seen = len(progress)
            memory.sample()
            after_batches.append(memory.largest_now)
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    return query, after_batches


def run_batch(spark: Any, bootstrap: str, tasks: int, records: int) -> float:
    """Records/s of the batch offset-range source into noop (second, warm run)."""
    rate = 0.0
    for _ in range(2):
        df = (
            spark.read.format("shareq")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "bench")
            .option("minPartitions", str(tasks))
            .load()
        )
        started = time.monotonic()
        df.write.format("noop").mode("overwrite").save()
        rate = records / (time.monotonic() - started)
    return rate


SPARK_KAFKA_JARS = sorted(
    (Path(__file__).resolve().parents[1] / "tests" / "spark-kafka" / "lib").glob("*.jar")
)


def run_kafka_batch(spark: Any, bootstrap: str, tasks: int, records: int) -> float:
    """Records/s of Spark's own Kafka connector reading the topic into noop (second, warm run)."""
    rate = 0.0
    for _ in range(2):
        df = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "bench")
            .option("minPartitions", str(tasks))
            .load()
        )
        started = time.monotonic()
        df.write.format("noop").mode("overwrite").save()
        rate = records / (time.monotonic() - started)
    return rate


def share_stream(bootstrap: str, spark: Any, group: str, batch: int, tasks: int) -> Any:
    return (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "bench")
        .option("group.id", group)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", str(batch))
        .option("minPartitions", str(tasks))
        .load()
    )


def kafka_stream(bootstrap: str, spark: Any, batch: int, tasks: int) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "bench")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(batch))
        .option("minPartitions", str(tasks))
        .load()
    )


def paired_round(
    spark: Any, bootstrap: str, records: int, batch: int, tasks: int, tmp: Path, n: int, memory: MemoryWatch
) -> tuple[float, float]:
    """One more round, each of shareq's sources right beside Spark's connector in the same way:
    (batch/kafka, share stream/kafka stream)."""
    batch_rate = run_batch(spark, bootstrap, tasks, records)
    kafka_rate = run_kafka_batch(spark, bootstrap, tasks, records)
    share, _ = run_stream(
        share_stream(bootstrap, spark, f"bench-{n}", batch, tasks), tmp / f"ckpt-share-{n}", memory
    )
    kafka, _ = run_stream(kafka_stream(bootstrap, spark, batch, tasks), tmp / f"ckpt-kafka-{n}", memory)
    share_rate, kafka_stream_rate = steady_rate(share)[0], steady_rate(kafka)[0]
    print(
        f"  round {n + 1}: batch {batch_rate:,.0f}/s kafka {kafka_rate:,.0f}/s "
        f"({batch_rate / kafka_rate:.2f}); "
        f"share stream {share_rate:,.0f}/s kafka stream {kafka_stream_rate:,.0f}/s "
        f"({share_rate / kafka_stream_rate:.2f})"
    )
    return batch_rate / kafka_rate, share_rate / kafka_stream_rate


def one_size(
    spark: Any, records: int, batch: int, tasks: int, memory: MemoryWatch, rounds: int = 1
) -> dict[str, Any]:
    from shareq.client import Admin, Producer

    with (
        tempfile.TemporaryDirectory(prefix="shareq-bench-") as tmp,
        broker_process(Path(tmp) / "broker") as bootstrap,
    ):
        with Admin(bootstrap) as admin:
            admin.create_topic("bench", PARTITIONS)
        started = time.monotonic()
        with Producer(bootstrap) as producer:
            for i in range(records):
                producer.send("bench", _value(i % PARTITIONS, i // PARTITIONS), partition=i % PARTITIONS)
            producer.flush()
        print(f"  produced {records} records of {VALUE_BYTES} B in {time.monotonic() - started:.1f} s")

        memory.reset()
        share, share_rss = run_stream(
            share_stream(bootstrap, spark, "bench", batch, tasks), Path(tmp) / "ckpt-share", memory
        )
        share_mem = (memory.jvm_peak, memory.python_peak, memory.python_sum_peak)
        batch_rate = run_batch(spark, bootstrap, tasks, records)
        # The ceiling gets the share source's actual micro-batch size: both pay the same per-batch cost.
        sizes = [int(p["numInputRows"]) for p in share.recentProgress if p["numInputRows"]]
        same_batch = max(1, round(sum(sizes) / len(sizes))) if sizes else batch
        mem_query, _ = run_stream(
            spark.readStream.format("membench")
            .option("records", str(records))
            .option("batch", str(same_batch))
            .option("tasks", str(tasks))
            .load(),
            Path(tmp) / "ckpt-memory",
            memory,
        )
        kafka_rate = kafka_stream_rate = 0.0
        kafka_query = None
        if SPARK_KAFKA_JARS:
            kafka_rate = run_kafka_batch(spark, bootstrap, tasks, records)
            kafka_query, _ = run_stream(
                kafka_stream(bootstrap, spark, batch, tasks), Path(tmp) / "ckpt-kafka", memory
            )
            kafka_stream_rate, _, _ = steady_rate(kafka_query)
        ratios = []
        if kafka_rate and kafka_stream_rate:
            ratios.append((batch_rate / kafka_rate, steady_rate(share)[0] / kafka_stream_rate))
            for n in range(1, rounds):
                ratios.append(paired_round(spark, bootstrap, records, batch, tasks, Path(tmp), n, memory))
    for name, query in (("share", share), ("memory", mem_query), ("kafka stream", kafka_query)):
        if query is None:
            continue
        phases = [p["durationMs"] for p in query.recentProgress if p["numInputRows"]][1:]
        keys = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")
        means = {k: sum(int(p.get(k, 0)) for p in phases) // max(1, len(phases)) for k in keys}
        print(f"  {name} mean ms per micro-batch: " + ", ".join(f"{k} {v}" for k, v in means.items()))
    share_rate, rows, batches = steady_rate(share)
    ceiling, _, _ = steady_rate(mem_query)
    return {
        "records": records,
        "share": share_rate,
        "batch": batch_rate,
        "memory": ceiling,
        "kafka": kafka_rate,
        "kafka_stream": kafka_stream_rate,
        "ratios": ratios,
        "per_batch": rows / batches if batches else 0.0,
        "batches": len(sizes),
        "fixed_share": fixed_cost_ms(share),
        "fixed_memory": fixed_cost_ms(mem_query),
        "jvm_peak_mb": share_mem[0] / 1024,
        "py_peak_mb": share_mem[1] / 1024,
        "py_sum_mb": share_mem[2] / 1024,
        "py_first_mb": (share_rss[1] if len(share_rss) > 1 else 0) / 1024,
        "py_last_mb": (share_rss[-1] if share_rss else 0) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200000,1000000", help="records per run, comma-separated")
    parser.add_argument(
        "--batch", type=int, default=200_000, help="maxRecordsPerTrigger (at most a fifth of the size)"
    )
    parser.add_argument("--tasks", type=int, default=4, help="read tasks per micro-batch")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds of shareq's batch and share sources each beside Spark's connector (median ratio)",
    )
    args = parser.parse_args()

    if SPARK_KAFKA_JARS:  # on the driver's classpath only when its JVM starts
        os.environ.setdefault(
            "PYSPARK_SUBMIT_ARGS", f"--jars {','.join(map(str, SPARK_KAFKA_JARS))} pyspark-shell"
        )
    else:
        print("Spark's Kafka connector is not resolved (make kafka): its columns are 0")
    from shareq.spark.local import local_spark

    spark = local_spark("shareq-bench")
    spark.dataSource.register(MemorySource)
    memory = MemoryWatch()
    results = []
    try:
        for size in (int(x) for x in args.sizes.split(",")):
            print(f"size {size}:")
            # At least five micro-batches, so that steady state excludes the first.
            results.append(
                one_size(spark, size, min(args.batch, max(1, size // 5)), args.tasks, memory, args.rounds)
            )
    finally:
        memory.stop()
        spark.stop()
    print(
        f"\n{'records':>9} {'share/s':>10} {'batch/s':>10} {'memory/s':>10} {'share/batch':>11} "
        f"{'rec/ubatch':>10} {'ubatches':>8} {'fixed ms':>8} {'(memory)':>8} "
        f"{'JVM MB':>7} {'py MB':>6} {'py sum':>7} {'py 1st->last':>13}"
    )
    for r in results:
        print(
            f"{r['records']:>9} {r['share']:>10,.0f} {r['batch']:>10,.0f} {r['memory']:>10,.0f} "
            f"{r['share'] / r['batch'] if r['batch'] else 0:>11.2f} {r['per_batch']:>10,.0f} "
            f"{r['batches']:>8} {r['fixed_share']:>8.0f} {r['fixed_memory']:>8.0f} "
            f"{r['jvm_peak_mb']:>7.0f} {r['py_peak_mb']:>6.0f} {r['py_sum_mb']:>7.0f} "
            f"{r['py_first_mb']:>6.0f}->{r['py_last_mb']:<6.0f}"
        )
    print(
        f"\n{'records':>9} {'kafka/s':>10} {'batch/s':>10} {'batch/kafka':>11} "
        f"{'kafka str/s':>11} {'share/s':>10} {'share/kafka str':>15}"
    )
    for r in results:
        print(
            f"{r['records']:>9} {r['kafka']:>10,.0f} {r['batch']:>10,.0f} "
            f"{r['batch'] / r['kafka'] if r['kafka'] else 0:>11.2f} {r['kafka_stream']:>11,.0f} "
            f"{r['share']:>10,.0f} {r['share'] / r['kafka_stream'] if r['kafka_stream'] else 0:>15.2f}"
        )
    for r in results:
        if len(r["ratios"]) > 1:
            batch_ratios = sorted(b for b, _ in r["ratios"])
            share_ratios = sorted(sh for _, sh in r["ratios"])
            print(
                f"{r['records']:>9} median of {len(r['ratios'])} rounds: batch/kafka "
                f"{statistics.median(batch_ratios):.2f} ({', '.join(f'{x:.2f}' for x in batch_ratios)}), "
                f"share/kafka str {statistics.median(share_ratios):.2f} "
                f"({', '.join(f'{x:.2f}' for x in share_ratios)})"
            )
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        "targets: batch/kafka >= 1, share/batch >= 0.6 and share/kafka stream >= 0.8 on shareq's defaults; "
        "RSS flat in the number of micro-batches (2 shared cores: noisy); compare the share stream with "
        "memory/s, Spark's own ceiling at the same micro-batch size"
    )


if __name__ == "__main__":
    main()
