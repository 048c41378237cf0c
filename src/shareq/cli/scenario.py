"""``shareq scenario FILE``: run a share-partition scenario (golden vector) against the engine."""

from __future__ import annotations

import sys

import click

from shareq.persister.blocking import BlockingPersister
from shareq.persister.memory import MemoryPersister
from shareq.share.scenario import ScenarioError, ScenarioMismatch, ScenarioRunner, load_scenario


@click.command("scenario")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def scenario(file: str) -> None:
    """Run the scenario in FILE; exit non-zero at the first expectation that does not hold."""
    try:
        doc = load_scenario(file)
        with BlockingPersister(MemoryPersister()) as persister:
            report = ScenarioRunner(doc, persister).run()
    except ScenarioMismatch as exc:
        click.echo(f"FAIL {file}\n{exc}", err=True)
        sys.exit(1)
    except (ScenarioError, ValueError, KeyError) as exc:
        click.echo(f"ERROR {file}: malformed scenario: {exc}", err=True)
        sys.exit(2)
    click.echo(f"ok {file}: {report.steps} steps, {report.checks} checks passed")
