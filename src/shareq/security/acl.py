"""Kafka's ACL model and the decision of its standard authorizer, without I/O.

A binding says: *principal* from *host* is ALLOWed or DENYed *operation* on resources of a type
whose name equals (LITERAL), starts with (PREFIXED) or is the wildcard ``*``. A request is
allowed for a super user; otherwise any matching DENY refuses it, then a matching ALLOW grants it
(READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL
implies everything). A resource with no binding at all is allowed only under
``allow.everyone.if.no.acl.found``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}

OPERATIONS_OF: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        Operation.READ,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE, Operation.TWO_PHASE_COMMIT),
}


class AclError(ValueError):
    """A binding or filter Kafka refuses (answered as INVALID_REQUEST with this message)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def to_json(self) -> dict[str, Any]:
        return {
            "resource_type": self.resource_type.name,
            "name": self.name,
            "pattern_type": self.pattern_type.name,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.name,
            "permission": self.permission.name,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AclBinding:
        return cls(
            ResourceType[data["resource_type"]],
            data["name"],
            PatternType[data["pattern_type"]],
            data["principal"],
            data["host"],
            Operation[data["operation"]],
            Permission[data["permission"]],
        )


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter: ``None`` and the ANY values match everything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        if not self._matches_pattern(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation is not Operation.ANY and self.operation != binding.operation:
            return False
        return self.permission is Permission.ANY or self.permission == binding.permission

    def _matches_pattern(self, binding: AclBinding) -> bool:
        pattern = self.pattern_type
        if pattern is PatternType.ANY:
            return self.name is None or self.name == binding.name
        if pattern is PatternType.MATCH:
            if self.name is None:
                return True
            if binding.pattern_type is PatternType.LITERAL:
                return binding.name in (self.name, WILDCARD)
            return binding.pattern_type is PatternType.PREFIXED and self.name.startswith(binding.name)
        if pattern != binding.pattern_type:
            return False
        return self.name is None or self.name == binding.name

    def validate(self) -> None:
        for value, enum in (
            (self.resource_type, ResourceType.UNKNOWN),
            (self.pattern_type, PatternType.UNKNOWN),
            (self.operation, Operation.UNKNOWN),
            (self.permission, Permission.UNKNOWN),
        ):
            if value == enum:
                raise AclError(f"Filter contains UNKNOWN elements: {type(value).__name__}")


def validate_binding(binding: AclBinding) -> None:
    """Kafka's checks on a new binding (``AclControlManager.validateNewAcl``)."""
    if binding.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise AclError(f"Invalid resourceType {binding.resource_type.name}")
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid patternType {binding.pattern_type.name}")
    if binding.operation in (Operation.ANY, Operation.UNKNOWN):
        raise AclError(f"Invalid operation {binding.operation.name}")
    if binding.permission in (Permission.ANY, Permission.UNKNOWN):
        raise AclError(f"Invalid permissionType {binding.permission.name}")
    if not binding.name:
        raise AclError("Resource name should not be empty")
    if ":" not in binding.principal:
        raise AclError(
            f"Could not parse principal from `{binding.principal}` (no colon is present separating the "
            "principal type from the principal name)"
        )
    if binding.resource_type is ResourceType.CLUSTER and binding.name != CLUSTER_NAME:
        raise AclError("The only valid name for the CLUSTER resource is kafka-cluster")


class Authorizer:
    """The bindings and the decision (``authorize``); the shell persists ``bindings`` on change."""

    def __init__(
        self,
        bindings: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.bindings: list[AclBinding] = list(dict.fromkeys(bindings))
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.generation = 0
        """Bumped whenever a binding is added or removed (cached decisions depend on them)."""

    # -- decision -------------------------------------------------------------------------------

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        matching = [b for b in self.bindings if b.resource_type == resource_type and _covers(b, name)]
        if not matching:
            return self.allow_if_no_acl
        applicable = [b for b in matching if _applies(b, principal, host)]
        for binding in applicable:
            if binding.permission is Permission.DENY and binding.operation in (operation, Operation.ALL):
                return False
        implied = _IMPLIED_BY.get(operation, frozenset({operation}))
        return any(
            b.permission is Permission.ALLOW and (b.operation is Operation.ALL or b.operation in implied)
            for b in applicable
        )

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The 32-bit field of Metadata and the describe APIs: bit ``n`` for operation ``n``."""
        field = 0
        for operation in OPERATIONS_OF.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                field |= 1 << int(operation)
        return field

    # -- bindings -------------------------------------------------------------------------------

    def add(self, binding: AclBinding) -> None:
        validate_binding(binding)
        if binding not in self.bindings:
            self.bindings.append(binding)
            self.generation += 1

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        acl_filter.validate()
        return [b for b in self.bindings if acl_filter.matches(b)]

    def delete(self, acl_filter: AclFilter) -> list[AclBinding]:
        acl_filter.validate()
        removed = [b for b in self.bindings if acl_filter.matches(b)]
        if removed:
            gone = set(removed)
            self.bindings = [b for b in self.bindings if b not in gone]
            self.generation += 1
        return removed


def _covers(binding: AclBinding, name: str) -> bool:
    if binding.pattern_type is PatternType.PREFIXED:
        return name.startswith(binding.name)
    return binding.name == name or binding.name == WILDCARD


def _applies(binding: AclBinding, principal: str, host: str) -> bool:
    if binding.principal != principal and binding.principal != WILDCARD_PRINCIPAL:
        return False
    return binding.host == WILDCARD or binding.host == host


def parse_super_users(text: str | None) -> list[str]:
    """``super.users`` is a semicolon-separated list of principals (``User:admin;User:ops``)."""
    return [item.strip() for item in (text or "").split(";") if item.strip()]
