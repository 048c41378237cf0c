"""KIP-848's server-side ``uniform`` assignor as a pure function.

Every subscribed partition goes to exactly one member subscribed to its topic. With identical
subscriptions the loads differ by at most one; previous owners keep what they had within their
quota, so an unchanged group keeps its assignment and a join moves as few partitions as it can.
With different subscriptions each partition goes to the least-loaded eligible member.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

Assignment = dict[uuid.UUID, frozenset[int]]

UNIFORM = "uniform"


def uniform_assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """member id -> assignment, for members subscribed to topic ids with these partition counts."""
    members = sorted(subscriptions)
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    if not members:
        return {}
    all_parts = sorted(
        (
            (t, p)
            for t in partitions
            if any(t in subscriptions[m] for m in members)
            for p in range(partitions[t])
        ),
        key=lambda tp: (str(tp[0]), tp[1]),
    )
    homogeneous = len({subscriptions[m] for m in members}) == 1
    floor, extra = divmod(len(all_parts), len(members))
    taken: set[tuple[uuid.UUID, int]] = set()

    def eligible(member: str, tp: tuple[uuid.UUID, int]) -> bool:
        return tp[0] in subscriptions[member] and tp[0] in partitions and tp[1] < partitions[tp[0]]

    # 1. stickiness: previous owners keep partitions up to the floor quota ...
    keep_more: list[tuple[int, str]] = []
    for m in members:
        mine = sorted(
            ((t, p) for t, ps in previous.get(m, {}).items() for p in ps if eligible(m, (t, p))),
            key=lambda tp: (str(tp[0]), tp[1]),
        )
        limit = floor if homogeneous else floor + (1 if extra else 0)
        for tp in mine[:limit]:
            if tp not in taken:
                owned[m].add(tp)
                taken.add(tp)
        if homogeneous and len(mine) > limit and mine[limit] not in taken:
            keep_more.append((len(mine), m))
    # ... and as many as the remainder allows one more (those that had most first)
    if homogeneous:
        for _, m in sorted(keep_more, key=lambda x: (-x[0], x[1]))[:extra]:
            mine = sorted(
                ((t, p) for t, ps in previous.get(m, {}).items() for p in ps if eligible(m, (t, p))),
                key=lambda tp: (str(tp[0]), tp[1]),
            )
            for tp in mine[floor:]:
                if tp not in taken:
                    owned[m].add(tp)
                    taken.add(tp)
                    break
    # 2. the rest to the least-loaded eligible member
    for tp in all_parts:
        if tp in taken:
            continue
        candidates = [m for m in members if eligible(m, tp)]
        if not candidates:
            continue
        best = min(candidates, key=lambda m: (len(owned[m]), m))
        owned[best].add(tp)
        taken.add(tp)
    result: dict[str, Assignment] = {}
    for m in members:
        topics: dict[uuid.UUID, set[int]] = {}
        for t, p in owned[m]:
            topics.setdefault(t, set()).add(p)
        result[m] = {t: frozenset(ps) for t, ps in topics.items()}
    return result


RANGE = "range"


def range_assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """KIP-848's server-side ``range`` assignor: each topic's partitions in contiguous ranges.

    Per topic, the members subscribed to it, in member-id order, take ``floor`` partitions each and
    the first ``extra`` of them one more. Members with the same subscriptions therefore get the same
    partition numbers of topics with as many partitions (co-partitioning, what joins of two topics
    keyed alike need). Previous owners keep what they had within their quota, so an unchanged group
    keeps its assignment; the rest fill the remaining room in partition order.
    """
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subscriptions}
    for topic in sorted(partitions, key=str):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        count = partitions[topic]
        floor, extra = divmod(count, len(members))
        quota = {m: floor + (1 if i < extra else 0) for i, m in enumerate(members)}
        taken: set[int] = set()
        for m in members:
            kept = sorted(p for p in previous.get(m, {}).get(topic, ()) if p < count)[: quota[m]]
            owned[m][topic] = set(kept)
            taken.update(kept)
        free = iter(p for p in range(count) if p not in taken)
        for m in members:
            mine = owned[m][topic]
            while len(mine) < quota[m]:
                mine.add(next(free))
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in owned.items()}


ASSIGNORS = {UNIFORM: uniform_assign, RANGE: range_assign}
"""Server-side assignors by the name clients give in ``group.remote.assignor``."""
