"""Property: for any history of acquisitions, acknowledgements, lock expiries, member departures and
crashes, an engine rebuilt from what was persisted agrees with the live one on what must survive: the
start offset, every terminal record, every due time still ahead (never earlier, never lost), and with
crash-durable counts a delivery count at least the number of times each record was handed out."""

from __future__ import annotations

import contextlib
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.persister.memory import MemoryPersister
from shareq.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    PendingWrite,
    ShareConfig,
    SharePartition,
    ShareRequestError,
)
from shareq.share.backoff import RedeliveryBackoff
from shareq.share.persister import SharePartitionKey
from shareq.share.record_state import TERMINAL, RecordState

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=11), partition=0)
BATCHES = [(i * 4, i * 4 + 3) for i in range(8)]  # 32 records, batches of 4
ACKS = [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), st.sampled_from(["a", "b"]), st.integers(1, 12)),
        st.tuples(
            st.just("ack"),
            st.sampled_from(["a", "b"]),
            st.integers(0, 31),
            st.integers(0, 6),
            st.sampled_from(ACKS),
        ),
        st.tuples(st.just("time"), st.integers(1, 3_000)),
        st.tuples(st.just("leave"), st.sampled_from(["a", "b"])),
        st.tuples(st.just("crash")),
    ),
    max_size=40,
)


class Broker:
    def __init__(self, config: ShareConfig) -> None:
        self.config = config
        self.persister = MemoryPersister()
        self.now = 0
        self.handed: dict[int, int] = {}  # deliveries seen per offset
        self.sp = SharePartition(KEY, config)
        self.persist(self.sp.initialize(None, log_end_offset=0))

    def persist(self, write: PendingWrite | None) -> None:
        if write is None:
            return
        self.persister.apply(write.params)
        for follow_up in self.sp.complete(write.handle, True, self.now).writes:
            self.persist(follow_up)

    def rebuilt(self) -> SharePartition:
        sp = SharePartition(KEY, self.config)
        sp.initialize(self.persister.state(KEY))
        return sp

    def step(self, op: tuple) -> None:  # type: ignore[type-arg]
        kind = op[0]
        if kind == "time":
            self.now += op[1]
            self.persist(self.sp.expire(self.now))
            self.sp.mature(self.now)
        elif kind == "acquire":
            start = self.sp.next_fetch_offset()
            batches = [b for b in BATCHES if b[1] >= start]
            result = self.sp.acquire(op[1], batches, max_records=op[2], now=self.now)
            self.persist(result.write)
            self.persist(result.counts)
            for r in result.records:
                for o in range(r.first_offset, r.last_offset + 1):
                    self.handed[o] = self.handed.get(o, 0) + 1
        elif kind == "ack":
            _, member, first, length, ack = op
            batch = AcknowledgementBatch(first, min(first + length, 31), (ack,))
            with contextlib.suppress(ShareRequestError):  # refused (not this member's...): no change
                self.persist(self.sp.acknowledge(member, [batch], now=self.now).write)
        elif kind == "leave":
            self.persist(self.sp.release_member(op[1], self.now))
        else:
            self.sp = self.rebuilt()


def _by_offset(sp: SharePartition) -> dict[int, tuple[RecordState, int, int]]:
    return {
        o: (r.state, r.delivery_count, r.available_at)
        for r in sp.runs()
        for o in range(max(r.first_offset, sp.spso), r.last_offset + 1)
    }


@settings(max_examples=300, deadline=None)
@given(history=ops, durable=st.booleans())
def test_a_rebuilt_engine_keeps_what_must_survive(history: list[tuple], durable: bool) -> None:  # type: ignore[type-arg]
    config = ShareConfig(
        backoff=RedeliveryBackoff(base_ms=500, multiplier=2.0, max_ms=4_000, jitter=0.2),
        window_count=True,
        max_record_locks=16,
        delivery_count_limit=4,
        durable_counts=durable,
        record_lock_duration_ms=1_000,
    )
    b = Broker(config)
    for op in history:
        b.step(op)
        rebuilt = b.rebuilt()
        assert rebuilt.spso == b.sp.spso
        live, back = _by_offset(b.sp), _by_offset(rebuilt)
        for offset, (state, count, due) in live.items():
            if state in TERMINAL:
                assert back[offset][0] is state
            if state is RecordState.AVAILABLE and due > b.now:
                assert back[offset] == (state, count, due)  # the rest of the delay, never less
            if durable and offset in back and back[offset][0] not in TERMINAL:
                assert back[offset][1] >= b.handed.get(offset, 0) or back[offset][0] is RecordState.ARCHIVING
        if durable:
            for offset, n in b.handed.items():
                if offset >= rebuilt.spso and offset in back and back[offset][0] is RecordState.AVAILABLE:
                    assert back[offset][1] >= n
