"""One local Spark session and one broker per test module (a session takes seconds to start)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ci_support import missing, require

require("pyspark")

WINDOW_BOUND = 20_000

# Spark's own Kafka connector (tests/spark-kafka/pom.xml, resolved by `make setup`). Jars reach the
# driver's classpath only when its JVM starts, so every Spark session of these tests gets them: the
# first session in a process starts the JVM for all that follow.
SPARK_KAFKA_JARS = sorted((Path(__file__).resolve().parents[1] / "spark-kafka" / "lib").glob("*.jar"))
if SPARK_KAFKA_JARS and "PYSPARK_SUBMIT_ARGS" not in os.environ:
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(map(str, SPARK_KAFKA_JARS))} pyspark-shell"


@pytest.fixture(scope="module")
def spark_kafka_connector() -> None:
    """Skip (fail in CI) without Spark's Kafka connector."""
    if not any(jar.name.startswith("spark-sql-kafka") for jar in SPARK_KAFKA_JARS):
        reason = "Spark's Kafka connector is not resolved (make setup needs Java and Maven)"
        missing(reason)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from shareq.spark.local import local_spark

    session = local_spark("shareq-tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from shareq.server import EmbeddedBroker

    data: Path = tmp_path_factory.mktemp("broker")
    # The bound on a group's in-flight window, raised so that micro-batches can exceed Kafka's
    # default window of 2,000 records per partition (and low enough to test the cap).
    config = {"group.share.max.partition.max.record.locks": WINDOW_BOUND}
    with EmbeddedBroker(data, config=config) as running:
        yield running
