"""DescribeClientQuotas and AlterClientQuotas: quotas per user / client-id / ip, kept in the
broker's registry (``topics.json``) and enforced by ``server/quotas.py``. (Kafka's
``ConfigCommand --describe --entity-type users`` also asks DescribeUserScramCredentials, served by
``scram_credentials``.)"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS
from shareq.quota import ClientQuotas, Entity, FilterComponent, QuotaError, make_entity

from ..context import NO_THROTTLE, RequestContext


def handle_describe_client_quotas(request: Any, ctx: RequestContext) -> Any:
    components = [FilterComponent(c.entity_type, int(c.match_type), c.match) for c in request.components]
    try:
        found = ctx.broker.quotas.quotas.describe(components, strict=bool(request.strict))
    except QuotaError as error:
        return ctx.build(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode[error.error],
            error_message=str(error),
            entries=None,
        )
    entries = tuple(
        ctx.build(
            "EntryData",
            entity=_entity(ctx, entity),
            values=tuple(ctx.build("ValueData", key=k, value=v) for k, v in sorted(values.items())),
        )
        for entity, values in found
    )
    return ctx.build(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, entries=entries
    )


def handle_alter_client_quotas(request: Any, ctx: RequestContext) -> Any:
    quotas: ClientQuotas = ctx.broker.quotas.quotas
    results = []
    accepted: list[tuple[Entity, dict[str, float | None]]] = []
    for entry in request.entries:
        code, message = ErrorCode.none, None
        try:
            entity = make_entity((e.entity_type, e.entity_name) for e in entry.entity)
            changes: dict[str, float | None] = {
                op.key: None if op.remove else float(op.value) for op in entry.ops
            }
            quotas.check_alter(entity, changes)
            accepted.append((entity, changes))
        except QuotaError as error:
            code, message = ErrorCode[error.error], str(error)
        results.append(
            ctx.build(
                "EntryData",
                error_code=code,
                error_message=message,
                entity=tuple(
                    ctx.build("EntityData", entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ),
            )
        )
    if not request.validate_only:
        changed = [quotas.alter(entity, changes) for entity, changes in accepted]
        if any(changed):
            ctx.broker.topics.set_client_quotas(quotas.to_json())
    return ctx.build(throttle_time=NO_THROTTLE, entries=tuple(results))


def _entity(ctx: RequestContext, entity: Entity) -> tuple[Any, ...]:
    return tuple(ctx.build("EntityData", entity_type=t, entity_name=n) for t, n in entity)


HANDLERS = {
    DESCRIBE_CLIENT_QUOTAS: (VersionRange(0, 1), handle_describe_client_quotas),
    ALTER_CLIENT_QUOTAS: (VersionRange(0, 1), handle_alter_client_quotas),
}
