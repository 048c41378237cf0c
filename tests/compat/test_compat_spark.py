"""The Spark share-group source against Kafka and shareq: a ``maxRecordsPerTrigger`` above what the
cluster lets a group hold in flight is met with a warning naming the window the group got, and the
query carries on with micro-batches of that window, draining every record once.

A deliberate difference: Kafka bounds a group's window at 4,000 records by default (its in-flight
state is per record); shareq's default bound is 1,000,000 (its state is run-length), so on shareq's
defaults the source gets micro-batches of ``maxRecordsPerTrigger`` and warns of nothing.

The query runs in a child process (``local[2]``), as a user's ``spark-submit`` would: the source's
driver side lives in a Python worker whose log reaches the child's stderr, which is where a user
sees the warning. The output is read back with pyarrow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from compat_support import FAST, Server, create_topic
from confluent_kafka import Producer

from ci_support import require
from shareq.client import Admin, ConfigResource, ResourceType

require("pyspark")

# Both runs on the worker that owns the Kafka node, one Spark at a time.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.xdist_group("kafka"),
    pytest.mark.timeout(420),
]

WINDOW_BOUND = "group.share.max.partition.max.record.locks"
KAFKA_DEFAULT_WINDOW = 2_000  # share.partition.max.record.locks when a group does not set it
DEFAULT_BOUND = {"kafka": 4_000, "shareq": 1_000_000}  # group.share.max.partition.max.record.locks
RECORDS, PRODUCER_BATCH, TRIGGER = 6_000, 500, 12_000

_QUERY = textwrap.dedent(
    """
    import json, sys
    from shareq.spark.local import local_spark
    bootstrap, topic, group, trigger, out, ckpt = sys.argv[1:7]
    spark = local_spark("shareq-compat-window")
    query = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("group.id", group)
        .option("startingOffsets", "earliest")
        .option("share.record.lock.duration.ms", "30000")
        .option("maxRecordsPerTrigger", trigger)
        .load()
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    print(json.dumps({"sizes": sizes, "error": str(query.exception() or "")}))
    spark.stop()
    """
)


def _produce_in_batches(server: Server, topic: str, values: list[bytes]) -> None:
    """Producer batches of at most PRODUCER_BATCH records (a share-partition acquires whole batches, so
    this bounds how far one acquisition can pass the window)."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, **FAST})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=0)
        if i % PRODUCER_BATCH == PRODUCER_BATCH - 1:
            assert producer.flush(15) == 0
    assert producer.flush(15) == 0


def _broker_window_bound(server: Server) -> int:
    with Admin(server.bootstrap) as admin:
        brokers = admin.cluster.refresh_metadata([]).brokers
        resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
        entry = admin.describe_configs([resource], keys=[WINDOW_BOUND])[resource][WINDOW_BOUND]
        return int(entry.value)


def _lag(server: Server, group: str, topic: str) -> int | None:
    """The group's lag on the partition (Kafka's reported start offset trails its last state write; the
    lag does not)."""
    with Admin(server.bootstrap) as admin:
        return admin.describe_share_group_offsets(group, {topic: [0]})[(topic, 0)].lag


def test_spark_share_source_fills_micro_batches_up_to_the_window_bound_and_drains_every_record_once(
    server: Server, names: tuple[str, str], tmp_path: Path
) -> None:
    """maxRecordsPerTrigger against the broker's default window bound. On Kafka (bound 4,000, below the
    trigger) the Spark share source warns with the window it got and its micro-batches pass Kafka's
    default window but stay within the bound; on shareq (bound 1,000,000: the deliberate difference) it
    warns of nothing and its micro-batches pass Kafka's bound. Either way every record arrives once."""
    topic, group = names
    bound = _broker_window_bound(server)
    assert bound == DEFAULT_BOUND[server.kind]
    create_topic(server, topic, 1)
    values = [f"{topic}-{i}".encode() for i in range(RECORDS)]
    _produce_in_batches(server, topic, values)

    script = tmp_path / "query.py"
    script.write_text(_QUERY)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    args = [server.bootstrap, topic, group, str(TRIGGER), str(out), str(ckpt)]
    child = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the child, its JVM and Python workers are killed as one group
    )
    try:
        stdout, stderr = child.communicate(timeout=360)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert child.returncode == 0, stderr[-3000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["error"] == "", result["error"]

    warnings = [line for line in stderr.splitlines() if "in-flight window" in line]
    if bound < TRIGGER:
        assert any(
            group in w and f"of {bound} records per partition" in w and f"maxRecordsPerTrigger={TRIGGER}" in w
            for w in warnings
        ), stderr[-3000:]
    else:
        assert not any("micro-batches will be smaller" in w for w in warnings), warnings

    assert "availableNow ends" not in stderr  # the run ended because the group was drained

    sizes = result["sizes"]
    assert sum(sizes) == RECORDS
    # The group's window was raised past the default and capped at the bound (plus at most the
    # producer batch that straddles it), or, under a bound above the trigger, a micro-batch held more
    # than Kafka's bound allows (all of them unless the source's acquisition time budget ran out).
    if bound < TRIGGER:
        assert KAFKA_DEFAULT_WINDOW < max(sizes) <= bound + PRODUCER_BATCH, sizes
    else:
        assert max(sizes) > DEFAULT_BOUND["kafka"] + PRODUCER_BATCH, sizes

    import pyarrow.parquet as pq

    table = pq.read_table(out, columns=["partition", "offset", "value", "deliveryCount"])
    assert sorted(table.column("offset").to_pylist()) == list(range(RECORDS))  # every record, once
    assert sorted(table.column("value").to_pylist()) == sorted(values)
    assert set(table.column("deliveryCount").to_pylist()) == {1}

    # Every record was acknowledged: nothing is left for the group to deliver.
    deadline = time.monotonic() + 30
    while (lag := _lag(server, group, topic)) != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lag == 0
