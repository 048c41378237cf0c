"""``shareq quotas describe|alter``: client quotas per client id, user or ip (``*`` = the default)."""

from __future__ import annotations

import click

from shareq.client import QuotaFilter, QuotaMatch

from ._common import (
    admin_client,
    bootstrap_option,
    emit_json,
    friendly_errors,
    json_option,
    parse_pairs,
    table,
)

DEFAULT = "*"


def _entity(client_id: str | None, user: str | None, ip: str | None) -> dict[str, str | None]:
    entity = {
        kind: (None if name == DEFAULT else name)
        for kind, name in (("user", user), ("client-id", client_id), ("ip", ip))
        if name is not None
    }
    if not entity:
        raise click.UsageError("give --client-id, --user and/or --ip (use '*' for the default)")
    return entity


def _label(entity: dict[str, str | None]) -> str:
    return ", ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in entity.items())


@click.group()
def quotas() -> None:
    """Describe and alter client quotas (producer_byte_rate, consumer_byte_rate, ...)."""


_CLIENT = click.option("--client-id", help="a client id, or '*' for the default client id")
_USER = click.option("--user", help="a user principal, or '*' for the default user")
_IP = click.option("--ip", help="an ip address, or '*' for the default ip")


@quotas.command("describe")
@_CLIENT
@_USER
@_IP
@bootstrap_option
@json_option
@friendly_errors
def describe_quotas(
    client_id: str | None, user: str | None, ip: str | None, bootstrap: str, as_json: bool
) -> None:
    """Quotas of the entities matching the given names (all entities when none is given)."""
    components = [
        QuotaFilter(kind, QuotaMatch.DEFAULT)
        if name == DEFAULT
        else QuotaFilter(kind, QuotaMatch.EXACT, name)
        for kind, name in (("user", user), ("client-id", client_id), ("ip", ip))
        if name is not None
    ]
    with admin_client(bootstrap) as admin:
        found = admin.describe_client_quotas(components, strict=bool(components))
    rows = sorted((_label(dict(q.entity)), key, value) for q in found for key, value in q.values.items())
    if as_json:
        emit_json([{"entity": dict(q.entity), "values": dict(q.values)} for q in found])
        return
    click.echo(table(["ENTITY", "QUOTA", "VALUE"], rows) if rows else "no quotas")


@quotas.command("alter")
@_CLIENT
@_USER
@_IP
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="set a quota")
@click.option("--delete", "deletes", multiple=True, metavar="KEY", help="remove a quota")
@click.option("--validate-only", is_flag=True, help="check the change without applying it")
@bootstrap_option
@json_option
@friendly_errors
def alter_quotas(
    client_id: str | None,
    user: str | None,
    ip: str | None,
    sets: tuple[str, ...],
    deletes: tuple[str, ...],
    validate_only: bool,
    bootstrap: str,
    as_json: bool,
) -> None:
    """Set and remove quotas of one entity (all at once; an invalid value changes nothing)."""
    entity = _entity(client_id, user, ip)
    changes: dict[str, float | None] = {}
    for key, raw in parse_pairs(sets, "--set").items():
        try:
            changes[key] = float(raw)
        except ValueError:
            raise click.BadParameter(f"{key}: {raw!r} is not a number", param_hint="--set") from None
    for key in deletes:
        if key in changes:
            raise click.UsageError(f"{key} is both set and deleted")
        changes[key] = None
    if not changes:
        raise click.UsageError("nothing to change: give --set KEY=VALUE or --delete KEY")
    with admin_client(bootstrap) as admin:
        admin.alter_client_quotas([(entity, changes)], validate_only=validate_only)
    if as_json:
        emit_json({"entity": entity, "changes": changes, "validate_only": validate_only})
        return
    click.echo(f"{'validated' if validate_only else 'altered'} {len(changes)} quota(s) of {_label(entity)}")
