"""``shareq configs describe|alter``: dynamic configs of a share group, a topic or the broker."""

from __future__ import annotations

import click

from shareq.client import Admin, ConfigEntry, ConfigResource, ResourceType

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


def _resource(
    admin: Admin, group: str | None, topic: str | None, broker: bool, cluster_default: bool
) -> ConfigResource:
    chosen = [group is not None, topic is not None, broker, cluster_default]
    if sum(chosen) != 1:
        raise click.UsageError("give exactly one of --group, --topic, --broker or --cluster-default")
    if group is not None:
        return ConfigResource(ResourceType.GROUP, group)
    if topic is not None:
        return ConfigResource(ResourceType.TOPIC, topic)
    if cluster_default:
        return ConfigResource(ResourceType.BROKER, "")
    admin.cluster.refresh_metadata(())
    return ConfigResource(ResourceType.BROKER, str(min(admin.cluster.cache.brokers)))


_BROKER_HELP = "the broker's own configs"
_DEFAULT_HELP = "the cluster-wide broker defaults (what every broker falls back to)"


@configs.command("describe")
@click.option("--group", help="a share group's configs")
@click.option("--topic", help="a topic's configs")
@click.option("--broker", is_flag=True, help=_BROKER_HELP)
@click.option("--cluster-default", is_flag=True, help=_DEFAULT_HELP)
@bootstrap_option
@json_option
@friendly_errors
def describe_configs(
    group: str | None, topic: str | None, broker: bool, cluster_default: bool, bootstrap: str, as_json: bool
) -> None:
    """Every config of the resource with its value, where it comes from and what it falls back to."""
    with admin_client(bootstrap) as admin:
        resource = _resource(admin, group, topic, broker, cluster_default)
        entries = admin.describe_configs([resource], include_synonyms=True)[resource]
    rows = [entries[name] for name in sorted(entries)]
    if as_json:
        emit_json(
            {
                e.name: {
                    "value": e.value,
                    "source": e.source.name,
                    "default": e.is_default,
                    "synonyms": [
                        {"name": y.name, "value": y.value, "source": y.source.name} for y in e.synonyms
                    ],
                }
                for e in rows
            }
        )
        return
    click.echo(
        table(
            ["NAME", "VALUE", "SOURCE", "FALLS BACK TO"],
            [[e.name, e.value, e.source.name, _fallbacks(e)] for e in rows],
        )
    )


def _fallbacks(entry: ConfigEntry) -> str:
    """The synonyms after the entry's own layer, as ``SOURCE:name=value``."""
    rest = (
        entry.synonyms[1:] if entry.synonyms and entry.synonyms[0].source == entry.source else entry.synonyms
    )
    return ", ".join(f"{y.source.name}:{y.name}={y.value}" for y in rest)


@configs.command("alter")
@click.option("--group", help="a share group's configs")
@click.option("--topic", help="a topic's configs")
@click.option("--broker", is_flag=True, help=_BROKER_HELP)
@click.option("--cluster-default", is_flag=True, help=_DEFAULT_HELP)
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
    cluster_default: bool,
    sets: tuple[str, ...],
    deletes: tuple[str, ...],
    validate_only: bool,
    bootstrap: str,
    as_json: bool,
) -> None:
    """Set and delete config overrides (all at once; an invalid value changes nothing)."""
    changes: dict[str, str | None] = dict(parse_pairs(sets, "--set"))
    for name in deletes:
        if name in changes:
            raise click.UsageError(f"{name} is both set and deleted")
        changes[name] = None
    if sum([group is not None, topic is not None, broker, cluster_default]) == 1 and not changes:
        raise click.UsageError("nothing to change: give --set KEY=VALUE or --delete KEY")
    with admin_client(bootstrap) as admin:
        resource = _resource(admin, group, topic, broker, cluster_default)
        admin.alter_configs(resource, changes, validate_only=validate_only)
    what = f"{resource.type.name.lower()} {resource.name}".rstrip() if resource.name else "cluster default"
    if as_json:
        emit_json({"resource": what, "changes": changes, "validate_only": validate_only})
        return
    verb = "validated" if validate_only else "altered"
    click.echo(f"{verb} {len(changes)} config(s) of {what}")
