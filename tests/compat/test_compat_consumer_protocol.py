"""KIP-848 consumer groups (``group.protocol=consumer``) through librdkafka, against Kafka and shareq:
regular-expression subscriptions, the server-side ``range`` assignor, an assignor the broker does not
offer, and the ``consumer.*`` group configs."""

from __future__ import annotations

import time
from typing import Any

import pytest
from compat_support import FAST, Server, create_topic, produce
from confluent_kafka import Consumer, KafkaError, KafkaException
from kio.schema.errors import ErrorCode

from shareq.client import Admin, ConfigResource, GroupConsumer, ResourceType
from shareq.client import KafkaError as ShareqKafkaError

pytestmark = pytest.mark.timeout(90)

INVALID_CONFIG = 40
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8
DEFAULTS = {"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000"}
SET = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}


def _consumer(server: Server, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **FAST,
            **extra,
        }
    )


def _poll_values(consumer: Consumer, count: int, seconds: float) -> list[tuple[str, bytes]]:
    got: list[tuple[str, bytes]] = []
    deadline = time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append((message.topic(), message.value()))
    return got


def test_regex_subscription(server: Server, names: tuple[str, str]) -> None:
    """``^<prefix>-.*`` takes the topics whose whole name matches, not one that only contains the prefix,
    and a matching topic created later joins the subscription."""
    topic, group = names
    matching = [f"{topic}-a", f"{topic}-b"]
    for name in (*matching, f"x{topic}-z"):
        create_topic(server, name)
        produce(server, name, [name.encode() + b"/%d" % i for i in range(3)])
    consumer = _consumer(server, group)
    try:
        consumer.subscribe([f"^{topic}-.*"])
        got = _poll_values(consumer, 6, 30)
        assert sorted(got) == sorted((t, t.encode() + b"/%d" % i) for t in matching for i in range(3))
        assert {tp.topic for tp in consumer.assignment()} == set(matching)
        create_topic(server, f"{topic}-c")
        produce(server, f"{topic}-c", [b"later"])
        assert _poll_values(consumer, 1, 45) == [(f"{topic}-c", b"later")]
    finally:
        consumer.close()


def test_range_assignor_co_partitions(server: Server, names: tuple[str, str]) -> None:
    """Two members with ``group.remote.assignor=range`` on two topics of 4 partitions each: each member
    gets a contiguous range of partition numbers, the same numbers of both topics."""
    topic, group = names
    left, right = f"{topic}-l", f"{topic}-r"
    create_topic(server, left, partitions=4)
    create_topic(server, right, partitions=4)
    members = [_consumer(server, group, **{"group.remote.assignor": "range"}) for _ in range(2)]
    try:
        for member in members:
            member.subscribe([left, right])
        deadline = time.monotonic() + 45
        assignments: list[set[tuple[str, int]]] = [set(), set()]
        while time.monotonic() < deadline:
            for member in members:
                member.poll(0.1)
            assignments = [{(tp.topic, tp.partition) for tp in m.assignment()} for m in members]
            if [len(a) for a in assignments] == [4, 4]:
                break
        assert [len(a) for a in assignments] == [4, 4]
        assert assignments[0] | assignments[1] == {(t, p) for t in (left, right) for p in range(4)}
        for owned in assignments:
            numbers = sorted(p for t, p in owned if t == left)
            assert numbers == sorted(p for t, p in owned if t == right)
            assert numbers == list(range(numbers[0], numbers[0] + 2))
    finally:
        for member in members:
            member.close()


def test_unknown_remote_assignor_is_fatal(server: Server, names: tuple[str, str]) -> None:
    """A member asking for an assignor the broker does not offer gets UNSUPPORTED_ASSIGNOR, which
    librdkafka raises as a fatal error."""
    topic, group = names
    create_topic(server, topic)
    consumer = _consumer(server, group, **{"group.remote.assignor": "no-such-assignor"})
    try:
        consumer.subscribe([topic])
        error: KafkaError | None = None
        deadline = time.monotonic() + 20
        while error is None and time.monotonic() < deadline:
            try:
                message = consumer.poll(0.2)
            except KafkaException as raised:
                error = raised.args[0]
                break
            if message is not None and message.error() is not None:
                error = message.error()
        assert error is not None
        assert error.code() == KafkaError._FATAL or error.fatal()
        assert "assignor" in error.str().lower()
    finally:
        consumer.close()


def _alter(server: Server, group: str, name: str, value: str) -> int:
    with Admin(server.bootstrap) as admin:
        try:
            admin.alter_configs(ConfigResource(ResourceType.GROUP, group), {name: value})
        except ShareqKafkaError as error:
            return int(error.code)
    return 0


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("consumer.session.timeout.ms", "50000", 0),
        ("consumer.session.timeout.ms", "1000", INVALID_CONFIG),
        ("consumer.heartbeat.interval.ms", "6000", 0),
        ("consumer.heartbeat.interval.ms", "100", INVALID_CONFIG),
    ],
    ids=["session-ok", "session-below-min", "heartbeat-ok", "heartbeat-below-min"],
)
def test_consumer_group_config_bounds(
    server: Server, names: tuple[str, str], name: str, value: str, code: int
) -> None:
    """The ``consumer.*`` group configs are checked against the broker's ``group.consumer.*`` bounds."""
    assert _alter(server, names[1], name, value) == code


@pytest.mark.parametrize("name", ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"])
def test_consumer_group_config_defaults(server: Server, names: tuple[str, str], name: str) -> None:
    """A fresh group describes the ``consumer.*`` configs with Kafka's defaults, then a value set."""
    with Admin(server.bootstrap) as admin:
        resource = ConfigResource(ResourceType.GROUP, names[1])
        described = next(iter(admin.describe_configs([resource]).values()))[name]
        assert (described.value, int(described.source)) == (DEFAULTS[name], DEFAULT_CONFIG)
        admin.alter_configs(resource, {name: SET[name]})
        deadline = time.monotonic() + 10  # Kafka applies it through its metadata log: poll
        while True:
            described = next(iter(admin.describe_configs([resource]).values()))[name]
            if described.value == SET[name] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert (described.value, int(described.source)) == (SET[name], GROUP_CONFIG)


def test_shareq_group_consumer_and_admin(server: Server, names: tuple[str, str]) -> None:
    """shareq's own KIP-848 ``GroupConsumer`` and consumer-group admin calls speak only Kafka's wire:
    two members split a 4-partition topic, read every record once, commit, leave; the admin client
    then describes the empty group and its committed offsets, resets one and deletes another."""
    topic, group = names
    create_topic(server, topic, partitions=4)
    produce(server, topic, [b"r%d" % i for i in range(40)], partition=lambda i: i % 4)
    members = [GroupConsumer(server.bootstrap, group, [topic], request_timeout=15) for _ in range(2)]
    seen: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 45
        while len(seen) < 40 and time.monotonic() < deadline:
            for member in members:
                seen += [(r.partition, r.offset) for r in member.poll(0.2)]
                member.commit()
        owned = [set(m.assignment()) for m in members]
    finally:
        for member in members:
            member.close()
    assert sorted(seen) == [(p, o) for p in range(4) for o in range(10)]
    assert not owned[0] & owned[1]
    with Admin(server.bootstrap) as admin:
        described = admin.describe_consumer_group(group)
        assert (described.type, described.state, described.members) == ("consumer", "Empty", ())
        committed = admin.list_consumer_group_offsets(group)
        assert {k: o.offset for k, o in committed.items()} == {(topic, p): 10 for p in range(4)}
        admin.alter_consumer_group_offsets(group, {(topic, 0): 3})
        admin.delete_consumer_group_offsets(group, [(topic, 1)])
        after = admin.list_consumer_group_offsets(group, {topic: [0, 1, 2, 3]})
        assert [after[(topic, p)].offset for p in range(4)] == [3, -1, 10, 10]
        with pytest.raises(ShareqKafkaError) as missing:
            admin.describe_consumer_group(group + "-none")
        assert missing.value.code == ErrorCode.group_id_not_found


def test_group_heartbeat_interval_config_reaches_members(server: Server, names: tuple[str, str]) -> None:
    """``consumer.heartbeat.interval.ms`` set on a group is the interval its members are told."""
    topic, group = names
    create_topic(server, topic)
    with Admin(server.bootstrap) as admin:
        resource = ConfigResource(ResourceType.GROUP, group)
        admin.alter_configs(resource, {"consumer.heartbeat.interval.ms": "7000"})
        deadline = time.monotonic() + 10  # Kafka applies it through its metadata log: wait for it
        while (
            next(iter(admin.describe_configs([resource]).values()))["consumer.heartbeat.interval.ms"].value
            != "7000"
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
    member = GroupConsumer(server.bootstrap, group, [topic], request_timeout=15)
    try:
        member.poll(0.5)
        assert member.heartbeat_interval_ms == 7000
    finally:
        member.close()
