"""One local Spark session and one broker per test module (a session takes seconds to start)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

WINDOW_BOUND = 20_000


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
