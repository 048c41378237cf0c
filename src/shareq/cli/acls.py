"""``shareq acls list|add|remove``: Kafka's ACLs (``kafka-acls.sh``), through a running broker."""

from __future__ import annotations

import click

from shareq.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

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


def _resource(
    topic: str | None, group: str | None, transactional_id: str | None, cluster: bool
) -> tuple[ResourceType, str] | None:
    chosen = [
        (kind, name)
        for kind, name in (
            (ResourceType.TOPIC, topic),
            (ResourceType.GROUP, group),
            (ResourceType.TRANSACTIONAL_ID, transactional_id),
            (ResourceType.CLUSTER, CLUSTER_NAME if cluster else None),
        )
        if name is not None
    ]
    if len(chosen) > 1:
        raise click.UsageError("give one of --topic, --group, --transactional-id, --cluster")
    return chosen[0] if chosen else None


def _resource_options(function: click.decorators.FC) -> click.decorators.FC:
    for option in (
        click.option("--cluster", is_flag=True, help="the cluster resource"),
        click.option("--transactional-id", default=None),
        click.option("--group", default=None),
        click.option("--topic", default=None),
        click.option(
            "--resource-pattern-type",
            type=click.Choice(["literal", "prefixed", "match", "any"], case_sensitive=False),
            default=None,
        ),
    ):
        function = option(function)
    return function


_OPERATIONS = [o.name.lower() for o in Operation if o not in (Operation.UNKNOWN, Operation.ANY)]


@click.group()
def acls() -> None:
    """Access control lists (the broker needs authorizer.class.name set)."""


@acls.command("add")
@_resource_options
@click.option("--allow-principal", "allow", multiple=True, help="User:name (repeatable)")
@click.option("--deny-principal", "deny", multiple=True, help="User:name (repeatable)")
@click.option(
    "--operation", "operations", multiple=True, type=click.Choice(_OPERATIONS, case_sensitive=False)
)
@click.option("--host", default="*", show_default=True)
@bootstrap_option
@command_config_option
@friendly_errors
def add_acls(
    resource_pattern_type: str | None,
    topic: str | None,
    group: str | None,
    transactional_id: str | None,
    cluster: bool,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    operations: tuple[str, ...],
    host: str,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """Allow or deny principals operations on one resource."""
    resource = _resource(topic, group, transactional_id, cluster)
    if resource is None or not operations or not (allow or deny):
        raise click.UsageError("give a resource, at least one --operation and a principal")
    pattern = PatternType[(resource_pattern_type or "literal").upper()]
    bindings = [
        AclBinding(resource[0], resource[1], pattern, principal, host, Operation[op.upper()], permission)
        for permission, principals in ((Permission.ALLOW, allow), (Permission.DENY, deny))
        for principal in principals
        for op in operations
    ]
    with admin_client(bootstrap, client_security(command_config)) as admin:
        admin.create_acls(bindings)
    click.echo(f"added {len(bindings)} ACL binding(s)")


def _filter(
    resource_pattern_type: str | None,
    topic: str | None,
    group: str | None,
    transactional_id: str | None,
    cluster: bool,
    principal: str | None,
) -> AclFilter:
    resource = _resource(topic, group, transactional_id, cluster)
    default_pattern = "literal" if resource is not None else "any"
    return AclFilter(
        resource[0] if resource else ResourceType.ANY,
        resource[1] if resource else None,
        PatternType[(resource_pattern_type or default_pattern).upper()],
        principal,
        None,
        Operation.ANY,
        Permission.ANY,
    )


@acls.command("list")
@_resource_options
@click.option("--principal", default=None)
@bootstrap_option
@command_config_option
@json_option
@friendly_errors
def list_acls(
    resource_pattern_type: str | None,
    topic: str | None,
    group: str | None,
    transactional_id: str | None,
    cluster: bool,
    principal: str | None,
    bootstrap: str,
    command_config: str | None,
    as_json: bool,
) -> None:
    """Bindings matching the filter (all of them without one)."""
    acl_filter = _filter(resource_pattern_type, topic, group, transactional_id, cluster, principal)
    with admin_client(bootstrap, client_security(command_config)) as admin:
        found = admin.describe_acls(acl_filter)
    if as_json:
        emit_json([b.to_json() for b in found])
        return
    rows = [
        (
            b.resource_type.name,
            b.name,
            b.pattern_type.name,
            b.principal,
            b.host,
            b.operation.name,
            b.permission.name,
        )
        for b in found
    ]
    click.echo(table(["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"], rows))


@acls.command("remove")
@_resource_options
@click.option("--principal", default=None)
@bootstrap_option
@command_config_option
@friendly_errors
def remove_acls(
    resource_pattern_type: str | None,
    topic: str | None,
    group: str | None,
    transactional_id: str | None,
    cluster: bool,
    principal: str | None,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """Remove the bindings matching the filter."""
    acl_filter = _filter(resource_pattern_type, topic, group, transactional_id, cluster, principal)
    if acl_filter.resource_type is ResourceType.ANY and principal is None:
        raise click.UsageError("give a resource or --principal (refusing to remove every ACL)")
    with admin_client(bootstrap, client_security(command_config)) as admin:
        removed = admin.delete_acls([acl_filter])
    click.echo(f"removed {len(removed)} ACL binding(s)")
