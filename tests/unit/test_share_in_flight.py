"""Run-length in-flight map: splitting, coalescing, the acquirable index."""

from __future__ import annotations

from shareq.share.in_flight import InFlightBatch, InFlightMap
from shareq.share.record_state import RecordState

S = RecordState


def spans(m: InFlightMap) -> list[tuple[int, int, str]]:
    return [(r.first, r.last, r.state.name) for r in m]


def test_split_isolate_and_coalesce() -> None:
    m = InFlightMap()
    m.insert(InFlightBatch(10, 19, S.ACQUIRED, 1, "a"))
    m.isolate(12, 14)
    assert spans(m) == [(10, 11, "ACQUIRED"), (12, 14, "ACQUIRED"), (15, 19, "ACQUIRED")]
    mid = m.get(12)
    assert mid is not None
    mid.state = S.ACKNOWLEDGED
    m.coalesce(12, 14)
    assert len(m) == 3
    mid.state = S.ACQUIRED
    m.coalesce(12, 14)
    assert spans(m) == [(10, 19, "ACQUIRED")]


def test_split_outside_or_on_boundary_is_a_no_op() -> None:
    m = InFlightMap()
    m.insert(InFlightBatch(10, 19, S.AVAILABLE, 1))
    m.split(10)
    m.split(20)
    m.split(5)
    assert spans(m) == [(10, 19, "AVAILABLE")]


def test_acquirable_index_follows_splits_and_state() -> None:
    m = InFlightMap()
    m.insert(InFlightBatch(0, 9, S.ACQUIRED, 1, "a"))
    m.insert(InFlightBatch(10, 19, S.AVAILABLE, 1))
    assert m.first_acquirable(0) == 10
    m.isolate(10, 12)
    head = m.get(10)
    assert head is not None
    head.state = S.ACQUIRED
    m.reindex(head)
    assert m.first_acquirable(0) == 13
    assert m.first_acquirable(14) is None


def test_overlapping_and_run_at() -> None:
    m = InFlightMap()
    for first in (0, 10, 20):
        m.insert(InFlightBatch(first, first + 4, S.ACQUIRED, 1, "a"))
    assert [r.first for r in m.overlapping(3, 21)] == [0, 10, 20]
    assert [r.first for r in m.overlapping(5, 9)] == []
    run = m.run_at(12)
    assert run is not None and run.first == 10
    assert m.run_at(7) is None


def test_runs_with_different_locks_or_transitions_do_not_merge() -> None:
    m = InFlightMap()
    a = InFlightBatch(0, 4, S.AVAILABLE, 1)
    b = InFlightBatch(5, 9, S.AVAILABLE, 1)
    m.insert(a)
    m.insert(b)
    b.txn = object()  # type: ignore[assignment]
    m.coalesce(0, 9)
    assert len(m) == 2
    b.txn = None
    m.coalesce(0, 9)
    assert spans(m) == [(0, 9, "AVAILABLE")]
