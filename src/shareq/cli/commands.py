"""The list of subcommands; each module defines one click command (or group)."""

from __future__ import annotations

import click

from shareq.cli.demo import demo
from shareq.cli.scenario import scenario
from shareq.cli.serve import serve

ALL: list[click.Command] = [serve, scenario, demo]
