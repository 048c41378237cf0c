"""Classic consumer groups with real clients: librdkafka (cooperative and eager assignors),
kafka-python, committed offsets across a broker SIGKILL, and the AdminClient group calls."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_harness import FAST_FAILURE, BrokerProcess
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from share_consumers import create_topic, produce

from shareq.embedded import EmbeddedBroker

GROUP_BROKER = {"group.initial.rebalance.delay.ms": "100"}
DEADLINE_S = 25.0


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", config=GROUP_BROKER) as broker:
        yield broker


class Ownership:
    """Which consumer owns which partition, from the rebalance callbacks (one polling thread)."""

    def __init__(self) -> None:
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.log: list[str] = []

    def callbacks(self, name: str) -> dict[str, Any]:
        def assigned(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            self.log.append(f"{time.monotonic():.3f} {name} assigned {[tp.partition for tp in partitions]}")
            for tp in partitions:
                holder = self.owner.get(tp.partition)
                if holder is not None and holder != name:
                    self.violations.append(
                        f"{name} got {tp.partition} while {holder} owns it at {time.monotonic():.3f}"
                    )
                self.owner[tp.partition] = name

        def revoked(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            self.log.append(f"{time.monotonic():.3f} {name} revoked {[tp.partition for tp in partitions]}")
            for tp in partitions:
                if self.owner.get(tp.partition) == name:
                    del self.owner[tp.partition]

        return {"on_assign": assigned, "on_revoke": revoked, "on_lost": revoked}


def group_consumer(bootstrap: str, group: str, strategy: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **FAST_FAILURE,
            **extra,
        }
    )


def drain(
    consumers: dict[str, Consumer], seen: dict[tuple[int, int], str], until: int, deadline: float
) -> None:
    """Poll every consumer round-robin, committing each record's position, until ``until`` are seen."""
    while len(seen) < until:
        assert time.monotonic() < deadline, f"consumed {len(seen)} of {until}"
        for name, consumer in consumers.items():
            message = consumer.poll(0.05)
            if message is None or message.error():
                continue
            seen.setdefault((message.partition(), message.offset()), name)
            commit(consumer, message)


def commit(consumer: Consumer, message: Any = None) -> None:
    """Commit synchronously; a commit racing a rebalance fails with the group's error (as with
    Kafka: ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS) and is simply left to a later commit."""
    try:
        if message is None:
            consumer.commit(asynchronous=False)
        else:
            consumer.commit(message=message, asynchronous=False)
    except KafkaException:
        pass


def settle(
    consumers: dict[str, Consumer],
    admin: AdminClient,
    group: str,
    topic: str,
    expected: dict[int, int],
    deadline: float,
) -> None:
    """Poll and commit until the group's committed offsets are ``expected``."""
    while committed(admin, group, topic, len(expected)) != expected:
        assert time.monotonic() < deadline, committed(admin, group, topic, len(expected))
        for consumer in consumers.values():
            message = consumer.poll(0.05)
            if message is not None and not message.error():
                commit(consumer, message)
            elif consumer.assignment():
                commit(consumer)


def committed(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request])[group].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_cooperative_group_member_leaves_and_joins_mid_stream(group_broker: EmbeddedBroker) -> None:
    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "coop", 6)
    produce(bootstrap, "coop", [b"%d" % i for i in range(300)], 6)
    owners = Ownership()
    consumers = {
        name: group_consumer(bootstrap, "coop-g", "cooperative-sticky") for name in ("c1", "c2", "c3")
    }
    seen: dict[tuple[int, int], str] = {}
    try:
        for name, consumer in consumers.items():
            consumer.subscribe(["coop"], **owners.callbacks(name))
        deadline = time.monotonic() + DEADLINE_S
        drain(consumers, seen, 300, deadline)
        leaver = consumers.pop("c2")
        leaver.close()
        owners.owner = {p: o for p, o in owners.owner.items() if o != "c2"}
        produce(bootstrap, "coop", [b"%d" % i for i in range(300, 600)], 6)
        joiner = group_consumer(bootstrap, "coop-g", "cooperative-sticky")
        joiner.subscribe(["coop"], **owners.callbacks("c4"))
        consumers["c4"] = joiner
        drain(consumers, seen, 600, deadline)
        # keep polling until the newcomer owns partitions (the incremental rebalance finished)
        while not joiner.assignment():
            assert time.monotonic() < deadline, "the joining consumer got no partitions"
            for consumer in consumers.values():
                consumer.poll(0.05)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        settle(consumers, admin, "coop-g", "coop", dict.fromkeys(range(6), 100), deadline)
    finally:
        for consumer in consumers.values():
            consumer.close()
    assert owners.violations == [], owners.log
    assert len(seen) == 600


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_eager_assignors_share_a_topic(group_broker: EmbeddedBroker, strategy: str) -> None:
    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "eager", 4)
    produce(bootstrap, "eager", [b"%d" % i for i in range(200)], 4)
    consumers = {n: group_consumer(bootstrap, f"eager-{strategy}", strategy) for n in ("a", "b")}
    seen: dict[tuple[int, int], str] = {}
    try:
        for consumer in consumers.values():
            consumer.subscribe(["eager"])
        deadline = time.monotonic() + DEADLINE_S
        drain(consumers, seen, 200, deadline)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        settle(consumers, admin, f"eager-{strategy}", "eager", dict.fromkeys(range(4), 50), deadline)
        assignments = [{tp.partition for tp in c.assignment()} for c in consumers.values()]
    finally:
        for consumer in consumers.values():
            consumer.close()
    assert len(seen) == 200
    # once stable, each consumer owns two partitions and nothing is owned twice
    assert sorted(len(a) for a in assignments) == [2, 2] and not (assignments[0] & assignments[1])


def test_kafka_python_group_consumer_consumes_and_commits(group_broker: EmbeddedBroker) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "kp", 2)
    produce(bootstrap, "kp", [b"%d" % i for i in range(40)], 2)
    consumer = KafkaConsumer(
        "kp",
        bootstrap_servers=bootstrap,
        group_id="kp-g",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=200,
    )
    got: list[int] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 40:
            assert time.monotonic() < deadline, f"consumed {len(got)} of 40"
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.offset for r in records]
        consumer.commit()
        assert {consumer.committed(KTopicPartition("kp", p)) for p in range(2)} == {20}
    finally:
        consumer.close()
    assert len(got) == 40


def test_committed_offsets_survive_a_broker_sigkill(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "group.initial.rebalance.delay.ms=0").start()
    try:
        create_topic(broker.bootstrap, "durable", 3)
        produce(broker.bootstrap, "durable", [b"%d" % i for i in range(90)], 3)
        consumer = group_consumer(broker.bootstrap, "durable-g", "range")
        consumer.subscribe(["durable"])
        seen: dict[tuple[int, int], str] = {}
        drain({"c": consumer}, seen, 45, time.monotonic() + DEADLINE_S)
        positions = {p: max(o for (q, o) in seen if q == p) + 1 for p in {p for p, _ in seen}}
        consumer.close()
        broker.kill()
        broker.start()
        # new records everywhere, so that every partition has something after its committed offset
        produce(broker.bootstrap, "durable", [b"late-%d" % i for i in range(3)], 3)
        restarted = group_consumer(broker.bootstrap, "durable-g", "range")
        restarted.subscribe(["durable"])
        first: dict[int, int] = {}
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(first) < 3:
                assert time.monotonic() < deadline, f"first offsets {first}"
                message = restarted.poll(0.1)
                if message is not None and not message.error():
                    first.setdefault(message.partition(), message.offset())
        finally:
            restarted.close()
        assert first == {p: positions.get(p, 0) for p in range(3)}
    finally:
        broker.kill()


def test_admin_client_consumer_group_calls(group_broker: EmbeddedBroker) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions

    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "adm", 2)
    produce(bootstrap, "adm", [b"%d" % i for i in range(10)], 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumer = group_consumer(bootstrap, "adm-g", "range", **{"client.id": "adm-client"})
    consumer.subscribe(["adm"])
    seen: dict[tuple[int, int], str] = {}
    try:
        drain({"c": consumer}, seen, 10, time.monotonic() + DEADLINE_S)
        listed = admin.list_consumer_groups().result(10)
        assert "adm-g" in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups(["adm-g"])["adm-g"].result(10)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        (member,) = described.members
        assert member.client_id == "adm-client"
        assert member.host == "/127.0.0.1"  # Kafka's InetAddress form, as for share group members
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        with pytest.raises(Exception):  # noqa: B017 - a group with members cannot be deleted
            admin.delete_consumer_groups(["adm-g"])["adm-g"].result(10)
    finally:
        consumer.close()
    assert committed(admin, "adm-g", "adm", 2) == {0: 5, 1: 5}
    altered = ConsumerGroupTopicPartitions(
        "adm-g", [TopicPartition("adm", 0, 2), TopicPartition("adm", 1, 3)]
    )
    admin.alter_consumer_group_offsets([altered])["adm-g"].result(10)
    assert committed(admin, "adm-g", "adm", 2) == {0: 2, 1: 3}
    admin.delete_consumer_groups(["adm-g"])["adm-g"].result(10)
    assert "adm-g" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert committed(admin, "adm-g", "adm", 2) == {0: -1001, 1: -1001}


def test_static_member_restarts_without_a_rebalance(group_broker: EmbeddedBroker) -> None:
    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "static", 4)
    produce(bootstrap, "static", [b"%d" % i for i in range(40)], 4)
    events: list[str] = []

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        events.append("assign")

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        events.append("revoke")

    steady = group_consumer(bootstrap, "static-g", "range", **{"group.instance.id": "steady"})
    restarting = group_consumer(bootstrap, "static-g", "range", **{"group.instance.id": "restarting"})
    steady.subscribe(["static"], on_assign=on_assign, on_revoke=on_revoke)
    restarting.subscribe(["static"])
    deadline = time.monotonic() + DEADLINE_S
    again: Consumer | None = None
    try:
        seen: dict[tuple[int, int], str] = {}
        drain({"steady": steady, "restarting": restarting}, seen, 40, deadline)
        while len(steady.assignment()) + len(restarting.assignment()) != 4:
            assert time.monotonic() < deadline, "the group did not settle"
            steady.poll(0.05)
            restarting.poll(0.05)
        before = {tp.partition for tp in restarting.assignment()}
        settled = list(events)
        restarting.close()  # a static member does not leave the group on close
        again = group_consumer(bootstrap, "static-g", "range", **{"group.instance.id": "restarting"})
        again.subscribe(["static"])
        while {tp.partition for tp in again.assignment()} != before:
            assert time.monotonic() < deadline, "the restarted member did not get its partitions back"
            again.poll(0.05)
            steady.poll(0.05)
        assert events == settled  # the other member saw no rebalance
    finally:
        steady.close()
        if again is not None:
            again.close()


def test_kip848_consumer_protocol_two_then_three_members(tmp_path: Path) -> None:
    config = {"group.consumer.heartbeat.interval.ms": "500", "group.initial.rebalance.delay.ms": "0"}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "kip848", 6)
        produce(bootstrap, "kip848", [b"%d" % i for i in range(300)], 6)
        owners = Ownership()

        def member(name: str) -> Consumer:
            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "kip848-g",
                    "group.protocol": "consumer",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    **FAST_FAILURE,
                }
            )
            consumer.subscribe(["kip848"], **owners.callbacks(name))
            return consumer

        consumers = {name: member(name) for name in ("m1", "m2")}
        seen: dict[tuple[int, int], str] = {}
        deadline = time.monotonic() + DEADLINE_S
        try:
            drain(consumers, seen, 300, deadline)
            produce(bootstrap, "kip848", [b"%d" % i for i in range(300, 600)], 6)
            consumers["m3"] = member("m3")
            drain(consumers, seen, 600, deadline)
            while sorted(len(c.assignment()) for c in consumers.values()) != [2, 2, 2]:
                assert time.monotonic() < deadline, [len(c.assignment()) for c in consumers.values()]
                for consumer in consumers.values():
                    consumer.poll(0.05)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            settle(consumers, admin, "kip848-g", "kip848", dict.fromkeys(range(6), 100), deadline)
            described = admin.describe_consumer_groups(["kip848-g"])["kip848-g"].result(10)
            assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [2, 2, 2]
        finally:
            for consumer in consumers.values():
                consumer.close()
        assert owners.violations == [], owners.log
        assert len(seen) == 600


def test_kip848_members_carry_on_through_a_broker_sigkill(tmp_path: Path) -> None:
    """A KIP-848 group's members, epochs and assignments are durable: after the broker is SIGKILLed
    and restarted, the same two members keep their partitions at the same epoch (no rebalance) and
    consume what is produced next exactly once, from their committed offsets."""
    broker = BrokerProcess(tmp_path / "data").start()
    consumers: dict[str, Consumer] = {}
    try:
        create_topic(broker.bootstrap, "steady", 4)
        produce(broker.bootstrap, "steady", [b"%d" % i for i in range(40)], 4)
        settings = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "steady-g",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **FAST_FAILURE,
        }
        consumers = {name: Consumer(settings) for name in ("a", "b")}
        for consumer in consumers.values():
            consumer.subscribe(["steady"])
        seen: dict[tuple[int, int], str] = {}
        drain(consumers, seen, 40, time.monotonic() + DEADLINE_S)
        # the second member may still be reconciling: wait until each holds its share
        deadline = time.monotonic() + DEADLINE_S
        while True:
            before = _members(broker.bootstrap, "steady-g")
            if len(before) == 2 and all(len(parts) == 2 for _, parts in before.values()):
                break
            assert time.monotonic() < deadline, before
            _keep_polling(consumers, 0.2)
        broker.kill()
        broker.start()
        produce(broker.bootstrap, "steady", [b"late-%d" % i for i in range(8)], 4)
        drain(consumers, seen, 48, time.monotonic() + DEADLINE_S)
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(12)]
        for (partition, offset), name in seen.items():
            if offset >= 10:  # consumed after the restart by the member that owned it before
                assert partition in before[consumers[name].memberid()][1]
        assert _members(broker.bootstrap, "steady-g") == before
    finally:
        for consumer in consumers.values():
            consumer.close()
        broker.kill()


def _members(bootstrap: str, group: str) -> dict[str, tuple[int, frozenset[int]]]:
    """member id -> (epoch, partitions of ``steady``) as ConsumerGroupDescribe reports them."""
    from shareq.client import Admin

    with Admin(bootstrap) as admin:
        conn = admin.cluster.coordinator(group)
        _v, m = conn.module(69)
        response = conn.send(
            m.ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
        )
    (g,) = response.groups
    return {
        mb.member_id: (
            int(mb.member_epoch),
            frozenset(p for tp in mb.assignment.topic_partitions for p in tp.partitions),
        )
        for mb in g.members
    }


def test_classic_members_carry_on_through_a_broker_sigkill(tmp_path: Path) -> None:
    """A Stable classic group's members and assignments are durable: after a SIGKILL and restart the
    two members keep heartbeating at their generation, with no rebalance (no assignment callback),
    and consume what is produced next exactly once."""
    broker = BrokerProcess(tmp_path / "data", "group.initial.rebalance.delay.ms=0").start()
    consumers: dict[str, Consumer] = {}
    try:
        create_topic(broker.bootstrap, "calm", 4)
        produce(broker.bootstrap, "calm", [b"%d" % i for i in range(40)], 4)
        ownership = Ownership()
        consumers = {name: group_consumer(broker.bootstrap, "calm-g", "range") for name in ("a", "b")}
        for name, consumer in consumers.items():
            consumer.subscribe(["calm"], **ownership.callbacks(name))
        seen: dict[tuple[int, int], str] = {}
        drain(consumers, seen, 40, time.monotonic() + DEADLINE_S)
        deadline = time.monotonic() + DEADLINE_S  # until the second member's join has settled
        while sorted(ownership.owner) != [0, 1, 2, 3] or set(ownership.owner.values()) != {"a", "b"}:
            assert time.monotonic() < deadline, ownership.log
            _keep_polling(consumers, 0.2)
        owners, rebalances = dict(ownership.owner), len(ownership.log)
        assert sorted(owners) == [0, 1, 2, 3] and set(owners.values()) == {"a", "b"}
        broker.kill()
        broker.start()
        produce(broker.bootstrap, "calm", [b"late-%d" % i for i in range(8)], 4)
        drain(consumers, seen, 48, time.monotonic() + DEADLINE_S)
        _keep_polling(consumers, 2.0)  # four heartbeat intervals: a lost member would rejoin meanwhile
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(12)]
        assert all(seen[(p, o)] == owners[p] for p in range(4) for o in range(10, 12))
        assert len(ownership.log) == rebalances, ownership.log
    finally:
        for consumer in consumers.values():
            consumer.close()
        broker.kill()


def _keep_polling(consumers: dict[str, Consumer], seconds: float) -> None:
    """Serve the consumers' callbacks and heartbeats for ``seconds`` (nothing new to consume)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for consumer in consumers.values():
            message = consumer.poll(0.05)
            assert message is None or message.error() is not None


def test_kip848_member_awaiting_partitions_is_asked_back_sooner(tmp_path: Path) -> None:
    """A KIP-848 member whose partitions another member is still revoking is told a short heartbeat
    interval (instead of the group's), and the group's interval again once it holds its share; the
    old owner is told the short interval while it revokes. No partition is held twice meanwhile."""
    from shareq.client import GroupConsumer
    from shareq.coordinators.consumer.coordinator import RECONCILING_HEARTBEAT_INTERVAL_MS as SHORT

    class Recording(GroupConsumer):
        """Keeps the interval of every heartbeat answer: one poll may run two heartbeats (the one
        that carries the revocation and the one that confirms it), so reading the interval between
        polls can miss the first."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.intervals: list[int] = []

        def _heartbeat(self, *, leave: bool = False) -> None:
            super()._heartbeat(leave=leave)
            self.intervals.append(self.heartbeat_interval_ms)

    config = {"group.consumer.heartbeat.interval.ms": "5000", "group.initial.rebalance.delay.ms": "0"}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker:
        create_topic(broker.bootstrap, "hb", 4)
        deadline = time.monotonic() + DEADLINE_S
        first = Recording(broker.bootstrap, "hb-g", ["hb"], request_timeout=10)
        second: GroupConsumer | None = None
        try:
            while len(first.assignment()) < 4:
                assert time.monotonic() < deadline, first.assignment()
                first.poll(0.05)
            assert first.heartbeat_interval_ms == 5000
            second = GroupConsumer(broker.bootstrap, "hb-g", ["hb"], request_timeout=10)
            second.poll(0.05)
            assert second.assignment() == [] and second.heartbeat_interval_ms == SHORT
            mark = len(first.intervals)
            while len(first.assignment()) > 2:  # its next heartbeat (up to 5 s) carries the revocation
                assert time.monotonic() < deadline, first.assignment()
                first.poll(0.05)
                assert second.poll(0.0) == [] and second.assignment() == []
            first.poll(0.05)  # the heartbeat confirming the revocation, unless that poll ran it already
            assert SHORT in first.intervals[mark:] and first.heartbeat_interval_ms == 5000
            while len(second.assignment()) < 2:
                assert time.monotonic() < deadline, second.assignment()
                second.poll(0.05)
            assert not set(first.assignment()) & set(second.assignment())
            assert second.heartbeat_interval_ms == 5000
        finally:
            first.close()
            if second is not None:
                second.close()
