"""The dead-letter planner and validation (sans-I/O): Kafka's rules in order, backoff, never giving up."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from shareq.share.dead_letter import (
    CAUSE_DELIVERY_COUNT,
    CAUSE_REJECTED,
    DeadLetterPlanner,
    DlqRefusal,
    DlqTarget,
    DlqTopicView,
    cause_of,
    check_target,
    dlq_partition,
    dlq_record_headers,
    retry_delay_ms,
)


def _check(
    topic: str,
    *,
    exists: bool = True,
    opted_in: bool = True,
    prefix: str = "dlq.",
    auto: bool = False,
    source: str = "src",
) -> DlqTarget | DlqRefusal:
    return check_target(
        group="g",
        topic=topic,
        source_topic=source,
        prefix=prefix,
        auto_create=auto,
        view=DlqTopicView(exists=exists, opted_in=opted_in),
    )


@pytest.mark.parametrize(
    ("kwargs", "rule", "message"),
    [
        ({"topic": ""}, "empty", "Configured DLQ topic name in share group: g is empty."),
        ({"topic": "__x"}, "internal",
         "Configured DLQ topic name in share group: g cannot start with __, topic: __x."),
        ({"topic": "dlq.x", "opted_in": False}, "not-enabled",
         "DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.x"),
        ({"topic": "x"}, "prefix",
         "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, topic: x, "
         "prefix: dlq."),
        ({"topic": "dlq.x", "exists": False}, "missing",
         "DLQ topic does not exist and auto create is disabled on cluster for share group: g, topic: dlq.x."),
        ({"topic": "dlq.x", "source": "dlq.x"}, "source", None),
    ],
)  # fmt: skip
def test_each_rule_refuses_with_kafkas_words(kwargs: dict, rule: str, message: str | None) -> None:
    verdict = _check(**kwargs)
    assert isinstance(verdict, DlqRefusal) and verdict.rule == rule
    if message is not None:
        assert verdict.message == message


def test_rules_apply_in_kafkas_order() -> None:
    # not opted in beats the prefix; the prefix beats a missing topic
    assert _check("x", opted_in=False).rule == "not-enabled"  # type: ignore[union-attr]
    assert _check("x", exists=False).rule == "prefix"  # type: ignore[union-attr]


def test_accepted_targets() -> None:
    assert _check("dlq.x") == DlqTarget(topic="dlq.x", create=False)
    assert _check("dlq.x", exists=False, auto=True) == DlqTarget(topic="dlq.x", create=True)
    assert _check("anything", prefix="") == DlqTarget(topic="anything", create=False)  # empty prefix: no rule


def test_headers_and_causes() -> None:
    assert cause_of(1, 5) == CAUSE_REJECTED and cause_of(5, 5) == CAUSE_DELIVERY_COUNT
    assert dict(
        dlq_record_headers(topic="t", partition=2, offset=7, group="g", delivery_count=3, cause="c")
    ) == {
        "__dlq.errors.topic": b"t",
        "__dlq.errors.partition": b"2",
        "__dlq.errors.offset": b"7",
        "__dlq.errors.group": b"g",
        "__dlq.errors.delivery.count": b"3",
        "__dlq.errors.message": b"c",
    }
    assert [dlq_partition(p, 2) for p in range(5)] == [0, 1, 0, 1, 0]


def test_backoff_doubles_to_thirty_seconds_with_jitter() -> None:
    assert [retry_delay_ms(a, 0.0) for a in (1, 2, 3, 4, 5, 6, 7)] == [
        1000,
        2000,
        4000,
        8000,
        16000,
        30000,
        30000,
    ]
    assert retry_delay_ms(1, 1.0) == 1200 and retry_delay_ms(1, -1.0) == 800


def test_planner_due_failed_written() -> None:
    plan: DeadLetterPlanner[str] = DeadLetterPlanner()
    plan.mark("a", 0)
    plan.mark("b", 5)
    assert plan.next_deadline() == 0
    assert plan.due(0) == ["a"]
    assert plan.failed("a", 10) == 1010 and plan.attempts("a") == 1
    plan.mark("a", 20)  # backing off: a new mark does not cut the backoff short
    assert plan.due(1009) == ["b"]
    assert plan.next_deadline() == 1010
    assert plan.due(1010) == ["a"]
    assert plan.failed("a", 1010) == 3010  # doubled
    assert plan.due(3010) == ["a"]
    plan.written("a")
    assert plan.attempts("a") == 0 and plan.next_deadline() is None and len(plan) == 0


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 100), st.booleans()), max_size=60))
def test_planner_never_loses_a_key(ops: list[tuple[str, int, bool]]) -> None:
    """Whatever marks and failures happen, every key marked or failed is eventually due again."""
    plan: DeadLetterPlanner[str] = DeadLetterPlanner()
    now = 0
    outstanding: set[str] = set()
    for key, step, fail in ops:
        now += step
        plan.mark(key, now)
        outstanding.add(key)
        for due in plan.due(now):
            if fail:
                plan.failed(due, now)
            else:
                plan.written(due)
                outstanding.discard(due)
    while outstanding:
        deadline = plan.next_deadline()
        assert deadline is not None, outstanding
        for due in plan.due(deadline):
            plan.written(due)
            outstanding.discard(due)


@given(
    offsets=st.lists(st.integers(0, 120_000), min_size=1, max_size=60, unique=True),
    counts=st.lists(st.integers(1, 4), min_size=1, max_size=60),
    topic=st.text(max_size=12),
    group=st.text(min_size=1, max_size=12),
    partition=st.integers(0, 2**31 - 1),
)
@example(
    offsets=[8, 9, 10, 99, 100, 101, 99_999, 100_000],
    counts=[1, 1, 2],
    topic="a%db",
    group="g%%",
    partition=3,
)
def test_a_rounds_dead_letters_carry_kafkas_headers_for_each_offset(
    offsets: list[int], counts: list[int], topic: str, group: str, partition: int
) -> None:
    """The writer's ready-made letters (headers encoded once per delivery count, one format per
    decimal width of the offsets) equal each record built from its own headers: offsets that
    cross a power of ten, counts that change between spans, '%' in names."""
    import uuid

    from shareq.log.records import encode_headers, encode_record_tail
    from shareq.server.share.dead_letters import dead_letter_tails
    from shareq.share.persister import SharePartitionKey

    offsets = sorted({*offsets, *(o + 1 for o in offsets if o in (9, 99, 999, 9_999, 99_999))})
    spans: list[tuple[int, int, int]] = []
    for i, offset in enumerate(offsets):  # adjacent offsets of one count form one span
        count = counts[i % len(counts)]
        if spans and spans[-1][1] + 1 == offset and spans[-1][2] == count:
            spans[-1] = (spans[-1][0], offset, count)
        else:
            spans.append((offset, offset, count))
    key = SharePartitionKey(group_id=group, topic_id=uuid.UUID(int=7), partition=partition)
    expected = [
        encode_record_tail(
            None,
            None,
            encode_headers(
                dlq_record_headers(
                    topic=topic,
                    partition=partition,
                    offset=offset,
                    group=group,
                    delivery_count=count,
                    cause=cause_of(count, 3),
                )
            ),
            6,
        )
        for first, last, count in spans
        for offset in range(first, last + 1)
    ]
    assert dead_letter_tails(key, topic, spans, {}, 3) == expected
