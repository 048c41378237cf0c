"""What the live web view shows, as one JSON-ready dict: topics, share groups with members,
assignments and per share-partition strips, consumer groups with lag.

A strip runs from the SPSO to the SPEO, one segment per in-flight run; past ``MAX_SEGMENTS`` runs
it is cut into equal slices coloured by the state holding most records in each (with the counts),
so a strip stays readable however fragmented the partition is. A group with more than
``MAX_STRIPS`` share-partitions shows strips for those with the most lag and one summary row for
the rest, so the page stays usable with a thousand partitions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .figures import Run, SharePartitionFigures, add_detail, share_partition_figures

if TYPE_CHECKING:
    from ..broker import Broker

MAX_SEGMENTS = 120
MAX_STRIPS = 48
MAX_TOPIC_PARTITIONS = 64  # per-partition rows of a topic beyond this are summed


def strip(
    runs: Sequence[Run], spso: int, speo: int, max_segments: int = MAX_SEGMENTS
) -> list[dict[str, Any]]:
    """Segments covering ``spso..speo-1``: ``{first, last, state, dc, expiring}`` per run, or per
    slice (with ``counts`` by state) when there are more runs than ``max_segments``. Offsets with
    no run (a restart's read-gap window) show as state ``UNKNOWN``."""
    if speo <= spso:
        return []
    pieces: list[tuple[int, int, str, int, bool]] = []
    cursor = spso
    for run in runs:
        first = max(run.first, spso)
        if run.last < spso or first >= speo:
            continue
        if first > cursor:
            pieces.append((cursor, first - 1, "UNKNOWN", 0, False))
        last = min(run.last, speo - 1)
        pieces.append((first, last, run.state.name, run.delivery_count, run.expiring))
        cursor = last + 1
    if cursor < speo:
        pieces.append((cursor, speo - 1, "UNKNOWN", 0, False))
    if len(pieces) <= max_segments:
        return [{"first": f, "last": la, "state": s, "dc": dc, "expiring": e} for f, la, s, dc, e in pieces]
    return _slices(pieces, spso, speo, max_segments)


def _slices(
    pieces: list[tuple[int, int, str, int, bool]], spso: int, speo: int, n: int
) -> list[dict[str, Any]]:
    width = (speo - spso + n - 1) // n
    out: list[dict[str, Any]] = []
    i = 0
    for start in range(spso, speo, width):
        end = min(start + width, speo) - 1
        counts: dict[str, int] = {}
        dc = 0
        expiring = False
        while i < len(pieces) and pieces[i][0] <= end:
            f, la, state, d, e = pieces[i]
            overlap = min(la, end) - max(f, start) + 1
            if overlap > 0:
                counts[state] = counts.get(state, 0) + overlap
                dc = max(dc, d)
                expiring = expiring or e
            if la > end:
                break
            i += 1
        state = max(counts, key=lambda s: counts[s]) if counts else "UNKNOWN"
        out.append(
            {"first": start, "last": end, "state": state, "dc": dc, "expiring": expiring, "counts": counts}
        )
    return out


def _partition_row(f: SharePartitionFigures) -> dict[str, Any]:
    return {
        "topic": f.topic,
        "partition": f.partition,
        "spso": f.spso,
        "speo": f.speo,
        "end": f.end,
        "lag": f.lag,
        "lag_seconds": f.lag_seconds,
        "states": {s.name: n for s, n in f.by_state.items() if n},
        "expiring": f.expiring,
        "archived": f.stats.archived,
        "dead_lettered": f.stats.dead_lettered,
        "redelivered": f.stats.redelivered,
        "lock_expired": f.stats.lock_expired,
        "ordering": f.ordering,
        "blocked_keys": f.blocked_keys,
        "key_waiting": f.key_waiting,
        "delayed": f.delayed,
        "next_redelivery_ms": f.next_redelivery_ms,
        "window_mode": f.window_mode,
        "strip": strip(f.runs, f.spso, f.speo),
    }


def snapshot(broker: Broker) -> dict[str, Any]:
    """Everything the page draws, read on the broker's loop."""
    now_ms = time.time_ns() // 1_000_000
    if not broker.ready or broker.stopping:  # logs not open (yet, or any more)
        return {
            "now_ms": now_ms,
            "broker": {"node_id": broker.node_id, "listener": "", "connections": 0, "ready": False},
            "topics": [],
            "share_groups": [],
            "consumer_groups": [],
        }
    figures = share_partition_figures(broker, now_ms, detail=False)
    return {
        "now_ms": now_ms,
        "broker": {
            "node_id": broker.node_id,
            "listener": f"{broker.host}:{broker.port}",
            "connections": broker.open_connections,
            "ready": broker.ready,
        },
        "topics": _topics(broker),
        "share_groups": _share_groups(broker, figures, now_ms),
        "consumer_groups": _consumer_groups(broker),
    }


def _topics(broker: Broker) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for topic in sorted(broker.topics, key=lambda t: t.name):
        if topic.internal:
            continue
        rows = []
        start = end = size = 0
        for index in range(topic.partitions):
            partition = broker.partition(topic.name, index)
            if partition is None:
                continue
            plog = partition.log
            start += plog.log_start_offset
            end += plog.log_end_offset
            size += plog.size_bytes
            if index < MAX_TOPIC_PARTITIONS:
                rows.append({"partition": index, "start": plog.log_start_offset, "end": plog.log_end_offset})
        out.append(
            {
                "name": topic.name,
                "partitions": topic.partitions,
                "records": end - start,
                "size_bytes": size,
                "rows": rows,
            }
        )
    return out


def _share_groups(broker: Broker, figures: list[SharePartitionFigures], now_ms: int) -> list[dict[str, Any]]:
    share = broker.share
    if share is None:
        return []
    by_group: dict[str, list[SharePartitionFigures]] = {}
    for f in figures:
        by_group.setdefault(f.group, []).append(f)
    out: list[dict[str, Any]] = []
    for listing in share.coordinator.list_groups():
        group_id = listing.group_id
        description = share.coordinator.describe(group_id)
        config = share.coordinator.group_config(group_id)
        parts = sorted(by_group.get(group_id, []), key=lambda f: (-f.lag, f.topic, f.partition))
        shown, rest = parts[:MAX_STRIPS], parts[MAX_STRIPS:]
        for f in shown:
            add_detail(f, now_ms)
        rest_states: dict[str, int] = {}
        for f in rest:
            for s, n in f.by_state.items():
                if n:
                    rest_states[s.name] = rest_states.get(s.name, 0) + n
        out.append(
            {
                "group_id": group_id,
                "state": listing.group_state,
                "epoch": description.group_epoch,
                "lock_duration_ms": config.record_lock_duration_ms,
                "delivery_count_limit": config.delivery_count_limit,
                "dlq_topic": config.dlq_topic_name or None,
                "window_mode": "count" if config.retry.window_count else "span",
                "redelivery_backoff_ms": config.retry.backoff_ms,
                "stall_warning": config.retry.stall_warning,
                "delayed": sum(f.delayed for f in parts),
                "lag": sum(f.lag for f in parts),
                "members": [
                    {
                        "member_id": m.member_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "epoch": m.member_epoch,
                        "assignment": [
                            {"topic": tp.topic_name, "partitions": list(tp.partitions)} for tp in m.assignment
                        ],
                    }
                    for m in description.members
                ],
                "partitions": [_partition_row(f) for f in sorted(shown, key=_by_partition)],
                "more": {
                    "count": len(rest),
                    "lag": sum(f.lag for f in rest),
                    "states": rest_states,
                    "archived": sum(f.stats.archived for f in rest),
                    "dead_lettered": sum(f.stats.dead_lettered for f in rest),
                },
            }
        )
    return out


def _by_partition(f: SharePartitionFigures) -> tuple[str, int]:
    return f.topic, f.partition


def _consumer_groups(broker: Broker) -> list[dict[str, Any]]:
    services = broker.consumer_groups
    if services is None:
        return []
    out: list[dict[str, Any]] = []
    for group_id in sorted(services.offsets.group_ids()):
        rows = []
        total = 0
        for (topic, index), committed in sorted(services.offsets.fetch(group_id).items()):
            partition = broker.partition(topic, index)
            if partition is None:
                continue
            lag = max(partition.log.visible_stable_offset - committed.offset, 0)
            total += lag
            rows.append({"topic": topic, "partition": index, "committed": committed.offset, "lag": lag})
        group = services.coordinator.group(group_id)
        consumer = services.consumer.group(group_id)
        state = "Empty"
        if group is not None:
            state = group.state.value
        elif consumer is not None:
            state = consumer.state
        out.append(
            {"group_id": group_id, "state": state, "lag": total, "partitions": rows[:MAX_TOPIC_PARTITIONS]}
        )
    return out
