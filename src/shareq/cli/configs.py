"""``shareq configs describe|alter``: dynamic configs of a share group, a topic or the broker."""

from __future__ import annotations

import click

from shareq.client import ConfigResource, ResourceType

from ._common import (
    admin_client,
    bootstrap_option,
    emit_json,
    friendly_errors,
    json_option,
    parse_pairs,
    table,
)


@click.group()
def configs() -> None:
    """Describe and alter group, topic and broker configs."""


def _resource(group: str | None, topic: str | None, broker: bool) -> ConfigResource:
    chosen = [group is not None, topic is not None, broker]
    if sum(chosen) != 1:
        raise click.UsageError("give exactly one of --group, --topic or --broker")
    if group is not None:
        return ConfigResource(ResourceType.GROUP, group)
    if topic is not None:
        return ConfigResource(ResourceType.TOPIC, topic)
    return ConfigResource(ResourceType.BROKER, "")


@configs.command("describe")
@click.option("--group", help="a share group's configs")
@click.option("--topic", help="a topic's configs")
@click.option("--broker", is_flag=True, help="the broker's configs")
@bootstrap_option
@json_option
@friendly_errors
def describe_configs(
    group: str | None, topic: str | None, broker: bool, bootstrap: str, as_json: bool
) -> None:
    """Every config of the resource with its value and where it comes from."""
    resource = _resource(group, topic, broker)
    with admin_client(bootstrap) as admin:
        entries = admin.describe_configs([resource])[resource]
    rows = [entries[name] for name in sorted(entries)]
    if as_json:
        emit_json(
            {e.name: {"value": e.value, "source": e.source.name, "default": e.is_default} for e in rows}
        )
        return
    click.echo(table(["NAME", "VALUE", "SOURCE"], [[e.name, e.value, e.source.name] for e in rows]))


@configs.command("alter")
@click.option("--group", help="a share group's configs")
@click.option("--topic", help="a topic's configs")
@click.option("--broker", is_flag=True, help="the broker's configs")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="set a config")
@click.option("--delete", "deletes", multiple=True, metavar="KEY", help="remove an override")
@click.option("--validate-only", is_flag=True, help="check the change without applying it")
@bootstrap_option
@json_option
@friendly_errors
def alter_configs(
    group: str | None,
    topic: str | None,
    broker: bool,
    sets: tuple[str, ...],
    deletes: tuple[str, ...],
    validate_only: bool,
    bootstrap: str,
    as_json: bool,
) -> None:
    """Set and delete config overrides (all at once; an invalid value changes nothing)."""
    resource = _resource(group, topic, broker)
    changes: dict[str, str | None] = dict(parse_pairs(sets, "--set"))
    for name in deletes:
        if name in changes:
            raise click.UsageError(f"{name} is both set and deleted")
        changes[name] = None
    if not changes:
        raise click.UsageError("nothing to change: give --set KEY=VALUE or --delete KEY")
    with admin_client(bootstrap) as admin:
        admin.alter_configs(resource, changes, validate_only=validate_only)
    what = f"{resource.type.name.lower()} {resource.name}".rstrip()
    if as_json:
        emit_json({"resource": what, "changes": changes, "validate_only": validate_only})
        return
    verb = "validated" if validate_only else "altered"
    click.echo(f"{verb} {len(changes)} config(s) of {what}")
