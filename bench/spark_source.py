"""Share-group source throughput against its ceiling, in one run.

Two streaming queries into Spark's ``noop`` sink, each draining the same records with availableNow:

* ``shareq``: the share-group source against an embedded broker (ShareFetch acquisition on the driver,
  plain Fetch on executors, Arrow batches out);
* ``memory``: a plain Python data source yielding the same rows as Arrow batches from memory, with the
  same schema, micro-batch size and task count: what the Python data source API allows at best.

Rates are steady state: rows over trigger time of every micro-batch after the first non-empty one
(start-up excluded). Usage: ``python bench/spark_source.py [--records N] [--batch N] [--tasks N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
import tempfile
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
PARTITIONS = 3


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
        # Row i lives in partition i % 3 at offset i // 3; split the range into `tasks` slices.
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


@contextlib.contextmanager
def broker_process(data_dir: Path) -> Iterator[str]:
    """``shareq serve`` in its own process: the broker must not share a GIL with Spark's driver."""
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


def run(spark: Any, df: Any, checkpoint: Path) -> Any:
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    return query


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=20_000, help="maxRecordsPerTrigger")
    parser.add_argument("--tasks", type=int, default=6, help="read tasks per micro-batch")
    args = parser.parse_args()

    from shareq.client import Admin, Producer
    from shareq.spark.local import local_spark

    with (
        tempfile.TemporaryDirectory(prefix="shareq-bench-") as tmp,
        broker_process(Path(tmp) / "broker") as bootstrap,
    ):
        with Admin(bootstrap) as admin:
            admin.create_topic("bench", PARTITIONS)
        started = time.monotonic()
        with Producer(bootstrap) as producer:
            for i in range(args.records):
                producer.send("bench", _value(i % PARTITIONS, i // PARTITIONS), partition=i % PARTITIONS)
            producer.flush()
        print(f"produced {args.records} records of {VALUE_BYTES} B in {time.monotonic() - started:.1f} s")

        spark = local_spark("shareq-bench")
        spark.dataSource.register(MemorySource)
        try:
            shareq = run(
                spark,
                spark.readStream.format("shareq")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "bench")
                .option("group.id", "bench")
                .option("startingOffsets", "earliest")
                .option("maxRecordsPerTrigger", str(args.batch))
                .option("minPartitions", str(args.tasks))
                .load(),
                Path(tmp) / "ckpt-shareq",
            )
            # The broker's in-flight cap may make share batches smaller than asked: give the
            # ceiling the same batch size, so both pay the same per-batch overhead.
            sizes = [int(p["numInputRows"]) for p in shareq.recentProgress if p["numInputRows"]]
            same_batch = max(1, round(sum(sizes) / len(sizes))) if sizes else args.batch
            memory = run(
                spark,
                spark.readStream.format("membench")
                .option("records", str(args.records))
                .option("batch", str(same_batch))
                .option("tasks", str(args.tasks))
                .load(),
                Path(tmp) / "ckpt-memory",
            )
        finally:
            spark.stop()
        ceiling, c_rows, c_batches = steady_rate(memory)
        ours, s_rows, s_batches = steady_rate(shareq)
        print(f"memory source (ceiling): {ceiling:12,.0f} records/s  ({c_rows} rows in {c_batches} batches)")
        print(f"shareq share source:     {ours:12,.0f} records/s  ({s_rows} rows in {s_batches} batches)")
        print(f"ratio: {ours / ceiling if ceiling else 0.0:.2f}  (target >= 0.5)")
        for name, query in (("memory", memory), ("shareq", shareq)):
            phases = [p["durationMs"] for p in query.recentProgress if p["numInputRows"]][1:]
            keys = ("latestOffset", "addBatch", "walCommit", "commitOffsets", "triggerExecution")
            means = {k: sum(int(p.get(k, 0)) for p in phases) // max(1, len(phases)) for k in keys}
            print(f"  {name} mean ms per batch: " + ", ".join(f"{k} {v}" for k, v in means.items()))


if __name__ == "__main__":
    main()
