"""The same Spark queries on shareq and on a three-node Kafka 4.4 cluster, one after the other.

Per target (one shareq broker subprocess; then three KRaft nodes with the topic replicated on all
three, as a team that outgrew one node runs it), N records of 100 B are produced to a 4-partition
topic and read by four queries into Spark's ``noop`` sink:

* ``kafka batch``: Spark's own connector, ``spark.read.format("kafka")`` (warm second run);
* ``shareq batch``: shareq's batch source, ``spark.read.format("shareq")`` (warm second run);
* ``shareq share``: shareq's share-group stream (availableNow, ``maxRecordsPerTrigger``; steady
  rate after the first micro-batch);
* ``kafka stream``: Spark's connector as a stream (availableNow, ``maxOffsetsPerTrigger``).

The same client code runs on both targets: only ``kafka.bootstrap.servers`` changes. Prints rows/s
per query and target, and each shareq query's ratio to Spark's connector on the same target.
Needs Kafka's jars and Spark's Kafka connector (``make kafka``).

    PYTHONPATH=src python bench/spark_on_kafka.py [--records 1000000] [--batch 200000] [--tasks 4]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kafka_harness import kafka_cluster
from spark_source import (
    PARTITIONS,
    SPARK_KAFKA_JARS,
    VALUE_BYTES,
    MemoryWatch,
    _value,
    broker_process,
    run_batch,
    run_kafka_batch,
    run_stream,
    steady_rate,
)

QUERIES = ("kafka batch", "shareq batch", "shareq share", "kafka stream")


@contextlib.contextmanager
def target(kind: str, directory: Path) -> Iterator[tuple[str, int]]:
    """(bootstrap, replication factor) of a running shareq broker or three-node Kafka cluster."""
    if kind == "shareq":
        with broker_process(directory) as bootstrap:
            yield bootstrap, 1
    else:
        configs = {"group.share.max.partition.max.record.locks": "10000"}  # Kafka's upper bound
        with kafka_cluster(directory, 3, configs) as cluster:
            yield cluster.bootstrap, 3


def produce(bootstrap: str, records: int, replication: int) -> None:
    from shareq.client import Admin, Producer

    with Admin(bootstrap, request_timeout=30) as admin:
        admin.create_topic("bench", PARTITIONS, replication_factor=replication)
        admin.cluster.wait_for_topic("bench", 30)
    started = time.monotonic()
    with Producer(bootstrap) as producer:
        for i in range(records):
            producer.send("bench", _value(i % PARTITIONS, i // PARTITIONS), partition=i % PARTITIONS)
        producer.flush()
    print(f"  produced {records} records of {VALUE_BYTES} B in {time.monotonic() - started:.1f} s")


def queries(spark: Any, bootstrap: str, records: int, batch: int, tasks: int, tmp: Path) -> dict[str, float]:
    memory = MemoryWatch()
    try:
        share, _ = run_stream(
            spark.readStream.format("shareq")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "bench")
            .option("group.id", f"bench-{time.monotonic_ns()}")
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", str(batch))
            .option("minPartitions", str(tasks))
            .load(),
            tmp / "ckpt-share",
            memory,
        )
        kafka_stream, _ = run_stream(
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "bench")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(batch))
            .option("minPartitions", str(tasks))
            .load(),
            tmp / "ckpt-kafka",
            memory,
        )
    finally:
        memory.stop()
    return {
        "kafka batch": run_kafka_batch(spark, bootstrap, tasks, records),
        "shareq batch": run_batch(spark, bootstrap, tasks, records),
        "shareq share": steady_rate(share)[0],
        "kafka stream": steady_rate(kafka_stream)[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=200_000, help="records per micro-batch")
    parser.add_argument("--tasks", type=int, default=4, help="read tasks (minPartitions)")
    parser.add_argument("--targets", default="shareq,kafka", help="comma-separated: shareq, kafka")
    args = parser.parse_args()
    if not SPARK_KAFKA_JARS:
        sys.exit("Spark's Kafka connector is not resolved: run make kafka first")
    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS", f"--jars {','.join(map(str, SPARK_KAFKA_JARS))} pyspark-shell"
    )
    from shareq.spark.local import local_spark

    spark = local_spark("shareq-bench-on-kafka")
    batch = min(args.batch, max(1, args.records // 5))
    results: dict[str, dict[str, float]] = {}
    try:
        for kind in args.targets.split(","):
            print(f"{kind}:")
            with (
                tempfile.TemporaryDirectory(prefix="shareq-bench-") as tmp,
                target(kind, Path(tmp) / kind) as (bootstrap, replication),
            ):
                produce(bootstrap, args.records, replication)
                results[kind] = queries(spark, bootstrap, args.records, batch, args.tasks, Path(tmp))
    finally:
        spark.stop()
    print(f"\n{args.records:,} records, micro-batches of {batch:,}, {args.tasks} tasks")
    print(
        f"{'target':>8} "
        + " ".join(f"{q:>13}" for q in QUERIES)
        + f" {'batch/kafka':>11} {'share/kstream':>13}"
    )
    for kind, rates in results.items():
        ratios = (
            rates["shareq batch"] / rates["kafka batch"] if rates["kafka batch"] else 0.0,
            rates["shareq share"] / rates["kafka stream"] if rates["kafka stream"] else 0.0,
        )
        print(
            f"{kind:>8} "
            + " ".join(f"{rates[q]:>13,.0f}" for q in QUERIES)
            + f" {ratios[0]:>11.2f} {ratios[1]:>13.2f}"
        )
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
