"""``shareq groups`` and ``shareq offsets`` on consumer groups (KIP-848 and classic), driven by
librdkafka consumers: describe members and assignments, committed offsets and lag, reset and
delete offsets once the group is empty."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from test_cli_share import Cli

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", config={"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


@pytest.fixture
def cli(broker: EmbeddedBroker) -> Cli:
    return Cli(broker.bootstrap)


def _consume_and_commit(broker: EmbeddedBroker, group: str, count: int, **extra: Any) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )
    consumer.subscribe(["orders"])
    got = 0
    deadline = time.monotonic() + 30
    while got < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got += 1
            consumer.commit(message, asynchronous=False)
    assert got == count
    return consumer


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_consumer_group_describe_and_offsets(cli: Cli, broker: EmbeddedBroker, protocol: str) -> None:
    cli("topics", "create", "orders", "-p", "1")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce("orders", value=b"o%d" % i, partition=0)
    assert producer.flush(10) == 0
    consumer = _consume_and_commit(broker, "billing", 3, **{"group.protocol": protocol})
    try:
        assert {"group": "billing", "state": "Stable", "type": protocol} in cli.json("groups", "list")
        described = cli.json("groups", "describe", "billing")
        assert (described["type"], len(described["members"])) == (protocol, 1)
        assert described["members"][0]["assignment"] == {"orders": [0]}
        assert "MEMBER-ID" in cli("groups", "describe", "billing").output
        busy = cli("offsets", "alter", "billing", "--topic", "orders", "--to-earliest", "--execute", ok=False)
        assert "only be altered while it has no members" in busy.output
    finally:
        consumer.close()
    offsets = cli.json("offsets", "describe", "billing")
    assert [(o["topic"], o["offset"], o["log_end_offset"], o["lag"]) for o in offsets] == [
        ("orders", 3, 5, 2)
    ]
    assert "LOG-END-OFFSET" in cli("offsets", "describe", "billing").output
    plan = cli.json("offsets", "alter", "billing", "--topic", "orders", "--to-earliest")
    assert (plan["executed"], plan["offsets"][0]["current"], plan["offsets"][0]["new"]) == (False, 3, 0)
    assert cli.json("offsets", "describe", "billing")[0]["offset"] == 3  # a dry run changes nothing
    cli("offsets", "alter", "billing", "--topic", "orders", "--to-offset", "1", "--execute")
    assert cli.json("offsets", "describe", "billing")[0]["lag"] == 4
    assert "dry run" in cli("offsets", "delete", "billing", "--topic", "orders").output
    cli("offsets", "delete", "billing", "--topic", "orders", "--execute")
    assert cli.json("offsets", "describe", "billing") == []
    # a consumer starting now begins where auto.offset.reset says: the offsets are gone
    again = _consume_and_commit(broker, "billing", 5, **{"group.protocol": protocol})
    again.close()
    assert cli.json("offsets", "describe", "billing")[0]["offset"] == 5
    assert "deleted consumer group billing" in cli("groups", "delete", "billing").output
    assert "does not exist" in cli("groups", "describe", "billing", ok=False).output


def test_console_consumer_in_a_consumer_group(cli: Cli) -> None:
    """``consume --mode consumer`` joins a KIP-848 group, prints records and commits them: a second run
    starts where the first stopped."""
    cli("topics", "create", "orders", "-p", "2")
    cli("produce", "--topic", "orders", "--partition", "0", input="a\nb\nc\n")
    cli("produce", "--topic", "orders", "--partition", "1", input="d\ne\n")
    args = ("consume", "--group", "audit", "--topic", "orders", "--mode", "consumer")
    first = cli(*args, "--max-records", "5", "--timeout", "20")
    assert sorted(first.stdout.split()) == ["a", "b", "c", "d", "e"]
    committed = cli.json("offsets", "describe", "audit")
    assert [(o["partition"], o["offset"], o["lag"]) for o in committed] == [(0, 3, 0), (1, 2, 0)]
    cli("produce", "--topic", "orders", "--partition", "1", input="f\n")
    second = cli(*args, "--max-records", "1", "--timeout", "20")
    assert second.stdout.split() == ["f"]
    assert cli.json("groups", "describe", "audit")["state"] == "Empty"
