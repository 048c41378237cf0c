"""One local Spark session and one broker per test module (a session takes seconds to start)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")


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
    with EmbeddedBroker(data) as running:
        yield running
