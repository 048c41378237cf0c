"""shareq's Spark share-group source on a three-node Kafka 4.4 cluster with a broker killed mid-stream:
the query (more read tasks than partitions) carries on and drains the group; nothing is lost, and the
duplicates are counted and printed (acknowledgements sent to the dead leader are lost, so Kafka
redelivers those records). The query runs in a child process, as a user's ``spark-submit`` would."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_support import kafka_cluster

import kafka_harness
from ci_support import require
from shareq.client import Admin, Producer

require("pyspark")

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.xdist_group("kafka"),
    pytest.mark.timeout(600),
]

TOPIC, GROUP, PARTITIONS, RECORDS = "sfailover", "g-sfailover", 6, 30_000

_QUERY = textwrap.dedent(
    """
    import json, sys
    from shareq.spark.local import local_spark
    bootstrap, topic, group, out, ckpt = sys.argv[1:6]
    spark = local_spark("shareq-failover")
    query = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("group.id", group)
        .option("startingOffsets", "earliest")
        .option("share.record.lock.duration.ms", "15000")
        .option("maxRecordsPerTrigger", "2000")
        .option("minPartitions", "8")
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


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[kafka_harness.KafkaCluster]:
    with kafka_cluster(tmp_path / "kafka", 3) as cluster:
        yield cluster


def _committed_files(out: Path) -> int:
    return len(list((out / "_spark_metadata").glob("[0-9]*"))) if (out / "_spark_metadata").exists() else 0


def test_the_spark_share_source_drains_through_a_killed_broker(
    three_nodes: kafka_harness.KafkaCluster, tmp_path: Path
) -> None:
    """Three Kafka nodes: the shareq Spark share source drains a replicated topic while a broker that
    is not the coordinator is killed; every record arrives and micro-batches stay within
    maxRecordsPerTrigger."""
    bootstrap = three_nodes.bootstrap
    with Admin(bootstrap, request_timeout=30) as admin:
        admin.create_topic(TOPIC, PARTITIONS, replication_factor=3)
        admin.cluster.wait_for_topic(TOPIC, 30)
    with Producer(bootstrap, request_timeout=10) as producer:
        for i in range(RECORDS):
            producer.send(TOPIC, b"%d" % i, partition=i % PARTITIONS)
        producer.flush()

    script = tmp_path / "query.py"
    script.write_text(_QUERY)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    child = subprocess.Popen(
        [sys.executable, str(script), bootstrap, TOPIC, GROUP, str(out), str(ckpt)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the child, its JVM and Python workers are killed as one group
    )
    try:
        deadline = time.monotonic() + 240
        while _committed_files(out) < 3:  # a few micro-batches committed: mid-stream
            assert child.poll() is None, child.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no micro-batch committed"
            time.sleep(0.2)
        with Admin(bootstrap) as admin:
            coordinator = admin.cluster.coordinator(GROUP).node_id
        killed = next(n for n in three_nodes.nodes if n.node_id != coordinator)
        killed.kill()
        stdout, stderr = child.communicate(timeout=420)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert child.returncode == 0, stderr[-3000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["error"] == "", result["error"]

    import pyarrow.parquet as pq

    values = pq.read_table(out, columns=["value"]).column("value").to_pylist()
    counts = collections.Counter(values)
    print(
        f"killed broker {killed.node_id} (not the coordinator) mid-stream: {len(counts)} records, "
        f"{len(values) - len(counts)} duplicates, {len(result['sizes'])} micro-batches"
    )
    assert set(counts) == {b"%d" % i for i in range(RECORDS)}  # nothing lost
    assert max(result["sizes"]) <= 2000  # maxRecordsPerTrigger held through the failover
