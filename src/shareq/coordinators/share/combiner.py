"""Merge state batches: the newest word on each offset wins, in as few runs as possible.

``combine_state_batches`` is what keeps the run-length state minimal: without it, repeated partial
acknowledgements would fragment the batch list without bound. It is pure and cheap when its inputs
are already normalized (sorted, disjoint) -- the case on every write -- and correct on any input.
Its result is a ``Combined`` tuple, which a later call trusts as its ``current``: a write then
costs what it adds and what it prunes, not the size of the state kept.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from shareq.share.persister import NO_START_OFFSET, StateBatch

_FIRST = operator.itemgetter(0)
_LAST = operator.itemgetter(1)


def _is_normal(batches: Sequence[StateBatch]) -> bool:
    prev_last = None
    for b in batches:
        if b.first_offset > b.last_offset:
            return False
        if prev_last is not None and b.first_offset <= prev_last:
            return False
        prev_last = b.last_offset
    return True


def _cut(b: StateBatch, first: int, last: int) -> StateBatch:
    if first == b.first_offset and last == b.last_offset:
        return b
    return StateBatch(
        first_offset=first, last_offset=last, delivery_state=b.delivery_state, delivery_count=b.delivery_count
    )


def _overlay(base: list[StateBatch], top: Sequence[StateBatch]) -> list[StateBatch]:
    """Lay sorted, disjoint ``top`` over sorted, disjoint ``base`` (one merge pass)."""
    if not base:
        return list(top)
    out: list[StateBatch] = []
    i = 0
    n = len(base)
    cur: StateBatch | None = base[0]
    for t in top:
        while cur is not None and cur.last_offset < t.first_offset:
            out.append(cur)
            i += 1
            cur = base[i] if i < n else None
        if cur is not None and cur.first_offset < t.first_offset:
            out.append(_cut(cur, cur.first_offset, t.first_offset - 1))
            cur = _cut(cur, t.first_offset, cur.last_offset)
        out.append(t)
        while cur is not None and cur.last_offset <= t.last_offset:
            i += 1
            cur = base[i] if i < n else None
        if cur is not None and cur.first_offset <= t.last_offset:
            cur = _cut(cur, t.last_offset + 1, cur.last_offset)
    if cur is not None:
        out.append(cur)
        out.extend(base[i + 1 :])
    return out


def _normalize(batches: Sequence[StateBatch]) -> list[StateBatch]:
    """Sorted and disjoint, later batches overriding earlier ones where they overlap."""
    valid = [b for b in batches if b.first_offset <= b.last_offset]
    if _is_normal(valid):
        return valid
    out: list[StateBatch] = []
    for b in valid:
        # Splice one batch in: only the neighbourhood it overlaps is rebuilt.
        lo = bisect_left([x.last_offset for x in out], b.first_offset)
        hi = lo
        while hi < len(out) and out[hi].first_offset <= b.last_offset:
            hi += 1
        out[lo:hi] = _overlay(out[lo:hi], (b,))
    return out


def _prune_and_coalesce(batches: list[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    out: list[StateBatch] = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = _cut(b, start_offset, b.last_offset)
        if out:
            p = out[-1]
            if (
                p.last_offset + 1 == b.first_offset
                and p.delivery_state == b.delivery_state
                and p.delivery_count == b.delivery_count
            ):
                out[-1] = _cut(p, p.first_offset, b.last_offset)
                continue
        out.append(b)
    return tuple(out)


class Combined(tuple[StateBatch, ...]):
    """What ``combine_state_batches`` returns: sorted, disjoint, equal neighbours joined, nothing
    below its start offset. Passed back in as ``current``, it is trusted, not walked again."""

    __slots__ = ()


def _append_past(current: Combined, new: Sequence[StateBatch], start: int) -> Combined:
    """``new`` (normal, wholly past ``current``) after ``current``, pruned to ``start``.

    The cost follows ``new`` and the runs pruned from ``current``'s front, not ``current``'s size:
    with a dead-letter queue the start offset waits at an ARCHIVING record while hundreds of
    acknowledged runs above it are recorded, and every write would otherwise walk them all."""
    head = prune_joined(current, start)
    if not new:
        return Combined(head)
    # ``current``'s last run goes through with ``new``, so it joins ``new``'s first when equal
    return Combined((*head[:-1], *_prune_and_coalesce([*head[-1:], *new], start)))


def prune_joined(batches: Sequence[StateBatch], start: int) -> tuple[StateBatch, ...]:
    """Joined ``batches`` (see ``combine_state_batches``) without their offsets below ``start``:
    what ``combine_state_batches((), batches, start)`` gives them, at the cost of the front pruned,
    not of every batch."""
    i = 0
    n = len(batches)
    while i < n and batches[i].last_offset < start:
        i += 1
    if i == n:
        return ()
    if batches[i].first_offset >= start:
        return tuple(batches[i:]) if i else tuple(batches)
    return (_cut(batches[i], start, batches[i].last_offset), *batches[i + 1 :])


def _append_joined(current: Combined, new: Sequence[StateBatch], start: int) -> Combined:
    """``_append_past`` for joined ``new``: only the junction of the two can join."""
    head = prune_joined(current, start)
    tail = prune_joined(new, start)
    if head and tail:
        p, b = head[-1], tail[0]
        if (
            p.last_offset + 1 == b.first_offset
            and p.delivery_state == b.delivery_state
            and p.delivery_count == b.delivery_count
        ):
            return Combined((*head[:-1], _cut(p, p.first_offset, b.last_offset), *tail[1:]))
    return Combined((*head, *tail))


def combine_state_batches(
    current: Sequence[StateBatch], new: Sequence[StateBatch], start_offset: int, *, joined: bool = False
) -> Combined:
    """``new`` laid over ``current``, offsets below ``start_offset`` dropped, equal neighbours joined.

    Within each argument a later batch overrides an earlier one; ``new`` overrides ``current``.
    ``start_offset`` of ``NO_START_OFFSET`` (-1) prunes nothing. ``joined``: the caller found
    ``new`` joined (sorted, disjoint, no touching neighbours of equal state and count, as the
    engine writes its deltas); appended past a ``Combined`` current, it is then not walked.
    """
    start = start_offset if start_offset != NO_START_OFFSET else -1
    if (
        joined
        and new
        and type(current) is Combined
        and (not current or current[-1].last_offset < new[0].first_offset)
    ):
        return _append_joined(current, new, start)
    # The usual acknowledgement: runs past everything recorded (hundreds of them when types
    # alternate), appended as they are.
    if type(current) is Combined and (
        not new or ((not current or current[-1].last_offset < new[0].first_offset) and _is_normal(new))
    ):
        return _append_past(current, new, start)
    if (
        new
        and current
        and current[-1].last_offset < new[0].first_offset
        and _is_normal(new)
        and _is_normal(current)
    ):
        return Combined(_prune_and_coalesce([*current, *new], start))
    if type(current) is Combined and new and _is_normal(new):
        return _splice(current, new, start)
    return Combined(_prune_and_coalesce(_overlay(_normalize(current), _normalize(new)), start))


def _splice(current: Combined, new: Sequence[StateBatch], start: int) -> Combined:
    """Normal ``new`` laid over the stretch of ``current`` it spans (with one neighbour each side,
    where a join may appear), the rest of ``current`` kept as it is: a write in the middle of a
    large state (records redelivered after a backoff, below thousands of acknowledged runs) costs
    what it touches and a slice, not a walk of every batch."""
    lo, hi = new[0].first_offset, new[-1].last_offset
    i = max(bisect_left(current, lo, key=_LAST) - 1, 0)
    j = min(bisect_right(current, hi, key=_FIRST) + 1, len(current))
    middle = _prune_and_coalesce(_overlay(list(current[i:j]), new), -1)
    return Combined(prune_joined([*current[:i], *middle, *current[j:]], start))
