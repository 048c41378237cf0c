"""Integration fixtures: the real broker as a subprocess (``python -m shareq serve``) or embedded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_harness import BrokerProcess

from shareq.embedded import EmbeddedBroker


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def embedded_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data") as broker:
        yield broker
