"""Crash-durable delivery counts in the engine: an acquisition is written (AVAILABLE with its new
count) and changes nothing when it commits; a rebuilt engine redelivers with the count after the one
handed out; a record loaded with its deliveries used up is archived (or dead-lettered), not
delivered again; off, a restart forgets the acquisition as Kafka does."""

from __future__ import annotations

import uuid

from shareq.persister.memory import MemoryPersister
from shareq.share import AcknowledgementBatch, AcknowledgeType, PendingWrite, ShareConfig, SharePartition
from shareq.share.persister import SharePartitionKey

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=9), partition=0)


class Broker:
    """An engine over a memory persister that a crash replaces by one rebuilt from the state."""

    def __init__(self, config: ShareConfig) -> None:
        self.config = config
        self.persister = MemoryPersister()
        self.sp = SharePartition(KEY, config)
        self.persist(self.sp.initialize(None, log_end_offset=0))

    def persist(self, write: PendingWrite | None, now: int = 0) -> None:
        if write is None:
            return
        self.persister.apply(write.params)
        for follow_up in self.sp.complete(write.handle, True, now).writes:
            self.persist(follow_up, now)

    def fetch(self, first: int, last: int, now: int = 0) -> list[tuple[int, int, int]]:
        result = self.sp.acquire("c", [(first, last)], max_records=500, now=now)
        self.persist(result.write, now)
        self.persist(result.counts, now)
        return [(r.first_offset, r.last_offset, r.delivery_count) for r in result.records]

    def crash(self) -> None:
        self.sp = SharePartition(KEY, self.config)
        self.sp.initialize(self.persister.state(KEY))


def test_an_acquisition_is_written_and_survives_a_crash() -> None:
    b = Broker(ShareConfig(durable_counts=True))
    assert b.fetch(0, 9) == [(0, 9, 1)]
    state = b.persister.state(KEY)
    assert state is not None and [tuple(x) for x in state.state_batches] == [(0, 9, 0, 1)]
    assert [r.state.name for r in b.sp.runs()] == ["ACQUIRED"]  # the commit changed nothing
    b.crash()
    assert b.fetch(0, 9) == [(0, 9, 2)]


def test_a_record_that_crashes_the_broker_each_time_reaches_the_limit() -> None:
    b = Broker(ShareConfig(durable_counts=True, delivery_count_limit=3))
    seen = []
    for _ in range(5):
        got = b.fetch(0, 0)
        seen += [count for _, _, count in got]
        b.crash()  # the record takes the broker with it
    assert seen == [1, 2, 3]
    assert b.sp.spso == 1  # archived after exactly the limit's deliveries


def test_with_a_dlq_the_exhausted_record_goes_archiving() -> None:
    b = Broker(ShareConfig(durable_counts=True, delivery_count_limit=2, dlq_enabled=True))
    assert b.fetch(0, 0) == [(0, 0, 1)]
    b.crash()
    assert b.fetch(0, 0) == [(0, 0, 2)]
    b.crash()
    assert b.fetch(0, 0) == []
    assert b.sp.archiving_spans() == [(0, 0, 2)]


def test_off_a_crash_forgets_the_delivery_as_kafka_does() -> None:
    b = Broker(ShareConfig(delivery_count_limit=3))
    seen = []
    for _ in range(5):
        got = b.fetch(0, 0)
        assert b.sp.runs()[0].state.name == "ACQUIRED"
        seen += [count for _, _, count in got]
        b.crash()
    assert seen == [1, 1, 1, 1, 1]


def test_acknowledged_after_the_count_write_is_acknowledged() -> None:
    b = Broker(ShareConfig(durable_counts=True))
    assert b.fetch(0, 4) == [(0, 4, 1)]
    batch = AcknowledgementBatch(first_offset=0, last_offset=4, types=(AcknowledgeType.ACCEPT,))
    b.persist(b.sp.acknowledge("c", [batch], now=0).write)
    b.crash()
    assert b.sp.spso == 5 and b.fetch(0, 4) == []
