"""The ``shareq`` command line: one click group, subcommands defined next to what they drive."""

from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="shareq")
def main() -> None:
    """shareq: a Kafka-compatible broker with share groups."""


def _register() -> None:
    # Each subcommand lives in its own module; registration stays in one list.
    from shareq.cli import commands

    for command in commands.ALL:
        main.add_command(command)


_register()
