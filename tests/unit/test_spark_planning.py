"""The share source's pure parts: micro-batch offsets, task planning, acknowledgement decisions."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ci_support import require

require("pyspark")

from shareq.spark.acks import AckType, decode_decision, encode_decisions, encode_sink_announcement
from shareq.spark.offsets import (
    EARLIEST,
    LATEST,
    ShareBatchOffset,
    batch_ranges,
    coalesce,
    merge_runs,
    parse_offset_spec,
    plan_tasks,
)
from shareq.spark.options import BatchSourceOptions, OptionError, ShareSourceOptions, SinkOptions
from shareq.spark.stream import ShareDriver


def test_offset_json_round_trips_through_spark_json() -> None:
    offset = ShareBatchOffset(
        seq=4, session="abc", acquired={("orders", 2): ((5, 9, 1), (11, 11, 3)), ("orders", 0): ((0, 0, 1),)}
    )
    # Spark stores the dict as JSON text and hands it back parsed.
    back = ShareBatchOffset.from_json(json.loads(json.dumps(offset.to_json())))
    assert back == offset
    assert back.record_count == 7
    assert list(offset.to_json()["acquired"]["orders"]) == ["0", "2"]


def test_merge_runs_joins_neighbours_with_equal_counts_as_coalescing_offsets_does() -> None:
    runs = [(10, 19, 1), (0, 9, 1), (20, 29, 2), (31, 40, 2)]
    assert merge_runs(runs) == ((0, 19, 1), (20, 29, 2), (31, 40, 2))
    offsets = [(o, c) for first, last, c in runs for o in range(first, last + 1)]
    assert merge_runs(runs) == coalesce(offsets)


def test_coalesce_joins_consecutive_offsets_with_equal_counts() -> None:
    assert coalesce([(3, 1), (1, 1), (2, 1), (4, 2), (5, 2), (7, 2)]) == ((1, 3, 1), (4, 5, 2), (7, 7, 2))


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3)),
        st.sets(st.integers(0, 200), min_size=1, max_size=60),
        max_size=5,
    ),
    st.one_of(st.none(), st.integers(1, 12)),
    st.integers(1, 50),
)
def test_plan_tasks_covers_every_offset_once_within_limits(
    acquired: dict[tuple[str, int], set[int]], min_tasks: int | None, max_per_task: int
) -> None:
    runs = {tp: coalesce((o, 1) for o in offs) for tp, offs in acquired.items()}
    tasks = plan_tasks(runs, min_tasks=min_tasks, max_records_per_task=max_per_task)
    seen: dict[tuple[str, int], list[int]] = {}
    for task in tasks:
        assert 0 < task.record_count <= max_per_task
        seen.setdefault((task.topic, task.partition), []).extend(
            o for first, last, _ in task.runs for o in range(first, last + 1)
        )
    assert {tp: sorted(v) for tp, v in seen.items()} == {tp: sorted(v) for tp, v in acquired.items()}
    total = sum(len(v) for v in acquired.values())
    if min_tasks is not None:
        assert len(tasks) >= min(min_tasks, total)


def test_plan_tasks_splits_one_partition_into_several_tasks() -> None:
    tasks = plan_tasks({("t", 0): ((0, 99, 1),)}, min_tasks=4, max_records_per_task=10_000)
    assert [(t.first_offset, t.last_offset) for t in tasks] == [(0, 24), (25, 49), (50, 74), (75, 99)]


def test_plan_tasks_without_a_cap_reads_a_partition_in_one_task_like_spark() -> None:
    runs = {("t", 0): ((0, 999_999, 0),), ("t", 1): ((0, 499_999, 0),)}
    assert [t.record_count for t in plan_tasks(runs, min_tasks=None, max_records_per_task=None)] == [
        1_000_000,
        500_000,
    ]
    # minPartitions splits in proportion to each partition's records, as Spark does.
    tasks = plan_tasks(runs, min_tasks=6, max_records_per_task=None)
    assert [(t.partition, t.record_count) for t in tasks] == [(0, 250_000)] * 4 + [(1, 250_000)] * 2


def test_plan_tasks_puts_the_largest_tasks_first() -> None:
    # A share micro-batch of 200,000: a partition's tail and most of the next partition.
    runs = {("t", 0): ((200_000, 202_967, 1),), ("t", 1): ((0, 197_031, 1),)}
    tasks = plan_tasks(runs, min_tasks=4, max_records_per_task=None)
    # Spark starts tasks in index order: on two cores, the small one last keeps both busy.
    assert [(t.partition, t.record_count) for t in tasks] == [(1, 49_258)] * 4 + [(0, 2_968)]
    assert [t.first_offset for t in tasks[:4]] == [0, 49_258, 98_516, 147_774]


def test_batch_ranges_and_offset_specs() -> None:
    tps = [("t", 0), ("t", 1)]
    assert parse_offset_spec("earliest", tps, name="s") == {("t", 0): EARLIEST, ("t", 1): EARLIEST}
    assert parse_offset_spec('{"t": {"0": -1, "1": 7}}', tps, name="s") == {("t", 0): LATEST, ("t", 1): 7}
    for partial in ('{"t": {"1": 7}}', '{"u": {"0": 1}}', '{"t": {"0": 1, "1": 2, "2": 3}}'):
        with pytest.raises(ValueError, match="-1 for latest, -2 for earliest"):
            parse_offset_spec(partial, tps, name="s")
    for malformed in ("[1]", '{"t": 3}', '{"t": {"x": 1}}', "nonsense"):
        with pytest.raises(ValueError, match="must be 'earliest', 'latest' or JSON"):
            parse_offset_spec(malformed, tps, name="s")
    assert batch_ranges({("t", 0): 3, ("t", 1): 5}, {("t", 0): 10, ("t", 1): 5}) == {("t", 0): ((3, 9, 0),)}


def test_a_sink_announcement_round_trips_apart_from_decisions() -> None:
    announcement = encode_sink_announcement("g", "s1", topic="acks")
    assert announcement.key == b"g" and announcement.topic == "acks"
    assert decode_decision(announcement.value or b"") == "s1"


def test_decisions_round_trip_and_split_a_batch() -> None:
    from shareq.spark.acks import DecisionLog

    [message] = encode_decisions("g", AckType.REJECT, [("t", 0, 7, 1), ("t", 0, 5, 1)], topic="acks")
    assert message.key == b"g" and message.topic == "acks"
    decoded = decode_decision(message.value or b"")
    assert isinstance(decoded, tuple)
    kind, keys = decoded
    assert kind is AckType.REJECT and keys == [("t", 0, 5, 1), ("t", 0, 7, 1)]

    log = DecisionLog.__new__(DecisionLog)  # the pure half: no topic behind it
    log._decisions = {key: (kind, 0.0) for key in keys}
    log._decisions[("t", 0, 8, 2)] = (AckType.RELEASE, 0.0)  # another delivery: not this batch's
    acks = log.split({("t", 0): ((3, 9, 1),)})
    assert acks == [
        ("t", 0, 3, 4, AckType.ACCEPT),
        ("t", 0, 5, 5, AckType.REJECT),
        ("t", 0, 6, 6, AckType.ACCEPT),
        ("t", 0, 7, 7, AckType.REJECT),
        ("t", 0, 8, 9, AckType.ACCEPT),
    ]
    assert list(log._decisions) == [("t", 0, 8, 2)]


def test_source_options_follow_the_kafka_source_names() -> None:
    opts = ShareSourceOptions.parse(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "a, b,a",
            "group.id": "g",
            "maxRecordsPerTrigger": "100",
            "kafka.client.id": "x",
        }
    )
    assert opts.topics == ("a", "b") and opts.max_records_per_trigger == 100
    assert opts.connect.client_params == (("client.id", "x"),)
    with pytest.raises(OptionError):
        ShareSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a"})


def test_options_a_source_or_sink_would_not_honour_are_refused_by_name() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    batch = BatchSourceOptions.parse(
        {
            **base,
            "startingTimestamp": "5",
            "startingOffsetsByTimestampStrategy": "Latest",
            "failOnDataLoss": "false",
        }
    )
    assert batch.starting_timestamp == 5 and batch.starting_timestamp_strategy == "latest"
    assert not batch.fail_on_data_loss and batch.topics == ("t",)
    refused = {
        "startingOffsetz": "unknown option",
        "kafka.auto.offset.reset": "startingOffsets",
        "kafka.max.poll.records": "not supported by the batch source",
        "group.id": "uses no group",
        "startingOffsetsByTimestampStrategy": "'error' or 'latest'",
        "startingTimestamp": "timestamp in milliseconds",
    }
    for name, why in refused.items():
        with pytest.raises(OptionError, match=why):
            BatchSourceOptions.parse({**base, name: "x"})
    with pytest.raises(OptionError, match="exactly one of"):
        BatchSourceOptions.parse({**base, "subscribePattern": "t.*"})
    assert BatchSourceOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "assign": '{"a": [1, 0], "b": [2]}'}
    ).subscription.assign == (("a", 0), ("a", 1), ("b", 2))

    share = {**base, "group.id": "g"}
    for name, why in {
        "endingOffsets": "has no end",
        "assign": "subscribes to topics",
        "maxOffsetsPerTrigger": "maxRecordsPerTrigger",
        "startingOffsetsByTimestamp": "earliest",
    }.items():
        with pytest.raises(OptionError, match=why):
            ShareSourceOptions.parse({**share, name: "1"})
    assert ShareSourceOptions.parse({**share, "share.record.lock.duration.ms": "20000"}).group_configs

    sink = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert dict(SinkOptions.parse({**sink, "kafka.acks": "all"}).connect.client_params) == {"acks": "all"}
    with pytest.raises(OptionError, match=r"compression\.type"):
        SinkOptions.parse({**sink, "kafka.compression.type": "lz4"})


def test_the_share_source_caps_acquired_runs_and_keeps_the_rest() -> None:
    runs = [("t", 0, 0, 9, 1), ("t", 1, 5, 7, 2)]
    assert ShareDriver._cap(runs, 11) == ([("t", 0, 0, 9, 1), ("t", 1, 5, 5, 2)], [("t", 1, 6, 7, 2)])
    assert ShareDriver._cap(runs, 0) == ([], runs)
    assert ShareDriver._cap(runs, None) == (runs, [])
