"""``shareq offsets describe|alter|delete``: a group's offsets and lag.

For a share group these are its share-partition start offsets (SPSO), as kafka-share-groups.sh
shows them; for a consumer group (classic or KIP-848) its committed offsets, as
kafka-consumer-groups.sh does. Altering and deleting are dry runs unless ``--execute`` is given:
they print the plan first. Altering needs the group to be empty (no running consumers).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass

import click
from kio.schema.errors import ErrorCode

from shareq.client import Admin, KafkaError, OffsetSpec

from ._common import admin_client, bootstrap_option, emit_json, friendly_errors, json_option, table
from .groups import group_type, pending_json, producer_ids_text


@click.group()
def offsets() -> None:
    """Describe, alter (reset) and delete a share group's or a consumer group's offsets."""


def _group_state(admin: Admin, group: str) -> str | None:
    """The group's state, or None when it does not exist."""
    try:
        return admin.describe_share_group(group).state
    except KafkaError as error:
        if error.code == ErrorCode.group_id_not_found:
            return None
        raise


@offsets.command("describe")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, help="only these topics (default: all with offsets)")
@bootstrap_option
@json_option
@friendly_errors
def describe_offsets(group: str, topics: tuple[str, ...], bootstrap: str, as_json: bool) -> None:
    """Start offset and lag of each share-partition of GROUP (lag '-' when not yet known), or the
    committed offset, log end and lag of each partition of a consumer group."""
    with admin_client(bootstrap) as admin:
        kind = group_type(admin, group)
        if kind not in (None, "share"):
            _describe_committed(admin, group, topics, as_json)
            return
        if _group_state(admin, group) is None:
            raise click.ClickException(f"share group {group} does not exist")
        wanted = None
        if topics:
            wanted = {t: [p.partition for p in admin.describe_topic(t).partitions] for t in topics}
        found = admin.describe_share_group_offsets(group, wanted)
    rows = [found[k] for k in sorted(found)]
    if as_json:
        emit_json(
            [
                {
                    "group": group,
                    "topic": o.topic,
                    "partition": o.partition,
                    "start_offset": o.start_offset,
                    "lag": o.lag,
                    **pending_json(o),
                }
                for o in rows
            ]
        )
        return
    if not rows:
        click.echo(f"share group {group} has no offsets")
        return
    click.echo(
        table(
            ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG", "TX-PENDING", "PRODUCER-IDS"],
            [
                [
                    group,
                    o.topic,
                    o.partition,
                    None if o.start_offset < 0 else o.start_offset,
                    o.lag,
                    o.pending_records,
                    producer_ids_text(o),
                ]
                for o in rows
            ],
        )
    )


def _describe_committed(admin: Admin, group: str, topics: tuple[str, ...], as_json: bool) -> None:
    wanted = None
    if topics:
        wanted = {t: [p.partition for p in admin.describe_topic(t).partitions] for t in topics}
    committed = admin.list_consumer_group_offsets(group, wanted)
    ends: dict[tuple[str, int], int] = {}
    for topic in sorted({t for t, _ in committed}):
        parts = sorted(p for t, p in committed if t == topic)
        latest = admin.list_offsets(topic, parts, OffsetSpec.LATEST)
        ends.update({(topic, p): o.offset for p, o in latest.items()})
    rows = []
    for key in sorted(committed):
        offset = committed[key].offset
        end = ends.get(key)
        lag = None if offset < 0 or end is None else max(end - offset, 0)
        rows.append((key[0], key[1], None if offset < 0 else offset, end, lag))
    if as_json:
        emit_json(
            [
                {"group": group, "topic": t, "partition": p, "offset": o, "log_end_offset": e, "lag": lag}
                for t, p, o, e, lag in rows
            ]
        )
        return
    if not rows:
        click.echo(f"consumer group {group} has no committed offsets")
        return
    click.echo(
        table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"],
            [[group, *row] for row in rows],
        )
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedOffset:
    topic: str
    partition: int
    current: int | None
    new: int


def _parse_datetime(text: str) -> int:
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"not an ISO-8601 date-time: {text!r}", param_hint="--to-datetime") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as the Kafka tools assume
    return int(when.timestamp() * 1000)


def plan_alter(
    admin: Admin,
    topic: str,
    partitions: tuple[int, ...],
    current: Callable[[list[int]], dict[int, int | None]],
    *,
    to_offset: int | None,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: str | None,
) -> list[PlannedOffset]:
    """The new start offset of each chosen partition; refuses offsets outside the log."""
    chosen = [to_offset is not None, to_earliest, to_latest, to_datetime is not None]
    if sum(chosen) != 1:
        raise click.UsageError("give exactly one of --to-offset, --to-earliest, --to-latest, --to-datetime")
    info = admin.describe_topic(topic)
    existing = [p.partition for p in info.partitions]
    for p in partitions:
        if p not in existing:
            raise click.ClickException(f"topic {topic} has no partition {p} (it has {len(existing)})")
    parts = sorted(partitions) if partitions else existing
    earliest = admin.list_offsets(topic, parts, OffsetSpec.EARLIEST)
    latest = admin.list_offsets(topic, parts, OffsetSpec.LATEST)
    by_time = admin.list_offsets(topic, parts, _parse_datetime(to_datetime)) if to_datetime else {}
    now = current(parts)
    plan = []
    for p in parts:
        low, high = earliest[p].offset, latest[p].offset
        if to_offset is not None:
            if not low <= to_offset <= high:
                raise click.ClickException(
                    f"offset {to_offset} is outside {topic}-{p}, whose offsets run from {low} to {high}"
                )
            new = to_offset
        elif to_earliest:
            new = low
        elif to_latest:
            new = high
        else:
            found = by_time[p].offset
            new = high if found < 0 else found
        plan.append(PlannedOffset(topic=topic, partition=p, current=now.get(p), new=new))
    return plan


@offsets.command("alter")
@click.argument("group")
@click.option("--topic", required=True)
@click.option("--partition", "partitions", multiple=True, type=int, help="default: every partition")
@click.option("--to-offset", type=int)
@click.option("--to-earliest", is_flag=True)
@click.option("--to-latest", is_flag=True)
@click.option("--to-datetime", metavar="ISO-8601")
@click.option("--execute", is_flag=True, help="apply the plan (default: only print it)")
@bootstrap_option
@json_option
@friendly_errors
def alter_offsets(
    group: str,
    topic: str,
    partitions: tuple[int, ...],
    to_offset: int | None,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: str | None,
    execute: bool,
    bootstrap: str,
    as_json: bool,
) -> None:
    """Reset GROUP's start offsets on TOPIC (the group must have no running consumers)."""
    if to_offset is not None and to_offset < 0:
        raise click.BadParameter("offsets are not negative", param_hint="--to-offset")
    with admin_client(bootstrap) as admin:
        kind = group_type(admin, group) or "share"
        noun = "share group" if kind == "share" else "consumer group"
        state = _group_state(admin, group) if kind == "share" else admin.describe_consumer_group(group).state
        if state is not None and state != "Empty":
            raise click.ClickException(
                f"{noun} {group} is {state}: offsets can only be altered while it has no members"
            )

        def current(parts: list[int]) -> dict[int, int | None]:
            if kind == "share":
                found = admin.describe_share_group_offsets(group, {topic: parts})
                return {p: o.start_offset if o.start_offset >= 0 else None for (_, p), o in found.items()}
            committed = admin.list_consumer_group_offsets(group, {topic: parts})
            return {p: o.offset if o.offset >= 0 else None for (_, p), o in committed.items()}

        plan = plan_alter(
            admin,
            topic,
            partitions,
            current,
            to_offset=to_offset,
            to_earliest=to_earliest,
            to_latest=to_latest,
            to_datetime=to_datetime,
        )
        if execute:
            new = {(o.topic, o.partition): o.new for o in plan}
            if kind == "share":
                admin.alter_share_group_offsets(group, new)
            else:
                admin.alter_consumer_group_offsets(group, new)
    if as_json:
        emit_json(
            {
                "group": group,
                "executed": execute,
                "offsets": [
                    {"topic": o.topic, "partition": o.partition, "current": o.current, "new": o.new}
                    for o in plan
                ],
            }
        )
        return
    click.echo(
        table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
            [[group, o.topic, o.partition, o.current, o.new] for o in plan],
        )
    )
    if execute:
        click.echo(f"altered {len(plan)} offset(s) of {noun} {group}")
    else:
        note = " (the group does not exist yet; it will be created)" if state is None else ""
        click.echo(f"dry run{note}: pass --execute to apply")


@offsets.command("delete")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True)
@click.option("--execute", is_flag=True, help="delete (default: only show what would be deleted)")
@bootstrap_option
@json_option
@friendly_errors
def delete_offsets(group: str, topics: tuple[str, ...], execute: bool, bootstrap: str, as_json: bool) -> None:
    """Delete GROUP's offsets (share state, or committed offsets) for whole topics; consumption
    restarts per its auto.offset.reset. A share group must have no running consumers; a consumer
    group must not be consuming the topics."""
    with admin_client(bootstrap) as admin:
        if group_type(admin, group) not in (None, "share"):
            _delete_committed(admin, group, topics, execute, as_json)
            return
        state = _group_state(admin, group)
        if state is None:
            raise click.ClickException(f"share group {group} does not exist")
        if state != "Empty":
            raise click.ClickException(
                f"share group {group} is {state}: offsets can only be deleted while it has no members"
            )
        current = admin.describe_share_group_offsets(group, None)
        have = {t for t, _ in current}
        missing = [t for t in topics if t not in have]
        if missing:
            raise click.ClickException(
                f"share group {group} has no offsets for topic(s) {', '.join(missing)}"
            )
        if execute:
            admin.delete_share_group_offsets(group, list(topics))
    if as_json:
        emit_json({"group": group, "executed": execute, "topics": list(topics)})
        return
    rows = [[group, t, p, o.start_offset] for (t, p), o in sorted(current.items()) if t in topics]
    click.echo(table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET"], rows))
    if execute:
        click.echo(f"deleted the offsets of share group {group} for {', '.join(topics)}")
    else:
        click.echo("dry run: pass --execute to delete")


def _delete_committed(
    admin: Admin, group: str, topics: tuple[str, ...], execute: bool, as_json: bool
) -> None:
    committed = admin.list_consumer_group_offsets(group)
    missing = [t for t in topics if not any(k[0] == t for k in committed)]
    if missing:
        raise click.ClickException(f"consumer group {group} has no offsets for topic(s) {', '.join(missing)}")
    chosen = sorted(k for k in committed if k[0] in topics)
    if execute:
        admin.delete_consumer_group_offsets(group, chosen)
    if as_json:
        emit_json({"group": group, "executed": execute, "topics": list(topics)})
        return
    click.echo(
        table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET"],
            [[group, t, p, committed[(t, p)].offset] for t, p in chosen],
        )
    )
    if execute:
        click.echo(f"deleted the offsets of consumer group {group} for {', '.join(topics)}")
    else:
        click.echo("dry run: pass --execute to delete")
