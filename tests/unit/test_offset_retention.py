"""Offset retention (``offsets.retention.minutes``): which committed offsets expire, and when."""

from __future__ import annotations

from shareq.coordinators.classic.offsets import ConsumerOffsets, OffsetCommit

RETENTION = 1_000


def commit(store: ConsumerOffsets, group: str, topic: str, partition: int, at: int) -> None:
    records, _ = store.commit(group, [OffsetCommit(topic=topic, partition=partition, offset=5)], now_ms=at)
    assert records


def test_an_empty_group_keeps_its_offsets_for_a_retention_after_it_was_last_live() -> None:
    store = ConsumerOffsets()
    commit(store, "g", "t", 0, at=0)
    live: dict[str, frozenset[str] | None] = {"g": frozenset({"t"})}
    assert store.expire(5_000, RETENTION, live.get) == []  # consumed: never expires
    live["g"] = None  # the members left at about 5,000
    assert store.expire(5_500, RETENTION, live.get) == []
    tombstones = store.expire(6_000, RETENTION, live.get)
    assert [(r.key, r.value) for r in tombstones] and all(r.value is None for r in tombstones)
    assert store.fetch("g") == {}


def test_a_live_group_loses_only_the_topics_it_no_longer_consumes() -> None:
    store = ConsumerOffsets()
    commit(store, "g", "old", 0, at=0)
    commit(store, "g", "new", 0, at=0)
    live = {"g": frozenset({"new"})}
    assert store.expire(999, RETENTION, live.get) == []
    assert len(store.expire(1_000, RETENTION, live.get)) == 1
    assert set(store.fetch("g")) == {("new", 0)}


def test_a_group_first_seen_empty_counts_from_then_and_pending_offsets_stay() -> None:
    store = ConsumerOffsets()
    commit(store, "g", "t", 0, at=0)
    store.stage(7, "g", "t", 1, store.fetch("g")[("t", 0)])
    empty: dict[str, frozenset[str] | None] = {}
    assert store.expire(10_000, RETENTION, empty.get) == []  # first seen now (e.g. after a restart)
    assert len(store.expire(11_000, RETENTION, empty.get)) == 1
    store.end_transaction(7, commit=True)
    assert set(store.fetch("g")) == {("t", 1)}
