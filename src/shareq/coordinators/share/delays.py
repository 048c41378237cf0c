"""Redelivery due times kept beside the state batches: the newest write on an offset wins.

A write's state batches say everything about their offsets, its delays included: an offset a write
covers keeps only the due time that write gives it (none, once it was acquired and acknowledged,
say). Offsets below the start offset are dropped. Pure; costs nothing while no due time is kept.
"""

from __future__ import annotations

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


def prune_delays(delays: Sequence[RedeliveryDelay], start_offset: int) -> tuple[RedeliveryDelay, ...]:
    """``delays`` without offsets below ``start_offset`` (``NO_START_OFFSET``: all kept)."""
    if start_offset == NO_START_OFFSET or not delays or delays[0].first_offset >= start_offset:
        return tuple(delays)
    out = []
    for d in delays:
        if d.last_offset < start_offset:
            continue
        out.append(
            d if d.first_offset >= start_offset else RedeliveryDelay(start_offset, d.last_offset, d.due_ms)
        )
    return tuple(out)


def combine_delays(
    current: Sequence[RedeliveryDelay],
    written: Sequence[StateBatch],
    new: Sequence[RedeliveryDelay],
    start_offset: int,
) -> tuple[RedeliveryDelay, ...]:
    """``current`` after a write of ``written`` state batches carrying ``new`` due times, pruned
    below ``start_offset``."""
    if not current and not new:
        return ()
    kept: list[RedeliveryDelay] = list(current)
    if kept and (written or new):
        spans = _spans([(b[0], b[1]) for b in written] + [(d[0], d[1]) for d in new])
        kept = _subtract(kept, spans)
    if new:
        kept = sorted([*kept, *new])
    return prune_delays(kept, start_offset)
