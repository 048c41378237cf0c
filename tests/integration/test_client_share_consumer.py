"""ShareConsumer (our client) against the real broker's share groups.

``ShareWireLog`` records the share-group requests the client sends (the broker's own handlers answer).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from share_wire_log import ACQUIRED, AVAILABLE, TERMINAL, ShareWireLog

from shareq.client import (
    AcknowledgeType,
    AckRange,
    Admin,
    ConfigResource,
    ConsumerRecord,
    Producer,
    ResourceType,
    ShareConsumer,
)
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

BROKER_CONFIG = {
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.auto.offset.reset": "earliest",
    # quick heartbeats so assignment changes reach the client fast
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.heartbeat.interval.ms": "100",
    "group.share.assignment.interval.ms": "0",
}


@pytest.fixture
def broker(persister: str) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={**BROKER_CONFIG, "share.persister": persister}) as b:
        yield b


@pytest.fixture
def toy(broker: EmbeddedBroker) -> ShareWireLog:
    return ShareWireLog(broker).install()


def produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    with Admin(bootstrap) as a:
        if topic not in a.list_topics():
            a.create_topic(topic, partitions)
    with Producer(bootstrap, max_batch_records=5) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, key=b"k%d" % i, partition=i % partitions)
        p.flush()


def poll_until(c: ShareConsumer, n: int, timeout: float = 10.0) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += c.poll(0.5)
    return out


def fetch_epochs(toy: ShareWireLog) -> list[tuple[str, int]]:
    return [(kind, epoch) for kind, epoch, _ in toy.calls if kind in ("fetch", "ack")]


def test_poll_acknowledge_commit_and_redelivery(broker: EmbeddedBroker, toy: ShareWireLog) -> None:
    produce(broker.bootstrap, "q", 10, partitions=2)
    c = ShareConsumer(broker.bootstrap, "g", topics=["q"])
    try:
        records = poll_until(c, 10)
        assert len(records) == 10
        assert all(r.delivery_count == 1 and r.topic == "q" and r.topic_id is not None for r in records)
        assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(10))
        first = records[0]
        for r in records:
            c.acknowledge(r, AcknowledgeType.ACCEPT if r.partition == 0 else AcknowledgeType.RELEASE)
        results = c.commit()
        assert set(results) == {("q", 0), ("q", 1)}
        assert all(code == 0 for code in results.values())
        again = poll_until(c, 5)
        assert sorted(r.offset for r in again) == list(range(5))
        assert {(r.partition, r.delivery_count) for r in again} == {(1, 2)}
        for r in again:
            c.acknowledge(r, AcknowledgeType.REJECT)
        assert c.poll(0.3) == []  # the REJECTs ride on this fetch
        tid = first.topic_id
        assert tid is not None
        # accepted and rejected records are both terminal: the SPSO moved past them (the REJECTs
        # went out as type 3, checked in the recorded acknowledgements)
        assert set(toy.states("g", tid, 0).values()) == {TERMINAL}
        assert set(toy.states("g", tid, 1).values()) == {TERMINAL}
        assert [a[4] for a in toy.acks if a[1] == 1][-1] == (3,)
    finally:
        c.close()
    # the protocol sequence: join at epoch 0 with a 22-char id, then session epochs 0, 1, 2 ... shared
    # by ShareFetch and ShareAcknowledge; leaving is heartbeat -1 then ShareAcknowledge -1
    hb = [(epoch, detail) for kind, epoch, detail in toy.calls if kind == "heartbeat"]
    assert hb[0][0] == 0 and hb[0][1][1] == ("q",) and len(hb[0][1][0]) == 22
    assert hb[-1][0] == -1
    epochs = fetch_epochs(toy)
    assert epochs[-1] == ("ack", -1)
    assert [e for _, e in epochs[:-1]] == list(range(len(epochs) - 1))
    assert any(k == "ack" for k, _ in epochs[:-1])  # commit() took an epoch of the same sequence
    last_hb = max(i for i, (k, e, _) in enumerate(toy.calls) if k == "heartbeat" and e == -1)
    last_ack = max(i for i, (k, e, _) in enumerate(toy.calls) if k == "ack" and e == -1)
    assert last_hb < last_ack


def test_close_does_not_release_unless_asked(broker: EmbeddedBroker, toy: ShareWireLog) -> None:
    produce(broker.bootstrap, "keep", 4)
    c = ShareConsumer(broker.bootstrap, "g", topics=["keep"])
    records = poll_until(c, 4)
    tid = records[0].topic_id
    assert tid is not None
    c.acknowledge(records[0])
    acks_before = len(toy.acks)
    c.close()
    # only the explicit ACCEPT was sent; no RELEASE for the rest (closing the session frees them)
    assert [(a[2], a[3], a[4]) for a in toy.acks[acks_before:]] == [(0, 0, (1,))]

    c2 = ShareConsumer(broker.bootstrap, "g", topics=["keep"])
    records = poll_until(c2, 3)
    assert [r.delivery_count for r in records] == [2, 2, 2]
    acks_before = len(toy.acks)
    c2.close(release=True)
    assert [(a[2], a[3], a[4]) for a in toy.acks[acks_before:]] == [(1, 3, (2,))]
    assert toy.states("g", tid, 0) == {0: TERMINAL, 1: AVAILABLE, 2: AVAILABLE, 3: AVAILABLE}


def test_partial_batches_deliver_only_acquired_offsets(broker: EmbeddedBroker, toy: ShareWireLog) -> None:
    # The broker acquires whole batches; a partial batch comes back when only some of its offsets
    # are available again (here: offsets released by the consumer inside two five-record batches).
    produce(broker.bootstrap, "partial", 10)  # two batches of five
    with ShareConsumer(broker.bootstrap, "g", topics=["partial"]) as c:
        first = poll_until(c, 10)
        assert [r.offset for r in first] == list(range(10))
        for r in first:
            c.acknowledge(r, AcknowledgeType.RELEASE if r.offset in (1, 2, 6) else AcknowledgeType.ACCEPT)
        c.commit()
        got = poll_until(c, 3)
        assert [(r.offset, r.delivery_count) for r in got] == [(1, 2), (2, 2), (6, 2)]
        # the fetch carried the whole batches, the client handed out only the acquired offsets
        tid = c.cluster.topic("partial").topic_id
        assert tid is not None
        states = toy.states("g", tid, 0)
        assert [off for off, st in states.items() if st == ACQUIRED] == [1, 2, 6]
        for r in got:
            c.acknowledge(r)
        c.commit()
        assert set(toy.states("g", tid, 0).values()) == {TERMINAL}


def test_acquire_ranges_acknowledged_from_plain_data(broker: EmbeddedBroker, toy: ShareWireLog) -> None:
    produce(broker.bootstrap, "ranges", 8)
    with ShareConsumer(broker.bootstrap, "g", topics=["ranges"]) as c:
        acq = c.acquire(100, timeout=5.0)
        deadline = time.monotonic() + 10
        while not acq.ranges and time.monotonic() < deadline:
            acq = c.acquire(100, timeout=0.5)
        assert [
            (r.topic, r.partition, r.first_offset, r.last_offset, r.delivery_count) for r in acq.ranges
        ] == [("ranges", 0, 0, 7, 1)]
        assert acq.acquisition_lock_timeout_ms == 30_000  # the group's share.record.lock.duration.ms
        # e.g. a Spark task reports back which offsets it processed: plain picklable data
        shipped = pickle.loads(pickle.dumps(acq.ranges))
        c.acknowledge_ranges(
            [
                AckRange(topic_id=shipped[0].topic_id, partition=0, first_offset=0, last_offset=5),
                AckRange(
                    topic_id=shipped[0].topic_id,
                    partition=0,
                    first_offset=6,
                    last_offset=7,
                    type=AcknowledgeType.REJECT,
                ),
            ]
        )
        results = c.commit()
        assert results == {("ranges", 0): 0}
        # one run of consecutive offsets with mixed types: one batch, one type per offset
        assert toy.acks[-1] == (shipped[0].topic_id, 0, 0, 7, (1, 1, 1, 1, 1, 1, 3, 3), False)
        assert set(toy.states("g", shipped[0].topic_id, 0).values()) == {TERMINAL}


def test_renew_extends_locks_with_v2(broker: EmbeddedBroker, toy: ShareWireLog) -> None:
    produce(broker.bootstrap, "renew", 2)
    with ShareConsumer(broker.bootstrap, "g", topics=["renew"]) as c:
        records = poll_until(c, 2)
        assert c.renew(records) == {("renew", 0): 0}
        assert toy.acks[-1][2:] == (0, 1, (4,), True)
        tid = records[0].topic_id
        assert tid is not None
        assert set(toy.states("g", tid, 0).values()) == {ACQUIRED}
        for r in records:
            c.acknowledge(r)
        c.commit()
        assert set(toy.states("g", tid, 0).values()) == {TERMINAL}


def test_renew_refused_when_the_group_turns_it_off(broker: EmbeddedBroker, toy: ShareWireLog) -> None:
    """share.renew.acknowledge.enable=false on the group: a RENEW is INVALID_RECORD_STATE (Kafka's code)
    and the records stay acquired; other acknowledgements still work."""
    with Admin(broker.bootstrap) as admin:
        admin.alter_configs(
            ConfigResource(ResourceType.GROUP, "g"), {"share.renew.acknowledge.enable": "false"}
        )
    produce(broker.bootstrap, "norenew", 2)
    with ShareConsumer(broker.bootstrap, "g", topics=["norenew"]) as c:
        records = poll_until(c, 2)
        assert c.renew(records) == {("norenew", 0): ErrorCode.invalid_record_state}
        tid = records[0].topic_id
        assert tid is not None
        assert set(toy.states("g", tid, 0).values()) == {ACQUIRED}
        for r in records:
            c.acknowledge(r)
        assert c.commit() == {("norenew", 0): 0}
        assert set(toy.states("g", tid, 0).values()) == {TERMINAL}


def test_fenced_member_rejoins_with_a_new_session(broker: EmbeddedBroker, toy: ShareWireLog) -> None:
    produce(broker.bootstrap, "fence", 3)
    with ShareConsumer(broker.bootstrap, "g", topics=["fence"]) as c:
        member = c.member_id
        assert len(poll_until(c, 3)) == 3
        # the broker expires the member (as a missed session timeout would): its next heartbeat
        # is answered UNKNOWN_MEMBER_ID and it rejoins
        share = broker.broker.share
        assert share is not None
        broker.call(share.run_timers, share.now_ms() + 10**9)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            joins = [d for k, e, d in toy.calls if k == "heartbeat" and e == 0]
            if len(joins) >= 2:
                break
            time.sleep(0.02)
        assert len(joins) == 2 and joins[1][0] == member  # same member id, epoch 0 again
        produce(broker.bootstrap, "fence", 2)
        n_fetches = len(fetch_epochs(toy))
        # the old session and its acquisitions are gone: the next fetch opens a session at epoch 0
        records = poll_until(c, 2)
        assert fetch_epochs(toy)[n_fetches] == ("fetch", 0)
        assert len({r.offset for r in records if r.offset >= 3}) >= 2  # the two new ones (offsets
        # 3 and 4, or later with the in-log persister's state between them)


def test_assignment_change_forgets_revoked_partitions(broker: EmbeddedBroker, toy: ShareWireLog) -> None:
    produce(broker.bootstrap, "moving", 6, partitions=2)
    seen: list[dict[tuple[str, int], int]] = []
    with ShareConsumer(broker.bootstrap, "g", topics=["moving"], on_acknowledged=seen.append) as c:
        records = poll_until(c, 6)
        assert {r.partition for r in records} == {0, 1}
        tid = records[0].topic_id
        assert tid is not None
        for r in records:
            c.acknowledge(r)
        # a second member joins: the assignor moves one of c's two partitions to it
        with ShareConsumer(broker.bootstrap, "g", topics=["moving"]):
            deadline = time.monotonic() + 10
            while len(c.assignment()) != 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(c.assignment()) == 1
            kept = c.assignment()[0][1]

            def forgetting() -> list[Any]:
                return [req for kind, _, req in toy.calls if kind == "fetch" and req.forgotten_topics_data]

            # (unlike the stand-in, a real broker serves whatever is still in the session: let the
            # client's next fetch forget the revoked partition before new records arrive)
            while not forgetting() and time.monotonic() < deadline:
                assert c.poll(0.1) == []
            produce(broker.bootstrap, "moving", 4, partitions=2)
            more = poll_until(c, 2)
            assert {r.partition for r in more} == {kept}
            # the acknowledgements rode on the fetch that also forgot the revoked partition
            first_forget: Any = forgetting()[0]
            assert [(f.topic_id, f.partitions) for f in first_forget.forgotten_topics_data] == [
                (tid, (1 - kept,))
            ]
            assert seen == [{("moving", 0): 0, ("moving", 1): 0}]
            share = broker.broker.share
            assert share is not None
            session = broker.call(share.sessions.get, "g", c.member_id)
            assert session is not None
            assert {(p.topic_id, p.partition) for p in session.partitions} == {(tid, kept)}
