"""Key-ordered sharing (``shareq.share.ordering=key``): which records an acquisition may hand out.

The rule: within a share-partition, a record of key k is acquirable only when every other
non-terminal record of k is AVAILABLE and handed out in the same acquisition, earlier in offset
order. Equivalently, with the acquisition walking in offset order, a record is held back while any
record of its key is *held* (ACQUIRED, ARCHIVING, TX_PENDING, or in a transition), wherever it
lies, and otherwise goes out with every earlier AVAILABLE record of its key in the same
acquisition. So at most one member holds records of a key at any moment, and each receives a key's
records in offset order; a RELEASE or lock expiry puts the key's earliest record back first.
Records with a null key (hash 0) are unordered, as in a ``none`` group.

The shell passes the key hash of every offset from the SPSO through the end of what it read
(``KeyView``); nothing here reads a file. The blocked set is derived from the record states and
those hashes at each acquisition (no state of its own, so a restart needs nothing new): its cost
follows the records in flight and the records looked at, vectorised. The acquire walk
(``acquisition.acquire``) then only visits the ``allowed`` ranges this module returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from shareq.share.in_flight import ARCHIVING_BYTE, InFlightBatch
from shareq.share.partition_state import PartitionState
from shareq.share.record_state import TERMINAL, RecordState

_AVAILABLE = RecordState.AVAILABLE
_CANDIDATE, _HELD, _DONE = 0, 1, 2
"""What an offset is to an acquisition: AVAILABLE or not in flight yet, held, or done."""


@dataclass(frozen=True, slots=True)
class KeyView:
    """The key hash (uint32, 0 = null key) of every offset from ``base`` on."""

    base: int
    hashes: np.ndarray

    @property
    def end(self) -> int:
        """One past the last offset covered."""
        return self.base + len(self.hashes)


@dataclass(slots=True)
class KeyOrderStats:
    """What the last acquisition of a key-ordered share-partition found (read by metrics)."""

    blocked_keys: int = 0
    """Distinct keys with a held record."""
    waiting: int = 0
    """Records it looked at and held back because their key was blocked."""


def allowed_ranges(
    partition: PartitionState,
    batches: Sequence[tuple[int, int]],
    keys: KeyView,
    stats: KeyOrderStats,
    now: int = 0,
) -> list[tuple[int, int]]:
    """The offset ranges (sorted, disjoint) of ``batches`` an acquisition may take: AVAILABLE offsets
    and offsets not yet in flight, whose key has no held record."""
    lo = partition.spso
    hi = min(keys.end, max(partition.end, batches[-1][1] + 1) if batches else partition.end) - 1
    if hi < lo or not batches:
        stats.blocked_keys = stats.waiting = 0
        return [(b[0], b[1]) for b in batches]
    n = hi - lo + 1
    hashes = keys.hashes[lo - keys.base : hi - keys.base + 1]
    # one pass over the runs (Python: attributes only), then the class of every offset in one
    # numpy call: each run's class repeated over its span, 0 (a candidate) over the gaps between
    lengths: list[int] = []
    values: list[int] = []
    marked: list[tuple[int, int, int, bytes | bytearray]] = []
    prev = 0
    for run in partition.runs.overlapping(lo, hi):
        a = (run.first if run.first > lo else lo) - lo
        e = (run.last if run.last < hi else hi) - lo + 1
        if run.marks is not None:
            marked.append((a, e, run.first - lo, run.marks))
            continue
        state = run.state
        if state in TERMINAL:
            value = _DONE
        elif state is not _AVAILABLE or run.txn is not None or _delayed(run, now):
            value = _HELD
        else:
            continue
        if a > prev:
            lengths.append(a - prev)
            values.append(_CANDIDATE)
        lengths.append(e - a)
        values.append(value)
        prev = e
    lengths.append(n - prev)
    values.append(_CANDIDATE)
    cls = np.repeat(np.array(values, dtype=np.int8), lengths)
    for a, e, base, marks in marked:  # a state per record: ARCHIVING ones are held, the rest done
        states = np.frombuffer(bytes(marks), dtype=np.uint8)[a - base : e - base]
        cls[a:e] = np.where(states == ARCHIVING_BYTE[0], _HELD, _DONE)
    held = hashes[(cls == _HELD) & (hashes != 0)]
    # what may go out is only looked for where the batches read lie (the in-flight records
    # before and after them only block keys)
    r0 = min(max(batches[0][0], lo) - lo, n)
    r1 = max(min(batches[-1][1], hi) - lo + 1, r0)
    candidate = cls[r0:r1] == _CANDIDATE
    if len(held):
        blocked_keys = np.unique(held)
        blocked = candidate & np.isin(hashes[r0:r1], blocked_keys)
        stats.blocked_keys = len(blocked_keys)
        stats.waiting = int(np.count_nonzero(blocked))
        ok = candidate & ~blocked
    else:
        stats.blocked_keys = stats.waiting = 0
        ok = candidate
    return list(_open_ranges(ok, lo + r0, batches))


def _delayed(run: InFlightBatch, now: int) -> bool:
    """An AVAILABLE run waiting out a redelivery backoff (``due`` ahead) keeps its key blocked until
    then, like a held one: the key waits out the delay, in order."""
    return run.due > now


def _open_ranges(ok: np.ndarray, lo: int, batches: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Maximal ranges of ``batches`` where ``ok`` (``ok[i]`` is offset lo + i; offsets past the
    array are open: not in flight yet)."""
    padded = np.concatenate(([False], ok, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))  # pairs: [start, stop) of each open stretch
    tail = lo + len(ok)
    spans = [(lo + int(s), lo + int(t) - 1) for s, t in edges.reshape(-1, 2)]
    if spans and spans[-1][1] == tail - 1:
        spans[-1] = (spans[-1][0], 1 << 62)
    else:
        spans.append((tail, 1 << 62))
    i = 0
    for bf, bl in batches:
        while i < len(spans) and spans[i][1] < bf:
            i += 1
        j = i
        while j < len(spans) and spans[j][0] <= bl:
            a, e = spans[j]
            yield (a if a > bf else bf, e if e < bl else bl)
            j += 1


def pieces(
    batches: Sequence[tuple[int, int]], allowed: Sequence[tuple[int, int]] | None
) -> Iterator[tuple[int, int, int, int]]:
    """``(batch first, piece first, piece last, batch last)`` for the acquire walk: each batch whole
    without ``allowed``; else each allowed range within it, and an empty piece for a batch with none
    (so the walk still sees the batch and does not take it for offsets the log lost)."""
    if allowed is None:
        for bf, bl in batches:
            yield bf, bf, bl, bl
        return
    i = 0
    n = len(allowed)
    for bf, bl in batches:
        while i < n and allowed[i][1] < bf:
            i += 1
        found = False
        j = i
        while j < n and allowed[j][0] <= bl:
            a, e = allowed[j]
            yield bf, (a if a > bf else bf), (e if e < bl else bl), bl
            found = True
            j += 1
        if not found:
            yield bf, bl + 1, bl, bl


def hold_back(
    partition: PartitionState,
    batches: Sequence[tuple[int, int]],
    allowed: Sequence[tuple[int, int]],
    old_end: int,
) -> None:
    """After a walk over ``allowed``: the records it looked past for the first time, below the end
    offset it reached, become AVAILABLE with no delivery yet, so that everything below the end
    offset is in flight (the next fetch starts at the first of them).

    Stretches that touch across a batch boundary are joined before they go in, so each maximal
    stretch is one run. Only the first can have an equal neighbour already in flight (the run
    ending at ``old_end - 1``): every other neighbour is a record this walk acquired (or an
    offset the log does not hold), so one ``coalesce`` there, not one per stretch."""
    new_end = partition.end
    if new_end <= old_end:
        return
    stretches: list[list[int]] = []
    # offsets of the batches in [old_end, new_end) outside ``allowed`` (both sorted): a sweep
    i, n = 0, len(allowed)
    for bf, bl in batches:
        if bl < old_end:
            continue
        if bf >= new_end:
            break
        lo = bf if bf > old_end else old_end
        hi = bl if bl < new_end else new_end - 1
        while i < n and allowed[i][1] < lo:
            i += 1
        j = i
        pos = lo
        while pos <= hi:
            if j < n and allowed[j][0] <= hi:
                a, e = allowed[j]
                if a > pos:
                    _stretch(stretches, pos, a - 1)
                pos = max(pos, e + 1)
                j += 1
            else:
                _stretch(stretches, pos, hi)
                break
    if not stretches:
        return
    runs = partition.runs
    for first, last in stretches:
        runs.insert(InFlightBatch(first, last, _AVAILABLE, 0))
    runs.coalesce(stretches[0][0], stretches[0][0])


def _stretch(stretches: list[list[int]], first: int, last: int) -> None:
    """Add ``first..last`` to the ascending ``stretches``, joined to the last one if they touch."""
    if stretches and stretches[-1][1] + 1 == first:
        stretches[-1][1] = last
    else:
        stretches.append([first, last])
