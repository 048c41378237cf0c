"""Redelivery due times kept beside the state batches: the newest write on an offset wins.

A write's state batches say everything about their offsets, its delays included: an offset a write
covers keeps only the due time that write gives it (none, once it was acquired and acknowledged,
say). Offsets below the start offset are dropped. Pure; costs nothing while no due time is kept.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Sequence

from shareq.share.persister import NO_START_OFFSET, RedeliveryDelay, StateBatch


def _spans(batches: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged ``(first, last)`` spans."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(batches):
        if out and first <= out[-1][1] + 1:
            if last > out[-1][1]:
                out[-1] = (out[-1][0], last)
            continue
        out.append((first, last))
    return out


def _subtract(delays: Sequence[RedeliveryDelay], spans: list[tuple[int, int]]) -> list[RedeliveryDelay]:
    """``delays`` without the offsets of sorted, merged ``spans``."""
    out: list[RedeliveryDelay] = []
    i = 0
    n = len(spans)
    for d in delays:
        first, last = d.first_offset, d.last_offset
        while i < n and spans[i][1] < first:
            i += 1
        j = i
        while first <= last:
            if j >= n or spans[j][0] > last:
                out.append(RedeliveryDelay(first, last, d.due_ms))
                break
            lo, hi = spans[j]
            if lo > first:
                out.append(RedeliveryDelay(first, lo - 1, d.due_ms))
            first = hi + 1
            j += 1
    return out


_LAST = operator.itemgetter(1)
_FIRST = operator.itemgetter(0)


def prune_delays(delays: Sequence[RedeliveryDelay], start_offset: int) -> tuple[RedeliveryDelay, ...]:
    """``delays`` without offsets below ``start_offset`` (``NO_START_OFFSET``: all kept); the cost
    follows what is pruned (a search, then a slice)."""
    if start_offset == NO_START_OFFSET or not delays or delays[0].first_offset >= start_offset:
        return tuple(delays)
    i = bisect.bisect_left(delays, start_offset, key=_LAST)  # the first reaching the start offset
    out = tuple(delays[i:])
    if out and out[0].first_offset < start_offset:
        head = out[0]
        out = (RedeliveryDelay(start_offset, head.last_offset, head.due_ms), *out[1:])
    return out


def combine_delays(
    current: Sequence[RedeliveryDelay],
    written: Sequence[StateBatch],
    new: Sequence[RedeliveryDelay],
    start_offset: int,
) -> tuple[RedeliveryDelay, ...]:
    """``current`` (ascending, disjoint) after a write of ``written`` state batches carrying ``new``
    due times, pruned below ``start_offset``. Only the stretch of ``current`` the write spans is
    walked: with thousands of records waiting out a delay, a write costs what it touches."""
    if not current and not new:
        return ()
    if not written and not new:
        return prune_delays(current, start_offset)
    spans = _spans([(b[0], b[1]) for b in written] + [(d[0], d[1]) for d in new])
    lo, hi = spans[0][0], spans[-1][1]
    i = bisect.bisect_left(current, lo, key=_LAST)  # the first that may overlap the write
    j = bisect.bisect_right(current, hi, key=_FIRST)  # past the last that may
    middle = _subtract(current[i:j], spans)
    if new:
        middle = sorted([*middle, *new])
    if i == 0 and j == len(current):
        return prune_delays(middle, start_offset)
    return prune_delays([*current[:i], *middle, *current[j:]], start_offset)
