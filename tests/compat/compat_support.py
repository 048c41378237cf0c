"""What the differential tests share: the broker configs both servers get, and client helpers that do the
same thing against either server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_harness
from ci_support import in_ci
from shareq.client import Admin, ConfigResource, ResourceType

# Broker configs given to both servers (Kafka: server.properties; shareq: --config).
COMMON = {
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "500",
    # The cleaner looks for work every second instead of every 15 s (compaction tests).
    "log.cleaner.backoff.ms": "1000",
}

# librdkafka settings that keep a test in seconds.
FAST = {
    "socket.timeout.ms": 10000,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "topic.metadata.refresh.interval.ms": 1000,
}


@dataclass(frozen=True)
class Server:
    kind: str
    bootstrap: str
    nodes: int = 1


def create_topic(
    server: Server, topic: str, partitions: int = 1, configs: Mapping[str, str] | None = None
) -> None:
    """CreateTopics through confluent-kafka's AdminClient (replicated on every node), then wait until every
    partition has a leader."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})
    new = NewTopic(topic, partitions, server.nodes, config=dict(configs or {}))
    admin.create_topics([new], operation_timeout=15)[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} has no leaders")


def produce(
    server: Server,
    topic: str,
    values: Iterable[bytes],
    *,
    partition: int | Callable[[int], int] = 0,
    timestamps: Iterable[int] | None = None,
    flush_each: bool = False,
) -> None:
    """Produce ``values`` with librdkafka (acks=all); ``partition`` is a number or a function of the index."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, **FAST})
    stamps = list(timestamps) if timestamps is not None else None
    for i, value in enumerate(values):
        p = partition(i) if callable(partition) else partition
        extra: dict[str, Any] = {} if stamps is None else {"timestamp": stamps[i]}
        producer.produce(topic, value=value, partition=p, **extra)
        if flush_each:
            assert producer.flush(15) == 0
    assert producer.flush(15) == 0


def set_group_configs(server: Server, group: str, configs: Mapping[str, str]) -> None:
    """IncrementalAlterConfigs on the GROUP resource (with shareq's admin client: librdkafka has no
    group configs)."""
    resource = ConfigResource(ResourceType.GROUP, group)
    with Admin(server.bootstrap) as admin:
        admin.alter_configs(resource, dict(configs))
        # Kafka applies a group config through its metadata log: wait until it is described
        deadline = time.monotonic() + 15
        while True:
            described = next(iter(admin.describe_configs([resource]).values()))
            if all(name in described and described[name].value == v for name, v in configs.items()):
                return
            assert time.monotonic() < deadline, f"group configs {dict(configs)} not applied"
            time.sleep(0.05)


def share_consumer(
    server: Server, group: str, topics: list[str], *, explicit: bool = False, **extra: Any
) -> Any:
    config: dict[str, Any] = {"bootstrap.servers": server.bootstrap, "group.id": group, **FAST, **extra}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    consumer.subscribe(topics)
    return consumer


def poll_until(
    consumer: Any,
    until: Callable[[list[Message]], bool],
    timeout: float = 30.0,
    on_message: Callable[[Message], None] | None = None,
) -> list[Message]:
    """Poll until ``until(messages)`` or the deadline; message errors fail the test."""
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while not until(out) and time.monotonic() < deadline:
        for message in consumer.poll(0.2):
            assert message.error() is None, message.error()
            out.append(message)
            if on_message is not None:
                on_message(message)
    return out


def poll_for(consumer: Any, seconds: float) -> list[Message]:
    """Everything polled during ``seconds`` (used to show that nothing more arrives)."""
    return poll_until(consumer, lambda _m: False, timeout=seconds)


def count_at_least(n: int) -> Callable[[list[Message]], bool]:
    return lambda messages: len(messages) >= n


def earliest_group(server: Server, group: str, **configs: str) -> None:
    """A share group that starts at the beginning of the log (and any other group configs)."""
    set_group_configs(server, group, {"share.auto.offset.reset": "earliest", **configs})


def wait_for(check: Callable[[], Any], timeout: float = 20.0, interval: float = 0.1) -> Any:
    """Call ``check`` until it returns something truthy; the last value, or AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout} s (last: {value!r})")
        time.sleep(interval)


def wait_equal(get: Callable[[], Any], expected: Any, timeout: float = 20.0, interval: float = 0.1) -> None:
    """Call ``get`` until it returns ``expected``; AssertionError with the last value at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if value == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout} s: {value!r} != expected {expected!r}")
        time.sleep(interval)


class DiffersFromKafka(AssertionError):
    """What Kafka does, not met: the one failure a known difference (``shareq_xfail``, ``differs_on_shareq``)
    expects. Any other error, a plain assertion about what shareq does instead included, fails the test,
    so a crash or a set-up error never reads as the known difference."""


def as_kafka(actual: Any, expected: Any, what: str = "") -> None:
    """Assert ``actual == expected`` where ``expected`` is what Kafka does; raises ``DiffersFromKafka``."""
    if actual != expected:
        raise DiffersFromKafka(f"{what}{': ' if what else ''}{actual!r} != Kafka's {expected!r}")


def known_difference(reason: str) -> pytest.MarkDecorator:
    """The strict xfail of a known difference: only ``DiffersFromKafka`` counts as the expected failure."""
    return pytest.mark.xfail(strict=True, raises=DiffersFromKafka, reason=reason)


def differs_on_shareq(request: Any, server: Server, reason: str) -> None:
    """Mark this run a strict expected failure when it runs against shareq (for one case of a parametrised
    test; whole tests use ``@pytest.mark.shareq_xfail``). The test checks the difference with ``as_kafka``."""
    if server.kind == "shareq":
        request.applymarker(known_difference(reason))


# The reason prefix of a difference these tests found that no open issue covers yet.
NOT_OWNED = "not yet owned by an issue: "


def kafka_unavailable(reason: str) -> None:
    """Without Kafka's jars or Java a test is skipped locally; in CI that is an error."""
    if in_ci():
        pytest.fail(f"Kafka is required in CI: {reason}")
    pytest.skip(f"Kafka not available: {reason}")


@contextmanager
def kafka_cluster(directory: Path, nodes: int) -> Iterator[kafka_harness.KafkaCluster]:
    """A Kafka 4.4 cluster of its own (``nodes`` brokers, ``COMMON`` configs) for a test that kills
    or restarts nodes, which the session's shared node must not suffer."""
    try:
        kafka_harness.ensure_kafka_jars()
    except (kafka_harness.KafkaUnavailable, OSError) as error:
        kafka_unavailable(str(error))
    with kafka_harness.kafka_cluster(directory, nodes, COMMON) as cluster:
        yield cluster
