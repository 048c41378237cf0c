"""DescribeConfigs and IncrementalAlterConfigs for TOPIC, BROKER and GROUP resources.

GROUP resources are share-group configs (``share.record.lock.duration.ms`` ...), validated
against the broker's ``group.share.*`` bounds by the group coordinator and persisted as group
records before the answer; a group's configs may be set before the group exists.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from shareq.config import SETTINGS, ConfigError
from shareq.coordinators.group import GroupRequestError
from shareq.protocol import VersionRange
from shareq.protocol.versions import DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS

from ..context import RequestContext
from ..topic_configs import TOPIC_SETTINGS, InvalidConfigError, effective_topic_configs
from .api_versions import NO_THROTTLE
from .group_support import (
    AdminFailure,
    coordinator,
    failure_of,
    group_config_changed,
    persist_records,
)

TOPIC = 2
BROKER = 4
GROUP = 32

# ConfigSource values of the protocol.
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# ConfigType values of the protocol (DescribeConfigs v3+).
_TYPES = {bool: 1, str: 2, int: 5}
_GROUP_STRING_CONFIGS = frozenset(
    {"share.auto.offset.reset", "share.isolation.level", "errors.deadletterqueue.topic.name"}
)
_TOPIC_TYPES = {"int": 3, "long": 5, "string": 2, "list": 7}

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

DYNAMIC_BROKER_KEYS = frozenset(
    {
        "num.partitions",
        "auto.create.topics.enable",
        "log.segment.bytes",
        "log.retention.ms",
        "log.retention.bytes",
        "log.flush.interval.messages",
        "message.max.bytes",
    }
)


def handle_describe_configs(request: Any, ctx: RequestContext) -> Any:
    results = []
    for resource in request.resources:
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        code, message, entries = ErrorCode.none, None, []
        if resource.resource_type == TOPIC:
            topic = ctx.broker.topics.get(resource.resource_name)
            if topic is None:
                code, message = ErrorCode.unknown_topic_or_partition, f"no topic {resource.resource_name}"
            else:
                effective = effective_topic_configs(topic.configs, ctx.broker.config)
                for name, (value, explicit) in effective.items():
                    if keys is None or name in keys:
                        kind = _TOPIC_TYPES[TOPIC_SETTINGS[name].kind]
                        entries.append(
                            _entry(ctx, name, value, SOURCE_TOPIC if explicit else SOURCE_DEFAULT, kind)
                        )
        elif resource.resource_type == BROKER:
            if resource.resource_name not in ("", str(ctx.broker.node_id)):
                code, message = ErrorCode.invalid_request, f"no broker {resource.resource_name}"
            else:
                dynamic = ctx.broker.topics.broker_overrides
                for name, setting in sorted(SETTINGS.items()):
                    if keys is not None and name not in keys:
                        continue
                    value = ctx.broker.config[name]
                    if name in dynamic:
                        source = SOURCE_DYNAMIC_BROKER
                    elif ctx.broker.static_config[name] != setting.default:
                        source = SOURCE_STATIC_BROKER
                    else:
                        source = SOURCE_DEFAULT
                    text = (
                        None
                        if value is None
                        else (str(value).lower() if setting.type is bool else str(value))
                    )
                    entries.append(_entry(ctx, name, text, source, _TYPES.get(setting.type, 0)))
        elif resource.resource_type == GROUP:
            try:
                for entry in coordinator(ctx).describe_configs(resource.resource_name):
                    if keys is None or entry.name in keys:
                        kind = _TYPES[str] if entry.name in _GROUP_STRING_CONFIGS else _INT
                        entries.append(_entry(ctx, entry.name, entry.value, int(entry.source), kind))
            except AdminFailure as failure:
                code, message = failure.code, str(failure)
        else:
            code, message = ErrorCode.invalid_request, f"unsupported resource type {resource.resource_type}"
        results.append(
            ctx.build(
                "DescribeConfigsResult",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(entries),
            )
        )
    return ctx.build(throttle_time=NO_THROTTLE, results=tuple(results))


_INT = 3


def _entry(ctx: RequestContext, name: str, value: str | None, source: int, config_type: int) -> Any:
    return ctx.build(
        "DescribeConfigsResourceResult",
        name=name,
        value=value,
        read_only=False,
        config_source=source,
        is_default=source == SOURCE_DEFAULT,
        is_sensitive=False,
        synonyms=(),
        config_type=config_type,
        documentation=None,
    )


def handle_incremental_alter_configs(request: Any, ctx: RequestContext) -> Any:
    responses = []
    for resource in request.resources:
        code, message = ErrorCode.none, None
        try:
            if resource.resource_type == GROUP:
                _alter_group(resource, ctx, request.validate_only)
            elif resource.resource_type == TOPIC:
                _alter_topic(resource, ctx, request.validate_only)
            elif resource.resource_type == BROKER:
                _alter_broker(resource, ctx, request.validate_only)
            else:
                code, message = (
                    ErrorCode.invalid_request,
                    f"unsupported resource type {resource.resource_type}",
                )
        except _Fail as fail:
            code, message = fail.code, str(fail)
        except (InvalidConfigError, ConfigError) as error:
            code, message = ErrorCode.invalid_config, str(error)
        except (AdminFailure, GroupRequestError) as error:
            failure = failure_of(error)
            code, message = failure.code, str(failure)
        responses.append(
            ctx.build(
                "AlterConfigsResourceResponse",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return ctx.build(throttle_time=NO_THROTTLE, responses=tuple(responses))


def _apply(current: dict[str, str], configs: Any) -> dict[str, str]:
    updated = dict(current)
    for config in configs:
        if config.config_operation == SET:
            if config.value is None:
                raise _Fail(ErrorCode.invalid_config, f"{config.name}: SET needs a value")
            updated[config.name] = config.value
        elif config.config_operation == DELETE:
            updated.pop(config.name, None)
        else:
            raise _Fail(ErrorCode.invalid_config, f"{config.name}: only SET and DELETE are supported")
    return updated


def _alter_topic(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    topic = ctx.broker.topics.get(resource.resource_name)
    if topic is None:
        raise _Fail(ErrorCode.unknown_topic_or_partition, f"no topic {resource.resource_name}")
    updated = _apply(topic.configs, resource.configs)
    for name in updated:
        if name not in TOPIC_SETTINGS:
            raise InvalidConfigError(f"unknown topic config {name!r}")
    if validate_only:
        from ..topic_configs import validate_topic_configs

        validate_topic_configs(updated)
    else:
        ctx.broker.alter_topic_configs(topic.name, updated)


def _alter_broker(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    if resource.resource_name not in ("", str(ctx.broker.node_id)):
        raise _Fail(ErrorCode.invalid_request, f"no broker {resource.resource_name}")
    updated = _apply(ctx.broker.topics.broker_overrides, resource.configs)
    for name in updated:
        if name not in DYNAMIC_BROKER_KEYS:
            raise InvalidConfigError(f"broker config {name!r} cannot be changed at runtime")
    ctx.broker.static_config.with_overrides(updated)  # validates
    if not validate_only:
        ctx.broker.alter_broker_configs(updated)


def _alter_group(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    changes: dict[str, str | None] = {}
    for config in resource.configs:
        if config.config_operation == SET:
            if config.value is None:
                raise _Fail(ErrorCode.invalid_config, f"{config.name}: SET needs a value")
            changes[config.name] = config.value
        elif config.config_operation == DELETE:
            changes[config.name] = None
        else:
            raise _Fail(ErrorCode.invalid_config, f"{config.name}: only SET and DELETE are supported")
    records = coordinator(ctx).alter_configs(resource.resource_name, changes, validate_only=validate_only)
    persist_records(ctx, records)
    if records:
        group_config_changed(ctx, resource.resource_name)


class _Fail(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


HANDLERS = {
    DESCRIBE_CONFIGS: (VersionRange(1, 4), handle_describe_configs),
    INCREMENTAL_ALTER_CONFIGS: (VersionRange(0, 1), handle_incremental_alter_configs),
}
