"""The simple share assignor (KIP-932's ``SimpleShareAssignor``), a pure function.

Share groups need no exclusive ownership: a partition may be handed to several members, and
records are still delivered to one consumer at a time by the share-partition's acquisition locks.
The assignor therefore has two aims:

1. every subscribed partition goes to at least one member, and while there are at least as many
   partitions as members each goes to exactly one, with member loads differing by at most one
   (for members with identical subscriptions);
2. when there are more members than partitions, no member is left idle: members without a
   partition share one, the least shared first.

It is deterministic (sorted inputs, ties broken by member id) and sticky: a partition stays with
its previous owner while that owner is within its fair quota, so an unchanged group keeps its
assignment and a join or leave moves few partitions.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping

TopicPartition = tuple[uuid.UUID, int]
MemberAssignment = dict[uuid.UUID, frozenset[int]]

ASSIGNOR_NAME = "simple"


def assign(
    members: Mapping[str, frozenset[uuid.UUID]],
    partitions: Mapping[uuid.UUID, frozenset[int]],
    previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]] | None = None,
) -> dict[str, MemberAssignment]:
    """Compute the target assignment.

    ``members`` maps member id to subscribed topic ids; ``partitions`` maps topic id to the
    assignable partitions (only initialized share-partitions); ``previous`` is the last target
    assignment, used for stickiness. Every member appears in the result (possibly with ``{}``).
    """
    member_ids = sorted(members)
    order = sorted(
        ((t, p) for t, parts in partitions.items() for p in parts), key=lambda tp: (str(tp[0]), tp[1])
    )
    owners: dict[TopicPartition, list[str]] = {}
    for mid, topics in (previous or {}).items():
        if mid not in members:
            continue
        for t, parts in topics.items():
            if t in members[mid]:
                for p in parts:
                    owners.setdefault((t, p), []).append(mid)
    for lst in owners.values():
        lst.sort()

    eligible_count = sum(1 for m in member_ids if members[m])
    load = dict.fromkeys(member_ids, 0)
    result: dict[str, dict[TopicPartition, None]] = {m: {} for m in member_ids}
    holders: dict[TopicPartition, int] = {}
    unassigned: list[TopicPartition] = []

    quota, extras = divmod(len(order), eligible_count) if eligible_count else (0, 0)

    def give(mid: str, tp: TopicPartition) -> None:
        result[mid][tp] = None
        load[mid] += 1
        holders[tp] = holders.get(tp, 0) + 1

    # 1. Keep previous owners up to the floor quota.
    for tp in order:
        keeper = next((m for m in owners.get(tp, ()) if load[m] < quota), None)
        if keeper is None:
            unassigned.append(tp)
        else:
            give(keeper, tp)
    # 2. Then let previous owners keep one more while extra slots remain.
    rest: list[TopicPartition] = []
    for tp in unassigned:
        keeper = next((m for m in owners.get(tp, ()) if load[m] == quota), None) if extras else None
        if keeper is None:
            rest.append(tp)
        else:
            give(keeper, tp)
            extras -= 1
    # 3. Hand the remaining partitions to the least-loaded subscriber, topic by topic.
    by_topic: dict[uuid.UUID, list[int]] = {}
    for t, p in rest:
        by_topic.setdefault(t, []).append(p)
    for t in sorted(by_topic, key=str):
        heap = [(load[m], m) for m in member_ids if t in members[m]]
        if not heap:
            continue
        heapq.heapify(heap)
        for p in by_topic[t]:
            _, m = heapq.heappop(heap)
            give(m, (t, p))
            heapq.heappush(heap, (load[m], m))
    # 4. Members still idle share a subscribed partition: the least shared, previously held first.
    # Members with the same subscription share one heap of their candidates, so a group with far
    # more members than partitions costs a heap operation per idle member, not a scan.
    shares: dict[frozenset[uuid.UUID], _Sharing | None] = {}
    for m in member_ids:
        if load[m]:
            continue
        subscription = members[m]
        if subscription not in shares:
            candidates = [tp for tp in order if tp[0] in subscription]
            shares[subscription] = _Sharing(candidates, holders) if candidates else None
        sharing = shares[subscription]
        if sharing is not None:
            give(m, sharing.pick(owners_of(previous, m), holders))

    out: dict[str, MemberAssignment] = {}
    for m, tps in result.items():
        grouped: dict[uuid.UUID, set[int]] = {}
        for t, p in tps:
            grouped.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in grouped.items()}
    return out


def owners_of(
    previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]] | None, member_id: str
) -> list[TopicPartition]:
    """The partitions ``member_id`` held in ``previous``."""
    if not previous or member_id not in previous:
        return []
    return [(t, p) for t, parts in previous[member_id].items() for p in parts]


class _Sharing:
    """The candidates of one subscription, least shared first: ``pick`` returns what step 4 of
    ``assign`` wants, the candidate with the fewest holders, one the member held before if any
    such ties, else the first in order. Entries are refreshed lazily: holders only grow, so an
    entry whose count is stale sorts too early and is corrected when it reaches the top."""

    __slots__ = ("candidates", "heap", "index")

    def __init__(self, candidates: list[TopicPartition], holders: Mapping[TopicPartition, int]) -> None:
        self.candidates = candidates
        self.index = {tp: i for i, tp in enumerate(candidates)}
        self.heap = [(holders.get(tp, 0), i) for i, tp in enumerate(candidates)]
        heapq.heapify(self.heap)

    def pick(self, had: list[TopicPartition], holders: Mapping[TopicPartition, int]) -> TopicPartition:
        heap = self.heap
        while True:
            fewest, first = heap[0]
            current = holders.get(self.candidates[first], 0)
            if current == fewest:
                break
            heapq.heapreplace(heap, (current, first))
        held = [self.index[tp] for tp in had if tp in self.index and holders.get(tp, 0) == fewest]
        return self.candidates[min(held) if held else first]
