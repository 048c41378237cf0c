"""``shareq topics create|list|describe|alter|delete``."""

from __future__ import annotations

import click

from shareq.client import OffsetSpec

from ._common import (
    admin_client,
    bootstrap_option,
    emit_json,
    friendly_errors,
    json_option,
    parse_pairs,
    table,
)


@click.group()
def topics() -> None:
    """Create, list, describe and delete topics."""


@topics.command("create")
@click.argument("name")
@click.option("--partitions", "-p", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--config", "pairs", multiple=True, metavar="KEY=VALUE", help="topic config override")
@bootstrap_option
@json_option
@friendly_errors
def create_topic(name: str, partitions: int, pairs: tuple[str, ...], bootstrap: str, as_json: bool) -> None:
    """Create topic NAME."""
    configs = parse_pairs(pairs, "--config")
    with admin_client(bootstrap) as admin:
        topic_id = admin.create_topic(name, partitions, configs=configs)
    if as_json:
        emit_json({"topic": name, "topic_id": str(topic_id), "partitions": partitions})
    else:
        click.echo(f"created topic {name} ({partitions} partition(s), id {topic_id})")


@topics.command("list")
@click.option("--internal", is_flag=True, help="include internal topics")
@bootstrap_option
@json_option
@friendly_errors
def list_topics(internal: bool, bootstrap: str, as_json: bool) -> None:
    """Topic names, ids and partition counts."""
    with admin_client(bootstrap) as admin:
        found = admin.list_topics(include_internal=internal)
    if as_json:
        emit_json(
            [
                {"topic": t.name, "topic_id": str(t.topic_id), "partitions": len(t.partitions)}
                for t in found.values()
            ]
        )
        return
    if not found:
        click.echo("no topics")
        return
    click.echo(
        table(
            ["TOPIC", "PARTITIONS", "TOPIC-ID"],
            [[t.name, len(t.partitions), t.topic_id] for t in found.values()],
        )
    )


@topics.command("describe")
@click.argument("name")
@bootstrap_option
@json_option
@friendly_errors
def describe_topic(name: str, bootstrap: str, as_json: bool) -> None:
    """Partitions of topic NAME with their leader and offsets."""
    with admin_client(bootstrap) as admin:
        info = admin.describe_topic(name)
        parts = [p.partition for p in info.partitions]
        earliest = admin.list_offsets(name, parts, OffsetSpec.EARLIEST)
        latest = admin.list_offsets(name, parts, OffsetSpec.LATEST)
    rows = [
        {
            "partition": p.partition,
            "leader": p.leader,
            "start_offset": earliest[p.partition].offset,
            "end_offset": latest[p.partition].offset,
        }
        for p in info.partitions
    ]
    if as_json:
        emit_json({"topic": name, "topic_id": str(info.topic_id), "partitions": rows})
        return
    click.echo(f"topic {name}  id {info.topic_id}  partitions {len(rows)}")
    click.echo(
        table(
            ["PARTITION", "LEADER", "START-OFFSET", "END-OFFSET"],
            [[r["partition"], r["leader"], r["start_offset"], r["end_offset"]] for r in rows],
        )
    )


@topics.command("alter")
@click.argument("name")
@click.option(
    "--partitions", "-p", required=True, type=click.IntRange(min=1), help="the new, larger partition count"
)
@bootstrap_option
@json_option
@friendly_errors
def alter_topic(name: str, partitions: int, bootstrap: str, as_json: bool) -> None:
    """Grow topic NAME to more partitions (share and consumer groups pick them up)."""
    with admin_client(bootstrap) as admin:
        admin.create_partitions(name, partitions)
    if as_json:
        emit_json({"topic": name, "partitions": partitions})
    else:
        click.echo(f"topic {name} now has {partitions} partition(s)")


@topics.command("delete")
@click.argument("name")
@bootstrap_option
@json_option
@friendly_errors
def delete_topic(name: str, bootstrap: str, as_json: bool) -> None:
    """Delete topic NAME."""
    with admin_client(bootstrap) as admin:
        admin.delete_topics([name])
    if as_json:
        emit_json({"topic": name, "deleted": True})
    else:
        click.echo(f"deleted topic {name}")
