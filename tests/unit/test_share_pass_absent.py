"""The share engine passing share-state control batches (offsets with no record to deliver):
never acquired, no write, the end offset and SPSO move past them, and a SPSO that moved over them
alone is not written again (the in-log persister's writes would otherwise feed themselves)."""

from __future__ import annotations

import uuid

from shareq.persister.memory import MemoryPersister
from shareq.share import AcknowledgementBatch, AcknowledgeType, PendingWrite, SharePartition
from shareq.share.persister import SharePartitionKey

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=5), partition=0)


class Shell:
    """An engine, its in-memory persister and the writes the shell has made."""

    def __init__(self) -> None:
        self.persister = MemoryPersister()
        self.sp = SharePartition(KEY)
        self.writes = 0
        self.complete(self.sp.initialize(None, log_end_offset=0))

    def complete(self, write: PendingWrite | None, ok: bool = True) -> None:
        if write is None:
            return
        self.writes += 1
        self.persister.apply(write.params)
        for follow_up in self.sp.complete(write.handle, ok, 0).writes:
            self.complete(follow_up)

    def acquire(self, batches: list[tuple[int, int]]) -> list[tuple[int, int]]:
        result = self.sp.acquire("m", batches, max_records=500, now=0)
        self.complete(result.write)
        return [(r.first_offset, r.last_offset) for r in result.records]

    def accept(self, first: int, last: int) -> PendingWrite:
        batch = AcknowledgementBatch(first_offset=first, last_offset=last, types=(AcknowledgeType.ACCEPT,))
        write = self.sp.acknowledge("m", [batch], now=0).write
        assert write is not None
        return write


def test_share_state_between_batches_is_never_acquired_and_the_spso_passes_it() -> None:
    shell = Shell()
    assert shell.acquire([(0, 4), (8, 9)]) == [(0, 4), (8, 9)]  # 5..7: share state, not returned
    shell.complete(shell.accept(0, 4))
    shell.complete(shell.accept(8, 9))
    assert (shell.sp.spso, shell.sp.end_offset) == (10, 10)
    assert shell.persister.state(KEY).start_offset == 10


def test_share_state_at_the_tail_moves_end_and_spso_without_a_write() -> None:
    shell = Shell()
    assert shell.acquire([(0, 4)]) == [(0, 4)]
    shell.sp.pass_absent(5, 7)
    assert (shell.sp.spso, shell.sp.end_offset) == (0, 8)  # records 0..4 are still in flight
    shell.complete(shell.accept(0, 4))
    assert (shell.sp.spso, shell.sp.end_offset) == (8, 8)
    writes = shell.writes
    shell.sp.pass_absent(8, 12)  # the write above became share state at 8.. in the in-log design
    assert (shell.sp.spso, shell.sp.end_offset, shell.writes) == (13, 13, writes)
    assert shell.sp.start_offset_write() is None
    assert shell.sp.next_fetch_offset() == 13


def test_passing_share_state_while_a_write_is_in_flight_asks_for_no_catch_up_write() -> None:
    shell = Shell()
    shell.acquire([(0, 4)])
    write = shell.accept(0, 4)  # persists SPSO 5 ...
    shell.sp.pass_absent(5, 6)  # ... while share state (that write's, say) is passed
    shell.sp.pass_absent(7, 7)
    writes = shell.writes
    result = shell.sp.complete(write.handle, True, 0)
    assert result.writes == ()  # SPSO 8 and durable 5 differ by share state alone
    assert (shell.sp.spso, shell.writes) == (8, writes)
    # Real progress after it is written as usual, with the SPSO past the share state.
    assert shell.acquire([(9, 9)]) == [(9, 9)]
    final = shell.accept(9, 9)
    assert final.params.start_offset == 10
    shell.complete(final)


def test_share_state_below_the_end_offset_changes_nothing() -> None:
    shell = Shell()
    shell.acquire([(0, 9)])
    shell.sp.pass_absent(3, 5)  # inside what is in flight: not share state the engine could pass
    assert (shell.sp.spso, shell.sp.end_offset) == (0, 10)
    shell.sp.pass_absent(12, 14)  # beyond the end offset, not adjacent: nothing read up to it yet
    assert shell.sp.end_offset == 10
