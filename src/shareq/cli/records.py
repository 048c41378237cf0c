"""``shareq records delete``: move a partition's log start forward (DeleteRecords)."""

from __future__ import annotations

import click

from ._common import admin_client, bootstrap_option, emit_json, friendly_errors, json_option, table


@click.group()
def records() -> None:
    """Delete records from the start of a topic's partitions."""


@records.command("delete")
@click.option("--topic", "-t", required=True)
@click.option("--partition", "-p", "partitions", multiple=True, type=int, help="default: every partition")
@click.option(
    "--before",
    "before",
    required=True,
    type=int,
    help="delete the records below this offset; -1: every record up to the high watermark",
)
@bootstrap_option
@json_option
@friendly_errors
def delete_records(
    topic: str, partitions: tuple[int, ...], before: int, bootstrap: str, as_json: bool
) -> None:
    """Delete TOPIC's records below an offset. Share groups whose start offset falls behind it move
    with it, as Kafka's do."""
    with admin_client(bootstrap) as admin:
        wanted = list(partitions) or [p.partition for p in admin.describe_topic(topic).partitions]
        moved = admin.delete_records(topic, dict.fromkeys(wanted, before))
    rows = [{"partition": p, "start_offset": moved[p]} for p in sorted(moved)]
    if as_json:
        emit_json({"topic": topic, "partitions": rows})
    else:
        click.echo(table(["PARTITION", "START-OFFSET"], [[r["partition"], r["start_offset"]] for r in rows]))
