"""Past one machine: the share-group source on a Spark standalone cluster (a master and two workers
started from pyspark's own ``spark-class``; executors are separate JVMs with their own Python workers)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("spark")]


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://`` URL of a master with two one-core workers; every process is killed at the end."""
    from shareq.spark.local import worker_environment

    worker_environment()
    work = tmp_path_factory.mktemp("spark-cluster")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(work), SPARK_WORKER_DIR=str(work))
    port = _port()
    master = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> None:
        procs.append(
            subprocess.Popen(
                [_spark_class(), *args],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    try:
        start(
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(_port()),
        )
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert time.monotonic() < deadline, "the Spark master did not start"
            assert procs[0].poll() is None, "the Spark master exited"
            time.sleep(0.2)
        for _ in range(2):
            start(
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(_port()),
                master,
            )
        yield master
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from shareq.server import EmbeddedBroker

    config = {"group.share.max.partition.max.record.locks": 100_000}
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), config=config) as running:
        yield running


@pytest.mark.timeout(300)
def test_a_standalone_cluster_drains_a_share_group_with_every_record_once(
    cluster: str, broker: Any, tmp_path: Path
) -> None:
    from shareq.client import Admin, Producer
    from shareq.spark.local import local_spark

    with Admin(broker.bootstrap) as admin:
        admin.create_topic("cluster", 4)
    values = [f"k-{i}".encode() for i in range(8_000)]
    with Producer(broker.bootstrap) as producer:
        for i, value in enumerate(values):
            producer.send("cluster", value, partition=i % 4)
        producer.flush()

    spark = local_spark(
        "shareq-cluster-test",
        master=cluster,
        **{"spark.executor.cores": "1", "spark.executor.memory": "512m", "spark.cores.max": "2"},
    )
    try:
        assert spark.sparkContext.master == cluster
        query = (
            spark.readStream.format("shareq")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "cluster")
            .option("group.id", "g-cluster")
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", "3000")
            .option("minPartitions", "4")
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(240)
        assert query.exception() is None
        rows = spark.read.parquet(str(tmp_path / "out")).select("value", "deliveryCount").collect()
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    finally:
        spark.stop()
    assert executors == 2  # two executor JVMs on the two workers, beside the driver
    assert sorted(bytes(r.value) for r in rows) == sorted(values)  # every record, once
    assert all(r.deliveryCount == 1 for r in rows)
