"""Log compaction against Kafka and shareq, compared where the end state is deterministic: a compacted
topic with overwrites and tombstones (gzip batches), its segment rolled by segment.ms, read from the start
by a consumer once the cleaner is done: each live key's latest value at the offset it was produced at, no
tombstone (delete.retention.ms=0), nothing else. Kafka's cleaner picks its own moments (and drops a
tombstone only on a pass after the one that first saw it), so the test keeps rolling segments with
unique-keyed records until both have converged."""

from __future__ import annotations

import time
from typing import Any

import pytest
from compat_support import FAST, Server, create_topic
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.timeout(120)

KEYS = 30
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
    "min.compaction.lag.ms": "0",
}

Entry = tuple[int, bytes, bytes | None]


def produce(server: Server, topic: str, records: list[tuple[bytes, bytes | None]]) -> list[Entry]:
    producer = Producer(
        {"bootstrap.servers": server.bootstrap, "linger.ms": 20, "compression.type": "gzip", **FAST}
    )
    out: list[Entry] = []
    for key, value in records:
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=0,
            on_delivery=lambda err, m, k=key, v=value: (
                out.append((m.offset(), k, v)) if err is None else None
            ),
        )
    assert producer.flush(15) == 0
    assert len(out) == len(records)
    return sorted(out)


def read_all(server: Server, topic: str) -> list[Entry]:
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "unused", **FAST})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[Entry] = []
        deadline = time.monotonic() + 15
        while consumer.position([TopicPartition(topic, 0)])[0].offset < high:
            assert time.monotonic() < deadline, "could not read up to the high watermark"
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        consumer.close()


def test_compacted_topic_after_cleaning(server: Server, names: tuple[str, str]) -> None:
    topic = names[0]
    create_topic(server, topic, configs=TOPIC_CONFIGS)
    records: list[tuple[bytes, bytes | None]] = [(b"k%02d" % (i % KEYS), b"v%d" % i) for i in range(600)]
    records += [(b"k%02d" % k, None) for k in range(0, KEYS, 3)]  # tombstones for every third key
    records += [(b"k00", b"back")]  # a key tombstoned, then written again
    written = produce(server, topic, records)
    latest: dict[bytes, Entry] = {}
    for entry in written:
        latest[entry[1]] = entry
    expected = sorted(e for e in latest.values() if e[2] is not None)
    assert len(expected) == KEYS - KEYS // 3 + 1
    rolls: list[Entry] = []
    deadline = time.monotonic() + 90
    while True:
        time.sleep(0.5)  # past segment.ms: the next append rolls the segment, and the last one closes
        rolls += produce(server, topic, [(b"roll-%d" % len(rolls), b"r")])
        read = read_all(server, topic)
        keyed = [e for e in read if not e[1].startswith(b"roll-")]
        if keyed == expected or time.monotonic() > deadline:
            break
    assert keyed == expected
    # Rolled-in records have unique keys: all stay, at their offsets.
    assert [e for e in read if e[1].startswith(b"roll-")] == rolls


def _set_policy(server: Server, topic: str, policy: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)

    def applied() -> bool:
        described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
        return bool(next(iter(described.values())).result(timeout=15)["cleanup.policy"].value == policy)

    deadline = time.monotonic() + 15
    while not applied():
        assert time.monotonic() < deadline, f"cleanup.policy never became {policy}"
        time.sleep(0.1)


def test_compact_then_delete_then_compact_again(server: Server, names: tuple[str, str]) -> None:
    """A compacted topic switched to delete takes records without a key; switched back to compact it
    refuses them again and is cleaned as before: each key's latest value stays, and the keyless records
    written meanwhile are dropped by the cleaner (Kafka counts them as invalid)."""
    topic = names[0]
    create_topic(server, topic, configs=TOPIC_CONFIGS)
    written = produce(server, topic, [(b"k%d" % (i % 5), b"a%d" % i) for i in range(50)])
    _set_policy(server, topic, "delete")
    keyless = produce(server, topic, [(None, b"no-key-%d" % i) for i in range(3)])  # type: ignore[misc]
    written += keyless
    _set_policy(server, topic, "compact")
    producer = Producer({"bootstrap.servers": server.bootstrap, **FAST})
    errors: list[Any] = []
    producer.produce(topic, value=b"refused", partition=0, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(15)
    assert errors[0] is not None and errors[0].code() == 87  # INVALID_RECORD
    written += produce(server, topic, [(b"k%d" % (i % 5), b"b%d" % i) for i in range(50)])
    latest: dict[bytes, Entry] = {}
    for entry in written:
        if entry[1] is not None:
            latest[entry[1]] = entry
    expected = sorted(latest.values())
    rolls: list[Entry] = []
    deadline = time.monotonic() + 90
    while True:
        time.sleep(0.5)
        rolls += produce(server, topic, [(b"roll-%d" % len(rolls), b"r")])
        read = [e for e in read_all(server, topic) if not (e[1] or b"").startswith(b"roll-")]
        if read == expected or time.monotonic() > deadline:
            break
    assert read == expected
