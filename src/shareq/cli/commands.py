"""The list of subcommands; each module defines one click command (or group)."""

from __future__ import annotations

import click

from shareq.cli.acls import acls
from shareq.cli.configs import configs
from shareq.cli.consume import consume
from shareq.cli.demo import demo
from shareq.cli.dlq import dlq
from shareq.cli.groups import groups
from shareq.cli.offsets import offsets
from shareq.cli.produce import produce
from shareq.cli.quotas import quotas
from shareq.cli.records import records
from shareq.cli.scenario import scenario
from shareq.cli.serve import serve
from shareq.cli.topics import topics
from shareq.cli.transactions import transactions
from shareq.cli.users import users

ALL: list[click.Command] = [
    serve,
    scenario,
    groups,
    offsets,
    configs,
    quotas,
    users,
    acls,
    topics,
    transactions,
    records,
    produce,
    consume,
    dlq,
    demo,
]
