"""``shareq serve``: ready line, clean SIGTERM shutdown, persistent metadata, config errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from broker_harness import FAST_FAILURE, BrokerProcess
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.integration]


@pytest.mark.timeout(60)
def test_sigterm_is_clean_and_metadata_survives_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "num.partitions=3")
    broker.start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, **FAST_FAILURE})
        producer.produce("auto-created", b"v")
        assert producer.flush(10) == 0
        before = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert len(before.topics["auto-created"].partitions) == 3
        assert broker.terminate() == 0
        assert any("shutting down" in line for line in broker.stderr_lines)

        broker.start()
        after = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert after.cluster_id == before.cluster_id
        assert len(after.topics["auto-created"].partitions) == 3
    finally:
        broker.kill()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("pair", ["no.such.key=1", "num.partitions=zero", "num.partitions=0", "novalue"])
def test_bad_config_is_a_clear_error(tmp_path: Path, pair: str) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "shareq",
            "serve",
            "--data-dir",
            str(tmp_path),
            "--port",
            "0",
            "--config",
            pair,
        ],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode != 0
    assert "--config" in result.stderr
    assert pair.split("=")[0] in result.stderr
