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
