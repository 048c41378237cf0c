"""CreateAcls, DescribeAcls and DeleteAcls over the broker's ``Authorizer``. Without
``authorizer.class.name`` they answer SECURITY_DISABLED, as Kafka does; bindings are saved to
``security.json`` after each change, so they survive restarts."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from shareq.security.acl import (
    AclBinding,
    AclError,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

from ..context import NO_THROTTLE, RequestContext

NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"  # Kafka words DescribeAcls differently


def _authorizer(ctx: RequestContext) -> Authorizer | None:
    security = ctx.broker.security
    return None if security is None else security.authorizer


def _enum(kind: type[Any], value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN


def _filter(f: Any, name_field: str) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, int(f.resource_type_filter)),
        getattr(f, name_field),
        _enum(PatternType, int(getattr(f, "pattern_type_filter", PatternType.LITERAL))),
        f.principal_filter,
        f.host_filter,
        _enum(Operation, int(f.operation)),
        _enum(Permission, int(f.permission_type)),
    )


def handle_create_acls(request: Any, ctx: RequestContext) -> Any:
    authorizer = _authorizer(ctx)
    results = []
    changed = False
    for creation in request.creations:
        if authorizer is None:
            results.append(
                ctx.build(
                    "AclCreationResult", error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER
                )
            )
            continue
        binding = AclBinding(
            _enum(ResourceType, int(creation.resource_type)),
            creation.resource_name,
            _enum(PatternType, int(getattr(creation, "resource_pattern_type", PatternType.LITERAL))),
            creation.principal,
            creation.host,
            _enum(Operation, int(creation.operation)),
            _enum(Permission, int(creation.permission_type)),
        )
        try:
            authorizer.add(binding)
        except AclError as error:
            results.append(
                ctx.build("AclCreationResult", error_code=ErrorCode.invalid_request, error_message=str(error))
            )
            continue
        changed = True
        results.append(ctx.build("AclCreationResult", error_code=ErrorCode.none, error_message=None))
    if changed:
        assert ctx.broker.security is not None
        ctx.broker.security.save()
    return ctx.build(throttle_time=NO_THROTTLE, results=tuple(results))


def handle_describe_acls(request: Any, ctx: RequestContext) -> Any:
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return ctx.build(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.security_disabled,
            error_message=NO_AUTHORIZER_DESCRIBE,
            resources=(),
        )
    try:
        found = authorizer.describe(_filter(request, "resource_name_filter"))
    except AclError as error:
        return ctx.build(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.invalid_request,
            error_message=str(error),
            resources=(),
        )
    by_resource: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = defaultdict(list)
    for binding in found:
        by_resource[(binding.resource_type, binding.name, binding.pattern_type)].append(binding)
    resources = tuple(
        ctx.build(
            "DescribeAclsResource",
            resource_type=int(rtype),
            resource_name=name,
            pattern_type=int(ptype),
            acls=tuple(
                ctx.build(
                    "AclDescription",
                    principal=b.principal,
                    host=b.host,
                    operation=int(b.operation),
                    permission_type=int(b.permission),
                )
                for b in bindings
            ),
        )
        for (rtype, name, ptype), bindings in by_resource.items()
    )
    return ctx.build(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, resources=resources
    )


def handle_delete_acls(request: Any, ctx: RequestContext) -> Any:
    authorizer = _authorizer(ctx)
    results = []
    changed = False
    for f in request.filters:
        if authorizer is None:
            results.append(
                ctx.build(
                    "DeleteAclsFilterResult",
                    error_code=ErrorCode.security_disabled,
                    error_message=NO_AUTHORIZER,
                    matching_acls=(),
                )
            )
            continue
        try:
            removed = authorizer.delete(_filter(f, "resource_name_filter"))
        except AclError as error:
            results.append(
                ctx.build(
                    "DeleteAclsFilterResult",
                    error_code=ErrorCode.invalid_request,
                    error_message=str(error),
                    matching_acls=(),
                )
            )
            continue
        changed = changed or bool(removed)
        results.append(
            ctx.build(
                "DeleteAclsFilterResult",
                error_code=ErrorCode.none,
                error_message=None,
                matching_acls=tuple(
                    ctx.build(
                        "DeleteAclsMatchingAcl",
                        error_code=ErrorCode.none,
                        error_message=None,
                        resource_type=int(b.resource_type),
                        resource_name=b.name,
                        pattern_type=int(b.pattern_type),
                        principal=b.principal,
                        host=b.host,
                        operation=int(b.operation),
                        permission_type=int(b.permission),
                    )
                    for b in removed
                ),
            )
        )
    if changed:
        assert ctx.broker.security is not None
        ctx.broker.security.save()
    return ctx.build(throttle_time=NO_THROTTLE, filter_results=tuple(results))


HANDLERS = {
    DESCRIBE_ACLS: (VersionRange(1, 3), handle_describe_acls),
    CREATE_ACLS: (VersionRange(1, 3), handle_create_acls),
    DELETE_ACLS: (VersionRange(1, 3), handle_delete_acls),
}
