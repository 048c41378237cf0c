"""Kafka's own Java share consumer (the ConsoleShareConsumer tool, on KafkaShareConsumer) against Kafka and
shareq: the same records, the same acknowledgements."""

from __future__ import annotations

import pytest
from compat_support import Server, create_topic, earliest_group, produce, wait_equal

from kafka_harness import run_tool
from shareq.client import Admin

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("java_tools")]

CONSOLE_SHARE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"


def _console_share_consumer(server: Server, topic: str, group: str, count: int, *extra: str) -> list[str]:
    result = run_tool(
        CONSOLE_SHARE_CONSUMER,
        "--bootstrap-server",
        server.bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--max-messages",
        str(count),
        "--timeout-ms",
        "20000",
        "--formatter-property",
        "print.offset=true",
        *extra,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return sorted(line for line in result.stdout.splitlines() if line.startswith("Offset:"))


def test_java_share_consumer_reads_every_record(server: Server, names: tuple[str, str]) -> None:
    """ConsoleShareConsumer (implicit acknowledgement) prints each of 5 records once, with its offset."""
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    produce(server, topic, [b"java%d" % i for i in range(5)])
    lines = _console_share_consumer(server, topic, group, 5)
    assert lines == [f"Offset:{i}\tjava{i}" for i in range(5)]


def test_java_share_consumer_rejects(server: Server, names: tuple[str, str]) -> None:
    """ConsoleShareConsumer --reject: 3 records printed, then none left for the group (lag 0)."""
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    produce(server, topic, [b"r%d" % i for i in range(3)])
    assert len(_console_share_consumer(server, topic, group, 3, "--reject")) == 3

    def lag() -> int | None:
        with Admin(server.bootstrap) as admin:
            return admin.describe_share_group_offsets(group, {topic: [0]})[(topic, 0)].lag

    wait_equal(lag, 0, timeout=15)
