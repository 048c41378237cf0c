"""The harness's account of broker deaths: an exit nobody asked for is a death (handed over once, with the
tail of the broker's stderr), one the test caused or announced is not."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import broker_harness
import pytest
from broker_harness import BrokerProcess

pytestmark = pytest.mark.integration


def _sigkill_from_outside(broker: BrokerProcess) -> None:
    assert broker.process is not None
    os.kill(broker.process.pid, signal.SIGKILL)
    broker.process.wait(timeout=10)


def test_a_broker_that_died_is_reported_once_even_if_killed_or_restarted_afterwards(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        _sigkill_from_outside(broker)
        broker.start()  # a restart does not hide the death
        broker.kill()
        [death] = broker_harness.take_deaths()
        assert f"shareq broker {broker.bootstrap} died (exit status -9)" in death
        assert broker_harness.take_deaths() == []
    finally:
        broker.kill()


def test_kills_restarts_and_announced_exits_are_no_deaths(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        broker.kill()
        broker.start()
        broker.expect_exit()  # the test lets it die (here: from outside)
        _sigkill_from_outside(broker)
        assert broker_harness.take_deaths() == []
    finally:
        broker.kill()
