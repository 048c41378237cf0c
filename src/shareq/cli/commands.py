"""The list of subcommands; each module defines one click command (or group)."""

from __future__ import annotations

import click

from shareq.cli.scenario import scenario

ALL: list[click.Command] = [scenario]
