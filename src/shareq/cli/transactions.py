"""``shareq transactions list|describe|abort``: transactional ids, as kafka-transactions.sh shows them."""

from __future__ import annotations

import click

from ._common import admin_client, bootstrap_option, emit_json, friendly_errors, json_option, table


@click.group()
def transactions() -> None:
    """List and describe transactions; abort a hanging one."""


@transactions.command("list")
@bootstrap_option
@json_option
@click.option("--state", "states", multiple=True, help="only transactions in this state (Ongoing, ...)")
@click.option("--pattern", default=None, help="only transactional ids matching this regular expression")
@friendly_errors
def list_transactions(bootstrap: str, as_json: bool, states: tuple[str, ...], pattern: str | None) -> None:
    """Transactional ids with their producer id and state."""
    with admin_client(bootstrap) as admin:
        rows = admin.list_transactions(states=states, pattern=pattern)
    if as_json:
        emit_json(
            [
                {"transactional_id": r.transactional_id, "producer_id": r.producer_id, "state": r.state}
                for r in rows
            ]
        )
        return
    if not rows:
        click.echo("no transactions")
        return
    click.echo(
        table(
            ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"],
            [[r.transactional_id, r.producer_id, r.state] for r in rows],
        )
    )


@transactions.command("describe")
@click.argument("transactional_id")
@bootstrap_option
@json_option
@friendly_errors
def describe_transaction(transactional_id: str, bootstrap: str, as_json: bool) -> None:
    """State, producer, timeout and partitions of one transactional id."""
    with admin_client(bootstrap) as admin:
        d = admin.describe_transaction(transactional_id)
    partitions = ",".join(f"{t}-{p}" for t, p in d.partitions) or "-"
    if as_json:
        emit_json(
            {
                "transactional_id": d.transactional_id,
                "state": d.state,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "timeout_ms": d.timeout_ms,
                "start_ms": d.start_ms,
                "partitions": [[t, p] for t, p in d.partitions],
            }
        )
        return
    click.echo(
        table(
            ["TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "START-MS", "PARTITIONS"],
            [
                [
                    d.transactional_id,
                    d.state,
                    d.producer_id,
                    d.producer_epoch,
                    d.timeout_ms,
                    d.start_ms,
                    partitions,
                ]
            ],
        )
    )


@transactions.command("abort")
@click.argument("transactional_id")
@bootstrap_option
@click.option(
    "--execute", is_flag=True, help="really abort (without it: a dry run that shows what would be aborted)"
)
@friendly_errors
def abort_transaction(transactional_id: str, bootstrap: str, execute: bool) -> None:
    """Abort the open (hanging) transaction of TRANSACTIONAL_ID; its producer is fenced."""
    with admin_client(bootstrap) as admin:
        d = admin.describe_transaction(transactional_id)
        if d.state != "Ongoing":
            click.echo(f"{transactional_id} has no open transaction (state {d.state}); nothing to abort")
            return
        partitions = ",".join(f"{t}-{p}" for t, p in d.partitions)
        if not execute:
            click.echo(
                f"would abort the transaction of {transactional_id} (producer {d.producer_id}, epoch "
                f"{d.producer_epoch}) on {partitions}; run again with --execute"
            )
            return
        pid, epoch = admin.abort_transaction(transactional_id, d.timeout_ms)
    click.echo(
        f"aborted the transaction of {transactional_id} on {partitions}; "
        f"producer {pid} is now at epoch {epoch}"
    )
