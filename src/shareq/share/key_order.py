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
    partition: PartitionState, batches: Sequence[tuple[int, int]], keys: KeyView, stats: KeyOrderStats
) -> list[tuple[int, int]]:
    """The offset ranges (sorted, disjoint) of ``batches`` an acquisition may visit: every offset
    whose key has no held record. Held and terminal offsets may be included (the walk skips them)."""
    lo = partition.spso
    hi = min(keys.end, max(partition.end, batches[-1][1] + 1) if batches else partition.end) - 1
    if hi < lo or not batches:
        stats.blocked_keys = stats.waiting = 0
        return [(b[0], b[1]) for b in batches]
    hashes = keys.hashes[lo - keys.base : hi - keys.base + 1]
    cls = np.zeros(hi - lo + 1, dtype=np.int8)  # offsets no run covers are first-time candidates
    for run in partition.runs.overlapping(lo, hi):
        a = max(run.first, lo) - lo
        e = min(run.last, hi) - lo + 1
        if run.marks is not None:  # a state per record: ARCHIVING ones are held, the rest done
            marks = np.frombuffer(bytes(run.marks), dtype=np.uint8)[a + lo - run.first : e + lo - run.first]
            cls[a:e] = np.where(marks == ARCHIVING_BYTE[0], _HELD, _DONE)
        elif run.state in TERMINAL:
            cls[a:e] = _DONE
        elif run.state is not _AVAILABLE or run.txn is not None:
            cls[a:e] = _HELD
    held = hashes[(cls == _HELD) & (hashes != 0)]
    if len(held) == 0:
        stats.blocked_keys = stats.waiting = 0
        return [(b[0], b[1]) for b in batches]
    blocked_keys = np.unique(held)
    blocked = (cls == _CANDIDATE) & np.isin(hashes, blocked_keys, assume_unique=False)
    stats.blocked_keys = len(blocked_keys)
    read_hi = min(batches[-1][1], hi)
    first_read = max(batches[0][0], lo)
    stats.waiting = (
        int(np.count_nonzero(blocked[first_read - lo : read_hi - lo + 1])) if read_hi >= first_read else 0
    )
    return list(_open_ranges(blocked, lo, batches))


def _open_ranges(
    blocked: np.ndarray, lo: int, batches: Sequence[tuple[int, int]]
) -> Iterator[tuple[int, int]]:
    """Maximal ranges of ``batches`` holding no blocked offset (``blocked[i]`` is offset lo + i;
    offsets past the array are open)."""
    edges = np.flatnonzero(np.diff(np.concatenate(([True], blocked, [True])).astype(np.int8)))
    # edges come in pairs: [start, stop) of each open stretch, relative to lo
    opens = edges.reshape(-1, 2) if len(edges) else np.empty((0, 2), dtype=np.int64)
    tail = lo + len(blocked)
    spans = [(lo + int(s), lo + int(t) - 1) for s, t in opens]
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
    offset is in flight (the next fetch starts at the first of them)."""
    new_end = partition.end
    if new_end <= old_end:
        return
    runs = partition.runs
    touched: list[tuple[int, int]] = []
    prev = old_end
    for a, e in [*allowed, (new_end, new_end)]:
        if e < old_end:
            continue
        gap_lo, gap_hi = prev, min(a, new_end) - 1
        for bf, bl in batches:  # only offsets the log holds; the rest stay gaps
            lo, hi = max(gap_lo, bf), min(gap_hi, bl)
            if lo <= hi:
                runs.insert(InFlightBatch(lo, hi, _AVAILABLE, 0))
                touched.append((lo, hi))
        prev = max(prev, e + 1)
        if prev >= new_end:
            break
    if touched:
        runs.coalesce_spans(touched)
