"""``shareq offsets describe|alter|delete``: share-partition start offsets (SPSO) and lag of a group.

Altering and deleting are dry runs unless ``--execute`` is given: they print the plan first, as
kafka-share-groups.sh does. Both need the group to be empty (no running consumers).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import click
from kio.schema.errors import ErrorCode

from shareq.client import Admin, KafkaError, OffsetSpec

from ._common import admin_client, bootstrap_option, emit_json, friendly_errors, json_option, table


@click.group()
def offsets() -> None:
    """Describe, alter (reset) and delete a share group's offsets."""


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
    """Start offset and lag of each share-partition of GROUP (lag '-' when not yet known)."""
    with admin_client(bootstrap) as admin:
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
            ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
            [
                [group, o.topic, o.partition, None if o.start_offset < 0 else o.start_offset, o.lag]
                for o in rows
            ],
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
    group: str,
    topic: str,
    partitions: tuple[int, ...],
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
    current = admin.describe_share_group_offsets(group, {topic: parts})
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
        known = current.get((topic, p))
        old = None if known is None or known.start_offset < 0 else known.start_offset
        plan.append(PlannedOffset(topic=topic, partition=p, current=old, new=new))
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
        state = _group_state(admin, group)
        if state is not None and state != "Empty":
            raise click.ClickException(
                f"share group {group} is {state}: offsets can only be altered while it has no members"
            )
        plan = plan_alter(
            admin,
            group,
            topic,
            partitions,
            to_offset=to_offset,
            to_earliest=to_earliest,
            to_latest=to_latest,
            to_datetime=to_datetime,
        )
        if execute:
            admin.alter_share_group_offsets(group, {(o.topic, o.partition): o.new for o in plan})
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
        click.echo(f"altered {len(plan)} offset(s) of share group {group}")
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
    """Delete GROUP's offsets (share state) for whole topics; consumption restarts per
    share.auto.offset.reset. The group must have no running consumers."""
    with admin_client(bootstrap) as admin:
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
