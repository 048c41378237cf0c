"""How long the share-group coordinator takes per heartbeat and per full reassignment.

Run: ``python bench/bench_group_coordinator.py``. Prints figures; not part of the test suite.
"""

from __future__ import annotations

import time
import uuid

from shareq.coordinators.group import HeartbeatRequest, ShareGroupCoordinator, TopicMetadata
from shareq.coordinators.group.assignor import assign


def bench_assign(members: int, partitions: int, rounds: int = 5) -> float:
    topic = uuid.UUID(int=1)
    subs = {f"member-{i:04d}": frozenset({topic}) for i in range(members)}
    parts = {topic: frozenset(range(partitions))}
    previous = assign(subs, parts)
    start = time.perf_counter()
    for _ in range(rounds):
        assign(subs, parts, previous)
    return (time.perf_counter() - start) / rounds


def bench_heartbeats(members: int, partitions: int, beats: int = 20_000) -> float:
    c = ShareGroupCoordinator()
    image = {"t": TopicMetadata(topic_id=uuid.UUID(int=1), partitions=partitions)}
    epochs: dict[str, int] = {}
    for i in range(members):
        res = c.heartbeat(
            HeartbeatRequest(group_id="g", member_id=f"m{i}", member_epoch=0, subscribed_topic_names=("t",)),
            now_ms=0,
            topics=image,
        )
        if res.initialize:
            c.initialize_complete("g", res.initialize.topics)
    for m in c.describe("g").members:
        epochs[m.member_id] = m.member_epoch
    ids = list(epochs)
    start = time.perf_counter()
    for n in range(beats):
        mid = ids[n % len(ids)]
        res = c.heartbeat(
            HeartbeatRequest(group_id="g", member_id=mid, member_epoch=epochs[mid]), now_ms=n, topics=image
        )
        epochs[mid] = res.member_epoch
    return (time.perf_counter() - start) / beats


def main() -> None:
    for members, partitions in [(3, 12), (50, 200), (200, 1000), (200, 50)]:
        took = bench_assign(members, partitions)
        print(f"assign {members:>4} members x {partitions:>4} partitions: {took * 1e3:8.2f} ms")
    for members, partitions in [(3, 12), (200, 1000)]:
        per = bench_heartbeats(members, partitions)
        print(f"steady heartbeat, {members:>4} members x {partitions:>4} partitions: {per * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
