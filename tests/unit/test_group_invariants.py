"""Coordinator invariants under random sequences of heartbeats, leaves, expiry and metadata changes."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.group import (
    GroupRequestError,
    HeartbeatRequest,
    ShareBrokerConfig,
    ShareGroupCoordinator,
    TopicMetadata,
)

TA, TB = uuid.UUID(int=10), uuid.UUID(int=11)

steps = st.lists(
    st.tuples(
        st.sampled_from(["join", "beat", "leave", "tick", "grow", "init"]),
        st.sampled_from(["m1", "m2", "m3", "m4", "m5"]),
        st.sampled_from([("a",), ("b",), ("a", "b")]),
        st.integers(0, 30_000),
    ),
    max_size=50,
)


@settings(max_examples=150, deadline=None)
@given(steps, st.sampled_from([0, 1_000]))
def test_invariants(script: list[tuple[str, str, tuple[str, ...], int]], interval: int) -> None:
    """With the target assigned at once (interval 0) or no sooner than 1 s after the last one."""
    c = ShareGroupCoordinator(ShareBrokerConfig(assignment_interval_ms=interval))
    image = {"a": TopicMetadata(topic_id=TA, partitions=2), "b": TopicMetadata(topic_id=TB, partitions=1)}
    pending = []
    now = 0
    last_epoch = 0
    for op, member, topics, dt in script:
        now += dt
        try:
            if op == "join":
                res = c.heartbeat(
                    HeartbeatRequest(
                        group_id="g", member_id=member, member_epoch=0, subscribed_topic_names=topics
                    ),
                    now_ms=now,
                    topics=image,
                )
                pending += [res.initialize] if res.initialize else []
            elif op in ("beat", "leave"):
                current = c.member_assignment("g", member)
                if current is None:
                    continue
                epoch = -1 if op == "leave" else _epoch(c, member)
                res = c.heartbeat(
                    HeartbeatRequest(group_id="g", member_id=member, member_epoch=epoch),
                    now_ms=now,
                    topics=image,
                )
                pending += [res.initialize] if res.initialize else []
            elif op == "tick":
                deadline = c.next_deadline()
                result = c.expire(now)
                if deadline is not None and deadline <= now:
                    assert result.removed
                after = c.next_deadline()
                assert after is None or after > now
            elif op == "grow":
                a = image["a"]
                image["a"] = TopicMetadata(topic_id=a.topic_id, partitions=a.partitions + 1)
                pending += c.metadata_changed(image).initialize
            elif op == "init" and pending:
                init = pending.pop(0)
                c.initialize_complete(init.group_id, init.topics)
        except GroupRequestError:
            pass
        if c.group_type("g") is None:
            continue
        desc = c.describe("g")
        assert desc.group_epoch >= last_epoch
        last_epoch = desc.group_epoch
        assert desc.assignment_epoch <= desc.group_epoch
        if interval == 0:
            assert desc.assignment_epoch == desc.group_epoch
        assert all(m.member_epoch <= desc.group_epoch for m in desc.members)
        assert desc.group_state == ("Stable" if desc.members else "Empty")
        # Members only hold initialized partitions of topics they subscribe to.
        initialized = {(tp.topic_name, p) for tp in c.initialized_partitions("g") for p in tp.partitions}
        for m in desc.members:
            for tp in m.assignment:
                assert tp.topic_name in m.subscribed_topic_names
                assert {(tp.topic_name, p) for p in tp.partitions} <= initialized
        # Once the interval has passed and every member has caught up, every subscribed initialized
        # partition is covered.
        now += interval
        for m in desc.members:
            res = c.heartbeat(
                HeartbeatRequest(group_id="g", member_id=m.member_id, member_epoch=m.member_epoch),
                now_ms=now,
                topics=image,
            )
            pending += [res.initialize] if res.initialize else []
        caught_up = c.describe("g")
        assert not caught_up.members or caught_up.assignment_epoch == caught_up.group_epoch
        held = {(tp.topic_name, p) for m in caught_up.members for tp in m.assignment for p in tp.partitions}
        subscribed = set().union(*(m.subscribed_topic_names for m in caught_up.members))
        assert {(t, p) for t, p in initialized if t in subscribed and p < image[t].partitions} <= held


def _epoch(c: ShareGroupCoordinator, member: str) -> int:
    return next(m.member_epoch for m in c.describe("g").members if m.member_id == member)
