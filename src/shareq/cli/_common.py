"""Shared pieces of the client-side verbs: ``--bootstrap``/``--json``, error reporting and tables.

Every verb talks to a broker through ``shareq.client``. Failures a user can cause (an unknown
group, a group with members, an unreachable broker) end the command with one readable line on
stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import click
from kio.schema.errors import ErrorCode

from shareq.client import Admin, BrokerConnectionError, ClientError, ClientSecurity, KafkaError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
REQUEST_TIMEOUT_S = 15.0

P = ParamSpec("P")
R = TypeVar("R")

_HINTS: dict[ErrorCode, str] = {
    ErrorCode.group_id_not_found: "the group does not exist",
    ErrorCode.non_empty_group: "the group still has active members; stop its consumers first",
    ErrorCode.unknown_topic_or_partition: "no such topic or partition",
    ErrorCode.invalid_config: "invalid configuration",
    ErrorCode.topic_already_exists: "the topic already exists",
    ErrorCode.invalid_group_id: "invalid group id",
    ErrorCode.coordinator_not_available: "the group coordinator is not available",
}


def bootstrap_option(function: Callable[P, R]) -> Callable[P, R]:
    return click.option(
        "--bootstrap",
        "-b",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        envvar="SHAREQ_BOOTSTRAP",
        help="broker host:port",
    )(function)


def json_option(function: Callable[P, R]) -> Callable[P, R]:
    return click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")(function)


def describe_error(error: BaseException) -> str:
    """One line for a client failure: what went wrong, in the user's terms."""
    if isinstance(error, KafkaError):
        hint = _HINTS.get(error.code) or error.code.name.lower().replace("_", " ")
        where = f"{error.context}: " if error.context else ""
        return f"{where}{error.message}: {hint}" if error.message else f"{where}{hint}"
    if isinstance(error, BrokerConnectionError):
        return f"cannot reach the broker: {error}"
    return str(error)


def friendly_errors(function: Callable[P, R]) -> Callable[P, R]:
    """Turn client errors into ``click.ClickException`` (stderr, exit status 1)."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except (ClientError, OSError) as error:
            raise click.ClickException(describe_error(error)) from None

    return wrapper


def command_config_option(function: Callable[P, R]) -> Callable[P, R]:
    return click.option(
        "--command-config",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="client properties for a secured listener (security.protocol, sasl.*, ssl.*)",
    )(function)


def client_security(path: str | None) -> ClientSecurity | None:
    """A Kafka/librdkafka client properties file as ``ClientSecurity``: librdkafka's names, or the
    Java client's ``sasl.jaas.config`` (username/password) and PEM ``ssl.truststore.location``."""
    if path is None:
        return None
    config: dict[str, str] = {}
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line and not line.startswith(("#", "!")) and "=" in line:
                key, _, value = line.partition("=")
                config[key.strip()] = value.strip()
    jaas = config.get("sasl.jaas.config", "")
    for field in ("username", "password"):
        match = re.search(rf'{field}="([^"]*)"', jaas)
        if match and f"sasl.{field}" not in config:
            config[f"sasl.{field}"] = match.group(1)
    if "ssl.truststore.location" in config and "ssl.ca.location" not in config:
        config["ssl.ca.location"] = config["ssl.truststore.location"]
    return ClientSecurity.from_config(config)


@contextmanager
def admin_client(bootstrap: str, security: ClientSecurity | None = None) -> Iterator[Admin]:
    admin = Admin(bootstrap, client_id="shareq-cli", request_timeout=REQUEST_TIMEOUT_S, security=security)
    try:
        yield admin
    finally:
        admin.close()


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain left-aligned text table (``-`` for None), like the Kafka shell tools print."""
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def parse_pairs(pairs: Sequence[str], option: str) -> dict[str, str]:
    """``k=v`` options into a dict; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        out[name.strip()] = value
    return out
