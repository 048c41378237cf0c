"""``shareq users add|list|remove``: SCRAM credentials.

Through a running broker (AlterUserScramCredentials; the password is salted and hashed by the
client), or with ``--data-dir`` straight into a stopped broker's data directory, which is how the
first administrator gets a credential (as ``kafka-storage format --add-scram`` does for Kafka).
"""

from __future__ import annotations

from pathlib import Path

import click

from shareq.security.scram import DEFAULT_ITERATIONS, ScramMechanism, credential_from_password

from ._common import (
    admin_client,
    bootstrap_option,
    client_security,
    command_config_option,
    emit_json,
    friendly_errors,
    json_option,
    table,
)

_MECHANISM = click.option(
    "--mechanism",
    type=click.Choice(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
    default="SCRAM-SHA-512",
    show_default=True,
)
_DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="write to a stopped broker's data directory instead of asking a running broker",
)


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.by_name(name)
    assert mechanism is not None
    return mechanism


@click.group()
def users() -> None:
    """SCRAM users: add (or change a password), list, remove."""


@users.command("add")
@click.argument("user")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
@_MECHANISM
@click.option("--iterations", type=int, default=DEFAULT_ITERATIONS, show_default=True)
@_DATA_DIR
@bootstrap_option
@command_config_option
@friendly_errors
def add_user(
    user: str,
    password: str,
    mechanism: str,
    iterations: int,
    data_dir: Path | None,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """Give USER a SCRAM credential for the mechanism (replacing one it had)."""
    if data_dir is not None:
        from shareq.config import BrokerConfig
        from shareq.server.security import SecurityServices

        data_dir.mkdir(parents=True, exist_ok=True)
        services = SecurityServices(data_dir, BrokerConfig.from_mapping({}))
        services.credentials.upsert(
            user, credential_from_password(_mechanism(mechanism), password, iterations)
        )
        services.save()
    else:
        with admin_client(bootstrap, client_security(command_config)) as admin:
            admin.upsert_scram_credential(user, password, _mechanism(mechanism), iterations)
    click.echo(f"{mechanism} credential of {user} saved")


@users.command("remove")
@click.argument("user")
@_MECHANISM
@bootstrap_option
@command_config_option
@friendly_errors
def remove_user(user: str, mechanism: str, bootstrap: str, command_config: str | None) -> None:
    """Delete USER's credential for the mechanism."""
    with admin_client(bootstrap, client_security(command_config)) as admin:
        admin.delete_scram_credential(user, _mechanism(mechanism))
    click.echo(f"{mechanism} credential of {user} removed")


@users.command("list")
@bootstrap_option
@command_config_option
@json_option
@friendly_errors
def list_users(bootstrap: str, command_config: str | None, as_json: bool) -> None:
    """Users with SCRAM credentials, their mechanisms and iteration counts."""
    with admin_client(bootstrap, client_security(command_config)) as admin:
        found = admin.describe_scram_credentials()
    rows = [(user, m.mechanism_name, i) for user, infos in sorted(found.items()) for m, i in infos]
    if as_json:
        emit_json([{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows])
    else:
        click.echo(table(["USER", "MECHANISM", "ITERATIONS"], rows))
