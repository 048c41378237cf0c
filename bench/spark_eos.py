"""The exactly-once Spark pipeline against the same pipeline at least once, in one run.

One broker subprocess (``share.transactional.acks.enable=true``), N records of 100 B on 4
partitions, copied twice (one input topic per mode, so both start from the same state). Each mode
runs one query: the share-group source → a stateless transform (a prefix on the value) → the shareq
topic sink, availableNow with ``maxRecordsPerTrigger``:

* ``at least once``: the source acknowledges each batch after Spark commits it; the sink's tasks
  produce (idempotent producer, one per task);
* ``exactly once``: ``exactlyOnce`` on both sides; the tasks encode rows, the driver's commit claims
  the batch (TxnShareAcknowledge), produces the rows and commits one transaction.

Rates are steady state (rows over trigger time after the first non-empty micro-batch). The modes
alternate over ``--rounds`` rounds (at least once first in odd rounds, exactly once first in even
ones; each round on fresh topics and groups), so neither gains from running second on warm Python
workers. Also the time in the exactly-once sink's commit per micro-batch (from its commit reports)
and the load average, since the machine is shared.
Usage: ``python bench/spark_eos.py [--records N] [--batch N] [--rounds N]``.
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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

VALUE_BYTES = 100
PARTITIONS = 4


@contextlib.contextmanager
def broker_process(data_dir: Path) -> Iterator[str]:
    """``shareq serve`` in its own process (not sharing a GIL with Spark's driver)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configs = ["share.transactional.acks.enable=true"]  # otherwise shareq's defaults
    command = [sys.executable, "-m", "shareq", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    command += ["--log-level=WARNING"]
    for config in configs:
        command += ["--config", config]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening" not in line:
            raise RuntimeError(f"the broker did not start: {line!r}")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def steady_rate(progress: list[dict[str, Any]]) -> tuple[float, int, int]:
    """(rows/s over trigger time after the first non-empty batch, rows counted, batches counted)."""
    batches = [p for p in progress if p["numInputRows"]]
    steady = batches[1:] or batches
    rows = sum(int(p["numInputRows"]) for p in steady)
    ms = sum(int(p["durationMs"]["triggerExecution"]) for p in steady)
    return (rows * 1000.0 / ms if ms else 0.0), rows, len(steady)


def run(
    spark: Any, bootstrap: str, mode: str, tag: str, batch: int, tasks: int, checkpoint: Path
) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    eos = "true" if mode == "eos" else "false"
    df = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", f"in-{tag}")
        .option("group.id", f"g-{tag}")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", str(batch))
        .option("minPartitions", str(tasks))
        .option("exactlyOnce", eos)
        .load()
    )
    out = df.select(F.col("key"), F.concat(F.lit(b"out:"), F.col("value")).alias("value"))
    query = (
        out.writeStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", f"out-{tag}")
        .option("exactlyOnce", eos)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    return list(query.recentProgress)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=50_000, help="maxRecordsPerTrigger")
    parser.add_argument("--tasks", type=int, default=4, help="minPartitions")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from shareq.client import Admin, Producer
    from shareq.spark.eos import eos_reports
    from shareq.spark.local import local_spark

    spark = local_spark("shareq-bench-eos")
    rates: dict[str, list[float]] = {"alo": [], "eos": []}
    commits: list[float] = []
    dropped = written = 0
    with (
        tempfile.TemporaryDirectory(prefix="shareq-bench-") as tmp,
        broker_process(Path(tmp) / "b") as bootstrap,
    ):
        tags = [f"{mode}{r}" for r in range(args.rounds) for mode in ("alo", "eos")]
        with Admin(bootstrap) as admin:
            for tag in tags:
                admin.create_topic(f"in-{tag}", PARTITIONS)
                admin.create_topic(f"out-{tag}", PARTITIONS)
        with Producer(bootstrap) as producer:
            for i in range(args.records):
                value = (b"%d:" % i).ljust(VALUE_BYTES, b"x")
                for tag in tags:
                    producer.send(f"in-{tag}", value, key=b"%d" % i, partition=i % PARTITIONS)
            producer.flush()
        print(f"load average before: {os.getloadavg()}")
        print(
            f"{args.records:,} records of {VALUE_BYTES} B, {PARTITIONS} partitions, "
            f"maxRecordsPerTrigger {args.batch:,}, {args.tasks} tasks"
        )
        for r in range(args.rounds):
            for mode in ("alo", "eos") if r % 2 == 0 else ("eos", "alo"):
                tag = f"{mode}{r}"
                started = time.monotonic()
                progress = run(spark, bootstrap, mode, tag, args.batch, args.tasks, Path(tmp) / f"ckpt-{tag}")
                wall = time.monotonic() - started
                rate, rows, batches = steady_rate(progress)
                rates[mode].append(rate)
                with Admin(bootstrap) as admin:
                    end = sum(o.offset for o in admin.list_offsets(f"out-{tag}").values())
                name = "exactly once " if mode == "eos" else "at least once"
                print(
                    f"round {r + 1}  {name}  {rate:>10,.0f} rec/s steady ({rows:,} rows in {batches} "
                    f"batches), {wall:.1f} s wall, output log end {end:,}"
                )
                if mode == "eos":
                    reports = [
                        x for x in eos_reports(str(Path(tmp) / f"ckpt-{tag}")) if x["claimed"] or x["dropped"]
                    ]
                    commits += [float(x["commitMs"]) for x in reports]
                    dropped += sum(1 for x in reports if x["dropped"])
                    written += sum(int(x["written"]) for x in reports)
        load = os.getloadavg()
    spark.stop()

    alo, eos = statistics.mean(rates["alo"]), statistics.mean(rates["eos"])
    print(f"mean: at least once {alo:,.0f} rec/s, exactly once {eos:,.0f} rec/s")
    print(f"ratio           {eos / alo if alo else 0:.2f}x (target >= 0.5x)")
    if commits:
        print(
            f"sink commit per micro-batch: mean {statistics.mean(commits):,.0f} ms, "
            f"median {statistics.median(commits):,.0f} ms, max {max(commits):,.0f} ms over {len(commits)} "
            f"batches ({dropped} dropped); {written:,} rows written"
        )
    print("(exactly once: the output log end counts one commit marker per partition per batch)")
    print(f"load average after: {load}")


if __name__ == "__main__":
    main()
