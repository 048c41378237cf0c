"""Admin requests for ACLs and SCRAM credentials (CreateAcls, DescribeAcls, DeleteAcls,
AlterUserScramCredentials, DescribeUserScramCredentials); the ACL types are the broker's own model."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from shareq.protocol.api_keys import (
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
)
from shareq.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from shareq.security.scram import DEFAULT_ITERATIONS, ScramMechanism, salted_password

from .connection import BrokerConnection
from .errors import raise_for


def create_acls(conn: BrokerConnection, bindings: Sequence[AclBinding]) -> None:
    _v, m = conn.module(CREATE_ACLS)
    request = m.CreateAclsRequest(
        creations=tuple(
            m.AclCreation(
                resource_type=int(b.resource_type),
                resource_name=b.name,
                resource_pattern_type=int(b.pattern_type),
                principal=b.principal,
                host=b.host,
                operation=int(b.operation),
                permission_type=int(b.permission),
            )
            for b in bindings
        )
    )
    for result in conn.send(request).results:
        raise_for(result.error_code, result.error_message, context="CreateAcls")


def _filter_fields(f: AclFilter) -> dict[str, object]:
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission),
    }


def describe_acls(conn: BrokerConnection, acl_filter: AclFilter) -> list[AclBinding]:
    _v, m = conn.module(DESCRIBE_ACLS)
    response = conn.send(m.DescribeAclsRequest(**_filter_fields(acl_filter)))
    raise_for(response.error_code, response.error_message, context="DescribeAcls")
    return [
        AclBinding(
            ResourceType(int(r.resource_type)),
            r.resource_name,
            PatternType(int(r.pattern_type)),
            a.principal,
            a.host,
            Operation(int(a.operation)),
            Permission(int(a.permission_type)),
        )
        for r in response.resources
        for a in r.acls
    ]


def delete_acls(conn: BrokerConnection, filters: Sequence[AclFilter]) -> list[AclBinding]:
    _v, m = conn.module(DELETE_ACLS)
    response = conn.send(
        m.DeleteAclsRequest(filters=tuple(m.DeleteAclsFilter(**_filter_fields(f)) for f in filters))
    )
    removed: list[AclBinding] = []
    for result in response.filter_results:
        raise_for(result.error_code, result.error_message, context="DeleteAcls")
        removed.extend(
            AclBinding(
                ResourceType(int(a.resource_type)),
                a.resource_name,
                PatternType(int(a.pattern_type)),
                a.principal,
                a.host,
                Operation(int(a.operation)),
                Permission(int(a.permission_type)),
            )
            for a in result.matching_acls
        )
    return removed


def upsert_scram_credential(
    conn: BrokerConnection,
    user: str,
    password: str,
    mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_512,
    iterations: int = DEFAULT_ITERATIONS,
) -> None:
    """The password is salted and hashed here; only the salted password crosses the wire."""
    _v, m = conn.module(ALTER_USER_SCRAM_CREDENTIALS)
    salt = secrets.token_bytes(32)
    request = m.AlterUserScramCredentialsRequest(
        deletions=(),
        upsertions=(
            m.ScramCredentialUpsertion(
                name=user,
                mechanism=int(mechanism),
                iterations=iterations,
                salt=salt,
                salted_password=salted_password(mechanism, password.encode(), salt, iterations),
            ),
        ),
    )
    for result in conn.send(request).results:
        raise_for(result.error_code, result.error_message, context="AlterUserScramCredentials")


def delete_scram_credential(conn: BrokerConnection, user: str, mechanism: ScramMechanism) -> None:
    _v, m = conn.module(ALTER_USER_SCRAM_CREDENTIALS)
    request = m.AlterUserScramCredentialsRequest(
        deletions=(m.ScramCredentialDeletion(name=user, mechanism=int(mechanism)),), upsertions=()
    )
    for result in conn.send(request).results:
        raise_for(result.error_code, result.error_message, context="AlterUserScramCredentials")


def describe_scram_credentials(
    conn: BrokerConnection, users: Sequence[str] | None = None
) -> dict[str, list[tuple[ScramMechanism, int]]]:
    _v, m = conn.module(DESCRIBE_USER_SCRAM_CREDENTIALS)
    request = m.DescribeUserScramCredentialsRequest(
        users=None if users is None else tuple(m.UserName(name=u) for u in users)
    )
    response = conn.send(request)
    raise_for(response.error_code, response.error_message, context="DescribeUserScramCredentials")
    out: dict[str, list[tuple[ScramMechanism, int]]] = {}
    for result in response.results:
        raise_for(result.error_code, result.error_message, context="DescribeUserScramCredentials")
        out[result.user] = [
            (ScramMechanism(int(c.mechanism)), int(c.iterations)) for c in result.credential_infos
        ]
    return out
