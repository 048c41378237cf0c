"""The list of subcommands; each module defines one click command (or group)."""

from __future__ import annotations

import click

ALL: list[click.Command] = []
