"""``shareq groups list|describe|delete``: share groups as kafka-share-groups.sh shows them, and
consumer groups (classic and KIP-848) as kafka-consumer-groups.sh does."""

from __future__ import annotations

import datetime

import click

from shareq.client import (
    Admin,
    ConfigResource,
    ConsumerGroupDescription,
    KafkaError,
    ResourceType,
    ShareGroupDescription,
    ShareGroupOffset,
)
from shareq.coordinators.group.retry_config import (
    REDELIVERY_BACKOFF_MS,
    RETRY_CONFIG_DEFAULTS,
    SHARE_WINDOW_MODE,
    resolve_retry_config,
)

from ._common import admin_client, bootstrap_option, emit_json, friendly_errors, json_option, table


def group_type(admin: Admin, group: str) -> str | None:
    """``share``, ``classic`` or ``consumer``; ``None`` when no broker knows the group."""
    for listing in admin.list_groups():
        if listing.group_id == group:
            return listing.type or listing.protocol_type or "classic"
    return None


@click.group()
def groups() -> None:
    """List, describe and delete share groups and consumer groups."""


@groups.command("list")
@bootstrap_option
@json_option
@click.option("--state", "states", multiple=True, help="only groups in this state (Empty, Stable)")
@click.option("--type", "types", multiple=True, help="only groups of this type (share, consumer, ...)")
@friendly_errors
def list_groups(bootstrap: str, as_json: bool, states: tuple[str, ...], types: tuple[str, ...]) -> None:
    """List groups with their type and state."""
    with admin_client(bootstrap) as admin:
        listings = admin.list_groups(types=types, states=states)
    if as_json:
        emit_json([{"group": g.group_id, "type": g.type, "state": g.state} for g in listings])
        return
    if not listings:
        click.echo("no groups")
        return
    click.echo(table(["GROUP", "TYPE", "STATE"], [[g.group_id, g.type, g.state] for g in listings]))


@groups.command("describe")
@click.argument("group")
@bootstrap_option
@json_option
@friendly_errors
def describe_group(group: str, bootstrap: str, as_json: bool) -> None:
    """State, epochs and members (with their assignments) of one share or consumer group."""
    with admin_client(bootstrap) as admin:
        kind = group_type(admin, group)
        if kind is None:
            raise click.ClickException(f"group {group} does not exist")
        if kind != "share":
            _describe_consumer_group(admin.describe_consumer_group(group), as_json)
            return
        description = admin.describe_share_group(group)
        offsets = _share_offsets(admin, group)
        ordering = _ordering(admin, group)
        retry = _retry_configs(admin, group)
    delayed = [o for _key, o in sorted(offsets.items()) if o.delayed_records]
    warning = _stall_warning(retry)
    if as_json:
        emit_json(
            {
                **description_json(description),
                "ordering": ordering,
                "tx_pending": [
                    {"topic": o.topic, "partition": o.partition, **pending_json(o)}
                    for _key, o in sorted(offsets.items())
                    if o.pending
                ],
                "window_mode": retry.get(SHARE_WINDOW_MODE, "span"),
                "redelivery_backoff_ms": int(retry.get(REDELIVERY_BACKOFF_MS, "0") or 0),
                "delayed": [
                    {
                        "topic": o.topic,
                        "partition": o.partition,
                        "records": o.delayed_records,
                        "next_redelivery_ms": o.next_redelivery_ms,
                    }
                    for o in delayed
                ],
                "warnings": [warning] if warning else [],
            }
        )
        return
    d = description
    click.echo(
        table(
            ["GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "ASSIGNOR", "ORDERING", "#MEMBERS"],
            [[d.group_id, d.state, d.group_epoch, d.assignment_epoch, d.assignor, ordering, len(d.members)]],
        )
    )
    if d.members:
        click.echo()
        rows = [
            [
                m.member_id,
                m.client_id,
                m.client_host,
                m.member_epoch,
                ",".join(m.subscribed_topics),
                _assignment_text(m.assignment),
            ]
            for m in d.members
        ]
        click.echo(table(["MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "TOPICS", "ASSIGNMENT"], rows))
    if any(o.pending for o in offsets.values()):
        click.echo()
        staged = [
            [o.topic, o.partition, o.pending_records, producer_ids_text(o)]
            for _key, o in sorted(offsets.items())
            if o.pending
        ]
        click.echo(table(["TOPIC", "PARTITION", "TX-PENDING", "PRODUCER-IDS"], staged))
    if delayed:
        click.echo()
        rows = [[o.topic, o.partition, o.delayed_records, _when(o.next_redelivery_ms)] for o in delayed]
        click.echo(table(["TOPIC", "PARTITION", "DELAYED", "NEXT-REDELIVERY"], rows))
    backoff = retry.get(REDELIVERY_BACKOFF_MS, "0")
    if backoff not in ("", "0"):
        click.echo()
        click.echo(f"redelivery backoff {backoff} ms, window mode {retry.get(SHARE_WINDOW_MODE, 'span')}")
    if warning:
        click.echo(f"warning: {warning}")


def _retry_configs(admin: Admin, group: str) -> dict[str, str]:
    """The group's shareq retry configs as described (empty from a broker that has none)."""
    try:
        described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    except KafkaError:
        return {}
    entries = next(iter(described.values()), {})
    return {name: e.value or "" for name, e in entries.items() if name in RETRY_CONFIG_DEFAULTS}


def _stall_warning(retry: dict[str, str]) -> str | None:
    """That a delayed head record can stall the partition (backoff with the span window)."""
    if not retry:
        return None
    try:
        return resolve_retry_config(retry, 2**62).stall_warning
    except Exception:
        return None


def _when(epoch_ms: int | None) -> str:
    if not epoch_ms:
        return "-"
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC).isoformat(
        timespec="milliseconds"
    )


ORDERING_KEY = "shareq.share.ordering"


def _ordering(admin: Admin, group: str) -> str:
    """The group's ``shareq.share.ordering`` (``none`` on a broker that does not know it: Kafka)."""
    resource = ConfigResource(ResourceType.GROUP, group)
    try:
        entries = admin.describe_configs([resource], keys=[ORDERING_KEY])
    except KafkaError:
        return "none"
    entry = entries.get(resource, {}).get(ORDERING_KEY)
    return entry.value if entry is not None and entry.value else "none"


def _share_offsets(admin: Admin, group: str) -> dict[tuple[str, int], ShareGroupOffset]:
    """The group's share-partitions (for the records transactions hold), or none if it has none."""
    try:
        return admin.describe_share_group_offsets(group)
    except KafkaError:
        return {}


def _describe_consumer_group(d: ConsumerGroupDescription, as_json: bool) -> None:
    members = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "assignment": {t: list(ps) for t, ps in m.assignment.items()},
        }
        for m in d.members
    ]
    if as_json:
        emit_json(
            {
                "group": d.group_id,
                "type": d.type,
                "state": d.state,
                "assignor": d.assignor,
                "epoch": d.epoch,
                "members": members,
            }
        )
        return
    click.echo(
        table(
            ["GROUP", "TYPE", "STATE", "ASSIGNOR", "EPOCH", "#MEMBERS"],
            [[d.group_id, d.type, d.state, d.assignor, d.epoch, len(d.members)]],
        )
    )
    if d.members:
        click.echo()
        rows = [
            [m.member_id, m.instance_id, m.client_id, m.client_host, _assignment_text(m.assignment)]
            for m in d.members
        ]
        click.echo(table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"], rows))


def _assignment_text(assignment: object) -> str:
    if not isinstance(assignment, dict) or not assignment:
        return "-"
    return ";".join(f"{t}:{','.join(str(p) for p in ps)}" for t, ps in sorted(assignment.items()))


def description_json(d: ShareGroupDescription) -> dict[str, object]:
    return {
        "group": d.group_id,
        "state": d.state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor": d.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "rack": m.rack_id,
                "epoch": m.member_epoch,
                "topics": list(m.subscribed_topics),
                "assignment": {t: list(ps) for t, ps in m.assignment.items()},
            }
            for m in d.members
        ],
    }


@groups.command("delete")
@click.argument("group")
@bootstrap_option
@json_option
@friendly_errors
def delete_group(group: str, bootstrap: str, as_json: bool) -> None:
    """Delete an empty group with its offsets (share state or committed offsets) and configs."""
    with admin_client(bootstrap) as admin:
        kind = group_type(admin, group)
        admin.delete_groups([group])
    if as_json:
        emit_json({"group": group, "deleted": True})
    else:
        click.echo(f"deleted {'share' if kind in (None, 'share') else 'consumer'} group {group}")


def pending_json(o: ShareGroupOffset) -> dict[str, object]:
    """Records in TX_PENDING and the transactions holding them (KIP-1289)."""
    return {
        "tx_pending": o.pending_records,
        "pending_transactions": [
            {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch, "records": p.records}
            for p in o.pending
        ],
    }


def producer_ids_text(o: ShareGroupOffset) -> str | None:
    return ",".join(str(p.producer_id) for p in o.pending) or None
