"""Share delivery through librdkafka's ShareConsumer, the same scenario against Kafka and shareq."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from compat_support import (
    FAST,
    Server,
    as_kafka,
    count_at_least,
    create_topic,
    earliest_group,
    poll_for,
    poll_until,
    produce,
    share_consumer,
    wait_equal,
)
from confluent_kafka import AcknowledgeType, Producer

from shareq.client import Admin
from shareq.client import Producer as ClientProducer

pytestmark = pytest.mark.timeout(120)


def _start_offsets(server: Server, group: str, topic: str, partitions: int = 1) -> dict[int, tuple[int, int]]:
    """(start offset, lag) per partition, from DescribeShareGroupOffsets."""
    with Admin(server.bootstrap) as admin:
        offsets = admin.describe_share_group_offsets(group, {topic: list(range(partitions))})
    return {p: (o.start_offset, o.lag) for (t, p), o in offsets.items() if t == topic}


def _queue(
    server: Server,
    names: tuple[str, str],
    values: Sequence[bytes] = (),
    *,
    partitions: int = 1,
    partition: int | Callable[[int], int] = 0,
    **group_configs: str,
) -> tuple[str, str]:
    """A topic of ``partitions`` holding ``values`` and a share group (with ``group_configs``) reading
    it from the start; the topic's and the group's names."""
    topic, group = names
    create_topic(server, topic, partitions=partitions)
    earliest_group(server, group, **group_configs)
    if values:
        produce(server, topic, values, partition=partition)
    return topic, group


@contextmanager
def _consuming(server: Server, group: str, topic: str, *, explicit: bool = False) -> Iterator[Any]:
    """A librdkafka ShareConsumer of ``group`` subscribed to ``topic``, closed on the way out."""
    consumer = share_consumer(server, group, [topic], explicit=explicit)
    try:
        yield consumer
    finally:
        consumer.close()


def test_every_record_delivered_once(server: Server, names: tuple[str, str]) -> None:
    """20 records, one consumer, implicit acknowledgement: each delivered once with delivery count 1."""
    topic, group = _queue(server, names, [b"v%d" % i for i in range(20)])
    with _consuming(server, group, topic) as consumer:
        got = poll_until(consumer, count_at_least(20))
        assert sorted(m.offset() for m in got) == list(range(20))
        assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(20))
        assert {m.delivery_count() for m in got} == {1}
        assert poll_for(consumer, 1.5) == []


def test_release_redelivers_with_higher_delivery_count(server: Server, names: tuple[str, str]) -> None:
    """Released records come back with delivery count 2."""
    topic, group = _queue(server, names, [b"r%d" % i for i in range(5)])
    with _consuming(server, group, topic, explicit=True) as consumer:
        first = poll_until(
            consumer, count_at_least(5), on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.RELEASE)
        )
        assert [m.delivery_count() for m in first] == [1] * 5
        consumer.commit_sync()
        again = poll_until(consumer, count_at_least(5), on_message=lambda m: consumer.acknowledge(m))
        assert sorted(m.offset() for m in again) == list(range(5))
        assert {m.delivery_count() for m in again} == {2}
        consumer.commit_sync()


def test_reject_archives(server: Server, names: tuple[str, str]) -> None:
    """Rejected records are not delivered again and the group's lag is 0."""
    topic, group = _queue(server, names, [b"x%d" % i for i in range(6)])
    with _consuming(server, group, topic, explicit=True) as consumer:
        got = poll_until(
            consumer, count_at_least(6), on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.REJECT)
        )
        assert len(got) == 6
        consumer.commit_sync()
        assert poll_for(consumer, 2.0) == []
    wait_equal(lambda: _start_offsets(server, group, topic)[0][1], 0, timeout=10)


def test_lock_expiry_redelivers(server: Server, names: tuple[str, str]) -> None:
    """With a 1 s acquisition lock, records one member never acknowledges go to another member with
    delivery count 2, no sooner than the lock allows."""
    topic, group = _queue(
        server, names, [b"l%d" % i for i in range(4)], **{"share.record.lock.duration.ms": "1000"}
    )
    with (
        _consuming(server, group, topic, explicit=True) as holder,
        _consuming(server, group, topic, explicit=True) as taker,
    ):
        before_acquiring = time.monotonic()
        first = poll_until(holder, count_at_least(4))
        assert {m.delivery_count() for m in first} == {1}
        again = poll_until(taker, count_at_least(4), timeout=20, on_message=taker.acknowledge)
        assert sorted(m.offset() for m in again) == [0, 1, 2, 3]
        assert {m.delivery_count() for m in again} == {2}
        # the records were acquired after before_acquiring, so this holds whenever the lock was kept 1 s
        assert time.monotonic() - before_acquiring >= 0.95
        taker.commit_sync()


def test_delivery_limit_archives(server: Server, names: tuple[str, str]) -> None:
    """With share.delivery.count.limit=2, a record released twice is archived: not delivered a third time,
    and the lag is 0."""
    topic, group = _queue(server, names, [b"d0", b"d1", b"d2"], **{"share.delivery.count.limit": "2"})
    counts: list[int] = []
    with _consuming(server, group, topic, explicit=True) as consumer:

        def release(m: object) -> None:
            counts.append(m.delivery_count())  # type: ignore[attr-defined]
            consumer.acknowledge(m, AcknowledgeType.RELEASE)

        for _round in range(2):
            got = poll_until(consumer, count_at_least(3), on_message=release)
            assert len(got) == 3
            consumer.commit_sync()
        assert counts == [1, 1, 1, 2, 2, 2]
        assert poll_for(consumer, 2.0) == []
    wait_equal(lambda: _start_offsets(server, group, topic)[0][1], 0, timeout=10)


def test_start_offset_and_lag_after_acks(server: Server, names: tuple[str, str]) -> None:
    """10 records; offsets 0-4 accepted in one commit, 5-9 released in the next: start offset 5, lag 5
    (DescribeShareGroupOffsets v1)."""
    topic, group = _queue(server, names, [b"a%d" % i for i in range(10)])
    with _consuming(server, group, topic, explicit=True) as consumer:
        got = poll_until(consumer, count_at_least(10))
        assert len(got) == 10
        for m in got[:5]:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        for m in got[5:]:
            consumer.acknowledge(m, AcknowledgeType.RELEASE)
        consumer.commit_sync()
        wait_equal(lambda: _start_offsets(server, group, topic), {0: (5, 5)}, timeout=10)


@pytest.mark.shareq_xfail(
    "deliberate: Kafka persists, and so reports, the start offset from before the acknowledgement being "
    "written, which stays behind until the share-partition's next state write (for good on an idle queue: "
    "consumed records look unconsumed, the connector works around it); shareq persists the start offset "
    "an acknowledgement moves to in the write that makes it durable"
)
def test_reported_start_offset_follows_state_writes(server: Server, names: tuple[str, str]) -> None:
    """Kafka persists the start offset before applying the acknowledgement that moves it: after all 6
    records are rejected DescribeShareGroupOffsets still says start offset 0 (lag 0); one more acknowledged
    record writes the state again and the reported start offset becomes 6. shareq says 6 at once."""
    topic, group = _queue(server, names, [b"w%d" % i for i in range(6)])
    with _consuming(server, group, topic, explicit=True) as consumer:
        got = poll_until(
            consumer, count_at_least(6), on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.REJECT)
        )
        assert len(got) == 6
        consumer.commit_sync()
        wait_equal(lambda: _start_offsets(server, group, topic)[0][1], 0, timeout=10)
        if server.kind == "shareq":
            assert _start_offsets(server, group, topic) == {0: (6, 0)}
        as_kafka(_start_offsets(server, group, topic), {0: (0, 0)}, "(start offset, lag) once rejected")
        produce(server, topic, [b"w6"])
        more = poll_until(consumer, count_at_least(1), on_message=consumer.acknowledge)
        assert [m.offset() for m in more] == [6]
        consumer.commit_sync()
        wait_equal(lambda: _start_offsets(server, group, topic), {0: (6, 0)}, timeout=10)


def test_two_consumers_share_one_partition(server: Server, names: tuple[str, str]) -> None:
    """Two members on a one-partition topic: together they get every record exactly once."""
    topic, group = _queue(server, names)
    with _consuming(server, group, topic) as first, _consuming(server, group, topic) as second:
        poll_for(first, 0.5)
        poll_for(second, 0.5)
        produce(server, topic, [b"s%d" % i for i in range(200)])
        got: list[object] = []
        deadline = time.monotonic() + 30
        while len(got) < 200 and time.monotonic() < deadline:
            got += first.poll(0.2)
            got += second.poll(0.2)
        offsets = sorted(m.offset() for m in got)  # type: ignore[attr-defined]
        assert offsets == list(range(200))


def test_first_poll_across_two_partitions(server: Server, names: tuple[str, str]) -> None:
    """Two partitions with 50 records each, one consumer: every record arrives exactly once, each poll
    holding a run of consecutive offsets per partition, and once both share-partitions are loaded the
    next 50 of each arrive the same way.

    Whether the first poll holds one partition or both is a race in Kafka (a fetch does not wait for a
    second share-partition's state to load, but the load may finish first), so it is not asserted."""
    topic, group = _queue(
        server, names, [b"p%d" % i for i in range(100)], partitions=2, partition=lambda i: i // 50
    )
    with _consuming(server, group, topic) as consumer:
        for prefix in (b"p", b"q"):
            if prefix == b"q":
                produce(server, topic, [b"q%d" % i for i in range(100)], partition=lambda i: i // 50)
            polls: list[list[Any]] = []
            deadline = time.monotonic() + 30
            while sum(map(len, polls)) < 100 and time.monotonic() < deadline:
                polls.append(list(consumer.poll(0.5)))
            for records in polls:
                for partition in {m.partition() for m in records}:
                    run = [m.offset() for m in records if m.partition() == partition]
                    assert run == list(range(run[0], run[0] + len(run)))
            assert sorted(m.value() for records in polls for m in records) == sorted(
                prefix + b"%d" % i for i in range(100)
            )


def test_producer_batch_larger_than_the_window(server: Server, names: tuple[str, str]) -> None:
    """One producer batch of 8,000 records, the default in-flight window of 2,000: batch-optimized
    acquisition hands out the whole batch in one poll rather than 2,000 at a time.

    The batch is written by shareq's client, which sends one batch per partition at ``flush`` (under
    its record and size bounds): librdkafka, even lingering, may ship the first records on their own
    when the topic's metadata arrives, which is not the case this test is about."""
    topic, group = _queue(server, names)
    with ClientProducer(server.bootstrap, batch_size=4 << 20, max_batch_records=100_000) as producer:
        for i in range(8_000):
            producer.send(topic, value=b"%099d" % i, partition=0)
        assert [m.offset for m in producer.flush()] == list(range(8_000))
    with _consuming(server, group, topic, explicit=True) as consumer:
        first: list[object] = []
        deadline = time.monotonic() + 30
        while not first and time.monotonic() < deadline:
            first = consumer.poll(0.5)
        assert [m.offset() for m in first] == list(range(8_000))  # type: ignore[attr-defined]


def test_share_group_across_a_cluster(cluster: Server, names: tuple[str, str]) -> None:
    """Kafka as three nodes, shareq as one: a 6-partition topic replicated on every node is consumed by two
    members exactly once, and every partition's lag falls to 0."""
    topic, group = _queue(
        cluster, names, [b"c%d" % i for i in range(120)], partitions=6, partition=lambda i: i % 6
    )
    with _consuming(cluster, group, topic) as first, _consuming(cluster, group, topic) as second:
        got: list[object] = []
        deadline = time.monotonic() + 60
        while len(got) < 120 and time.monotonic() < deadline:
            got += first.poll(0.2)
            got += second.poll(0.2)
        seen = sorted((m.partition(), m.offset()) for m in got)  # type: ignore[attr-defined]
        assert seen == sorted((p, o) for p in range(6) for o in range(20))
        first.commit_sync()
        second.commit_sync()
    wait_equal(
        lambda: {p: lag for p, (_s, lag) in _start_offsets(cluster, group, topic, 6).items()},
        {p: 0 for p in range(6)},
        timeout=20,
    )


def test_read_committed_share_group(server: Server, names: tuple[str, str]) -> None:
    """share.isolation.level=read_committed on a topic mixing committed and aborted transactions:
    exactly the committed records are delivered at Kafka's offsets, and the lag drops to 0 (the
    markers are acknowledged as gaps; the reported start offset is compared nowhere, Kafka's lags
    one state write behind)."""
    topic, group = _queue(server, names, **{"share.isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "tx-" + topic, **FAST})
    producer.init_transactions(20)
    for n in range(4):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=b"t%d-%d" % (n, i), partition=0)
        producer.flush(20)
        (producer.commit_transaction if n % 2 == 0 else producer.abort_transaction)(20)
    with _consuming(server, group, topic) as consumer:
        got = poll_until(consumer, count_at_least(10))
        assert sorted(m.value() for m in got) == sorted(b"t%d-%d" % (n, i) for n in (0, 2) for i in range(5))
        assert sorted(m.offset() for m in got) == [0, 1, 2, 3, 4, 12, 13, 14, 15, 16]
        assert poll_for(consumer, 1.5) == []
        wait_equal(lambda: _start_offsets(server, group, topic)[0][1], 0)
