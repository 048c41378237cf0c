"""``shareq dlq describe`` and ``shareq dlq redrive`` against a broker holding real dead letters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import AcknowledgeType, Producer
from share_consumers import FAST, SHARE_BROKER, share_consumer

from shareq.cli.dlq import read_topic
from shareq.cli.main import main
from shareq.client import Admin, ConfigResource, ResourceType
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

N = 40


def _cli(bootstrap: str, *args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--bootstrap", bootstrap, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _dead_letters(broker: EmbeddedBroker) -> None:
    """Group g rejects the odd records of topic src (2 partitions) into dlq.src."""
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("src", 2)
        admin.create_topic("back", 1)
        admin.alter_configs(
            ConfigResource(ResourceType.GROUP, "g"),
            {
                "errors.deadletterqueue.topic.name": "dlq.src",
                "errors.deadletterqueue.copy.record.enable": "true",
            },
        )
    producer = Producer({"bootstrap.servers": broker.bootstrap, **FAST})
    for i in range(N):
        producer.produce("src", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2, headers=[("h", b"%d" % i)])
    assert producer.flush(15) == 0
    seen: set[bytes] = set()
    consumer = share_consumer(broker.bootstrap, "g", ["src"], **{"share.acknowledgement.mode": "explicit"})
    try:
        deadline = time.monotonic() + 30
        while len(seen) < N:
            assert time.monotonic() < deadline
            messages = consumer.poll(0.2)
            for m in messages:
                seen.add(m.value())
                odd = int(m.value()[1:]) % 2
                consumer.acknowledge(m, AcknowledgeType.REJECT if odd else AcknowledgeType.ACCEPT)
            if messages:
                consumer.commit_sync()
    finally:
        consumer.close()
    deadline = time.monotonic() + 15
    while len(read_topic(broker.bootstrap, "dlq.src")) < N // 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_describe_and_redrive_after_a_kill(tmp_path: Path) -> None:
    config = {**SHARE_BROKER, "errors.deadletterqueue.auto.create.topics.enable": "true"}
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        _dead_letters(broker)
        described = _cli(broker.bootstrap, "dlq", "describe", "g")
        assert described["dlq_topic"] == "dlq.src" and described["total"] == N // 2
        assert {(r["topic"], r["partition"], r["cause"], r["count"]) for r in described["by_source"]} == {
            ("src", 1, "Offset rejected by client.", N // 2)  # odd records were all produced to partition 1
        }
        dry = _cli(broker.bootstrap, "dlq", "redrive", "--from", "dlq.src", "--to", "back")
        assert dry["dry_run"] and dry["would_move"] == N // 2
        assert read_topic(broker.bootstrap, "back") == []  # a dry run moves nothing
        filtered = _cli(broker.bootstrap, "dlq", "redrive", "--from", "dlq.src", "--filter-cause", "exceeded")
        assert (filtered["would_move"], filtered["skipped"]) == (0, N // 2)  # all were rejected by the client
        # a paced redrive in another process, SIGKILLed midway
        command = [sys.executable, "-m", "shareq", "dlq", "redrive", "--from", "dlq.src", "--to", "back"]
        command += ["--execute", "--rate", "10", "--bootstrap", broker.bootstrap]
        child = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy()
        )
        try:
            deadline = time.monotonic() + 30
            while len(read_topic(broker.bootstrap, "back")) < 5:
                assert time.monotonic() < deadline and child.poll() is None
                time.sleep(0.1)
        finally:
            child.kill()
            child.wait(10)
        before = len(read_topic(broker.bootstrap, "back"))
        assert before < N // 2, "the kill came too late to test resuming"
        resumed = _cli(
            broker.bootstrap,
            "dlq",
            "redrive",
            "--from",
            "dlq.src",
            "--to",
            "back",
            "--execute",
            "--idle",
            "2",
        )
        back = read_topic(broker.bootstrap, "back")
        values = [r.value for r in back]
        assert set(values) == {b"v%d" % i for i in range(1, N, 2)}  # nothing lost
        assert len(values) - N // 2 <= 1  # at most the record in flight at the kill, twice
        assert resumed["moved"] == N // 2 - before + (len(values) - N // 2)
        for r in back:
            assert r.key == b"k" + r.value[1:] and r.headers == (("h", r.value[1:]),)  # no __dlq headers
