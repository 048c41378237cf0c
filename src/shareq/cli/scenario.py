"""``shareq scenario FILE``: run a share-partition scenario (golden vector) against the engine."""

from __future__ import annotations

import sys

import click

from shareq.cli.scenario_runner import ScenarioError, ScenarioMismatch, ScenarioRunner, load_scenario
from shareq.persister.blocking import BlockingPersister
from shareq.persister.memory import MemoryPersister
from shareq.persister.throwaway import ThrowawayStateLog


@click.command("scenario")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--persister",
    type=click.Choice(["builtin", "in-log", "memory"]),
    default="builtin",
    show_default=True,
    help="builtin: the durable state log on a throwaway directory, replayed from disk for every "
    "restart and durable check; in-log: share state as control records in throwaway partition logs, "
    "recovered for every restart and durable check; memory: an in-memory state store (faster, for "
    "debugging the engine).",
)
def scenario(file: str, persister: str) -> None:
    """Run the scenario in FILE; exit non-zero at the first expectation that does not hold."""
    try:
        doc = load_scenario(file)
        port: ThrowawayStateLog | BlockingPersister = (
            BlockingPersister(MemoryPersister())
            if persister == "memory"
            else ThrowawayStateLog(in_log=persister == "in-log")
        )
        with port:
            report = ScenarioRunner(doc, port).run()
    except ScenarioMismatch as exc:
        click.echo(f"FAIL {file}\n{exc}", err=True)
        sys.exit(1)
    except (ScenarioError, ValueError, KeyError) as exc:
        click.echo(f"ERROR {file}: malformed scenario: {exc}", err=True)
        sys.exit(2)
    click.echo(f"ok {file}: {report.steps} steps, {report.checks} checks passed ({persister} persister)")
