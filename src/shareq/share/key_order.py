"""Key-ordered sharing (``shareq.share.ordering=key``): which records an acquisition may hand out.

The rule: within a share-partition, a record of key k is acquirable only when every other
non-terminal record of k is AVAILABLE and handed out in the same acquisition, earlier in offset
order. Equivalently, with the acquisition walking in offset order, a record is held back while any
record of its key is *held* (ACQUIRED, ARCHIVING, TX_PENDING, in a transition, or AVAILABLE waiting
out a redelivery delay), wherever it lies, and otherwise goes out with every earlier AVAILABLE
record of its key in the same acquisition. So at most one member holds records of a key at any
moment, and each receives a key's records in offset order; a RELEASE or lock expiry puts the key's
earliest record back first. Records with a null key (hash 0) are unordered, as in a ``none`` group.

``HeldKeys`` keeps, per share-partition, how many held records each key hash has, updated at every
change of a run between held and not held (``held_spans`` is the one place that says which records
of a run are held; every change of state, transition or due time goes through ``spans`` before and
``settle`` after it). It also keeps the key hash of every in-flight offset, taken from the
``KeyView`` the shell passes to each acquisition, so a later release, expiry, commit or marker
finds the hashes of the records it changes without a read. An acquisition then checks only the
records it looks at against the counts: its cost follows the records touched, not the keys held.
Nothing of this is durable: after a restart (or a group switched to ``key``) the first keyed
acquisition derives it from the record states and the hashes, once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from shareq.share.errors import ShareEngineBug
from shareq.share.in_flight import ARCHIVING_MARKS, InFlightBatch
from shareq.share.partition_state import PartitionState
from shareq.share.record_state import TERMINAL, RecordState

_AVAILABLE = RecordState.AVAILABLE
_NO_SPANS: list[tuple[int, int]] = []


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


def held_spans(run: InFlightBatch) -> list[tuple[int, int]]:
    """The offsets of ``run`` whose key they block: none for a terminal run or an acquirable one
    (AVAILABLE, no transition, no due time); the ARCHIVING records of a run with a state per
    record; else the whole run (ACQUIRED, ARCHIVING, TX_PENDING, in a transition, or delayed)."""
    marks = run.marks
    if marks is not None:
        base = run.first
        return [(base + m.start(), base + m.end() - 1) for m in ARCHIVING_MARKS.finditer(marks)]
    state = run.state
    if state in TERMINAL or (state is _AVAILABLE and run.txn is None and not run.due):
        return _NO_SPANS
    return [(run.first, run.last)]


class HeldKeys:
    """Held records per key hash of one share-partition, and the key hash of every in-flight
    offset (``base`` on; offsets below the SPSO are dropped in amortized steps)."""

    __slots__ = ("_buf", "_len", "_minus", "_plus", "base", "counts")

    def __init__(self, base: int) -> None:
        self.counts: dict[int, int] = {}
        """Key hash -> records of it held (only hashes with some; the null key never)."""
        self.base = base
        self._buf = np.zeros(1024, dtype=np.uint32)
        self._len = 0
        self._plus: list[tuple[int, int]] = []
        self._minus: list[tuple[int, int]] = []
        """Spans noted by ``add`` and not counted yet (``flush``)."""

    @property
    def known_end(self) -> int:
        """One past the last offset whose hash is kept."""
        return self.base + self._len

    # --- hashes of in-flight offsets ------------------------------------------------------------
    def remember(self, keys: KeyView, end: int, spso: int) -> None:
        """Keep the hashes of the offsets up to ``end`` (exclusive) not kept yet, from ``keys``;
        forget those below ``spso`` once they are half of what is kept."""
        self.flush()
        drop = spso - self.base
        if drop > 0 and (drop >= self._len or 2 * drop >= self._len):
            if drop >= self._len:
                self._len = 0
                self.base = spso
            else:
                self._buf[: self._len - drop] = self._buf[drop : self._len]
                self._len -= drop
                self.base = spso
        lo = self.known_end
        if end <= lo:
            return
        if lo < keys.base or end > keys.end:
            raise ShareEngineBug(f"key view {keys.base}..{keys.end} lacks offsets {lo}..{end}")
        need = end - self.base
        if need > len(self._buf):
            grown = np.zeros(max(need, 2 * len(self._buf)), dtype=np.uint32)
            grown[: self._len] = self._buf[: self._len]
            self._buf = grown
        self._buf[self._len : need] = keys.hashes[lo - keys.base : end - keys.base]
        self._len = need

    def hashes(self, first: int, last: int) -> np.ndarray:
        """The kept hashes of ``first..last`` (in flight, so kept)."""
        base = self.base
        if first < base or last >= base + self._len:
            raise ShareEngineBug(f"no key hashes kept for {first}..{last} (kept {base}..{self.known_end})")
        return self._buf[first - base : last - base + 1]

    # --- held counts ----------------------------------------------------------------------------
    def add(self, first: int, last: int, sign: int) -> None:
        """Records ``first..last`` became held (``sign`` 1) or stopped being held (-1): noted, and
        counted with the other changes noted since by ``flush`` (before anything reads the counts
        or forgets hashes), so that the hundreds of small runs an acquisition or an acknowledgement
        touches cost one vectorised step, not one each."""
        (self._plus if sign > 0 else self._minus).append((first, last))

    def flush(self) -> dict[int, int]:
        """Apply the changes noted by ``add``; the counts."""
        counts = self.counts
        plus, minus = self._plus, self._minus
        if not plus and not minus:
            return counts
        self._plus, self._minus = [], []
        hs = self._gather(plus + minus)
        signs = np.ones(len(hs), dtype=np.int64)
        cut = sum(last - first + 1 for first, last in plus)
        signs[cut:] = -1
        keep = hs != 0
        hs, signs = hs[keep], signs[keep]
        if not len(hs):
            return counts
        keys, where = np.unique(hs, return_inverse=True)
        net = np.bincount(where, weights=signs, minlength=len(keys)).astype(np.int64)
        moved = np.flatnonzero(net)
        get = counts.get
        for h, d in zip(keys[moved].tolist(), net[moved].tolist(), strict=True):
            n = get(h, 0) + d
            if n > 0:
                counts[h] = n
            elif n == 0:
                del counts[h]
            else:
                raise ShareEngineBug(f"key hash {h} released more records than it held")
        return counts

    def _gather(self, spans: list[tuple[int, int]]) -> np.ndarray:
        """The kept hashes of ``spans``, concatenated (one fancy index for many small spans)."""
        if len(spans) == 1:
            return self.hashes(*spans[0])
        firsts = np.fromiter((f for f, _ in spans), dtype=np.int64, count=len(spans))
        lasts = np.fromiter((la for _, la in spans), dtype=np.int64, count=len(spans))
        base = self.base
        if int(firsts.min()) < base or int(lasts.max()) >= self.known_end:
            raise ShareEngineBug(f"no key hashes kept for some of {spans} (kept {base}..{self.known_end})")
        sizes = lasts - firsts + 1
        starts = np.cumsum(sizes) - sizes
        index = np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(firsts - base - starts, sizes)
        out: np.ndarray = self._buf[index]
        return out

    def spans(self, run: InFlightBatch) -> list[tuple[int, int]]:
        """What ``run`` holds now (``held_spans``): taken before a change, given to ``settle``."""
        return held_spans(run)

    def settle(self, run: InFlightBatch, before: list[tuple[int, int]]) -> None:
        """``run`` changed (state, transition, due time or marks; not its offsets) since ``before``
        was taken: count what it holds now instead."""
        after = held_spans(run)
        if after == before:
            return
        for first, last in before:
            self.add(first, last, -1)
        for first, last in after:
            self.add(first, last, 1)


def build(partition: PartitionState, keys: KeyView) -> HeldKeys:
    """The held counts of ``partition`` derived from its record states and ``keys`` (after a
    restart, or once a group orders by key): one pass over the in-flight runs."""
    held = HeldKeys(partition.spso)
    held.remember(keys, partition.end, partition.spso)
    for run in partition.runs:
        for first, last in held_spans(run):
            held.add(first, last, 1)
    held.flush()
    return held


def key_view_start(partition: PartitionState) -> int:
    """The first offset whose key hash the next acquisition needs: the SPSO when the counts are
    still to be derived, else the first offset not kept yet or the next fetch offset."""
    held = partition.held_keys
    if held is None:
        return partition.spso
    return min(held.known_end, partition.next_fetch_offset())


def allowed_ranges(
    partition: PartitionState,
    held: HeldKeys,
    batches: Sequence[tuple[int, int]],
    keys: KeyView,
    stats: KeyOrderStats,
) -> list[tuple[int, int]]:
    """The offset ranges (sorted, disjoint) of ``batches`` an acquisition may take: AVAILABLE offsets
    and offsets not yet in flight, whose key has no held record. Only the offsets of the batches
    from the next fetch offset on are looked at (runs and hashes there), each hash once against
    the counts."""
    counts = held.flush()
    stats.blocked_keys = len(counts)
    lo = max(batches[0][0], partition.next_fetch_offset(), partition.spso)
    hi = min(batches[-1][1], keys.end - 1)
    if hi < lo or not counts:
        stats.waiting = 0
        return [(b[0], b[1]) for b in batches]
    n = hi - lo + 1
    # the class of every offset looked at: open (AVAILABLE and acquirable, or not in flight yet)
    # or not, one numpy call over the runs there (Python: attributes only)
    lengths: list[int] = []
    values: list[bool] = []
    prev = 0
    end = partition.end
    if lo < end:
        for run in partition.runs.overlapping(lo, min(hi, end - 1)):
            if run.state is _AVAILABLE and run.txn is None and not run.due and run.marks is None:
                continue
            a = (run.first if run.first > lo else lo) - lo
            e = (run.last if run.last < hi else hi) - lo + 1
            if a > prev:
                lengths.append(a - prev)
                values.append(True)
            lengths.append(e - a)
            values.append(False)
            prev = e
    lengths.append(n - prev)
    values.append(True)
    ok = np.repeat(np.array(values, dtype=bool), lengths)
    hashes = keys.hashes[lo - keys.base : hi - keys.base + 1]
    look = np.flatnonzero(ok & (hashes != 0))
    if len(look):
        blocked = np.fromiter(map(counts.__contains__, hashes[look].tolist()), dtype=bool, count=len(look))
        waiting = int(np.count_nonzero(blocked))
        if waiting:
            ok[look[blocked]] = False
        stats.waiting = waiting
    else:
        stats.waiting = 0
    return list(_open_ranges(ok, lo, batches))


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
