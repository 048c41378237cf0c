"""DescribeConfigs and IncrementalAlterConfigs for TOPIC, BROKER and GROUP resources.

GROUP resources are share-group configs (``share.record.lock.duration.ms`` ...), validated
against the broker's ``group.share.*`` bounds by the group coordinator and persisted as group
records before the answer; a group's configs may be set before the group exists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.config import SETTINGS, ConfigError, config_text
from shareq.coordinators.group import GroupRequestError
from shareq.coordinators.group.retry_config import (
    RETRY_BOOLEAN_CONFIGS,
    RETRY_CONFIG_DEFAULTS,
    RETRY_DOUBLE_CONFIGS,
    RETRY_STRING_CONFIGS,
)
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import (
    ALTER_CONFIGS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_CONFIG_RESOURCES,
)
from shareq.topic_configs import (
    BROKER_SYNONYMS,
    TOPIC_SETTINGS,
    ConfigType,
    InvalidConfigError,
    effective_topic_configs,
    validate_topic_configs,
)

from ..config_synonyms import (
    GROUP_CONFIG_SYNONYMS,
    ConfigLayers,
    Described,
    Source,
    Synonym,
    default_layer,
    describe_broker_config,
    describe_cluster_default,
    describe_group_config,
    describe_topic_config,
)
from ..context import NO_THROTTLE, BrokerView, RequestContext
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

# ConfigType values of the protocol (DescribeConfigs v3+).
_TYPES = {bool: 1, str: 2, int: 5, float: 6}
_GROUP_STRING_CONFIGS = (
    frozenset(
        {
            "share.auto.offset.reset",
            "share.isolation.level",
            "errors.deadletterqueue.topic.name",
            "shareq.share.ordering",
        }
    )
    | RETRY_STRING_CONFIGS
)
_GROUP_BOOLEAN_CONFIGS = (
    frozenset({"errors.deadletterqueue.copy.record.enable", "share.renew.acknowledge.enable"})
    | RETRY_BOOLEAN_CONFIGS
)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# Broker configs Kafka changes per broker at runtime (described read_only=false): the ones topic
# configs fall back to, and a few more.
KAFKA_DYNAMIC_BROKER_KEYS = BROKER_SYNONYMS | {
    "log.segment.bytes",
    "log.retention.ms",
    "log.retention.bytes",
    "log.flush.interval.messages",
    "message.max.bytes",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
}
# What shareq lets IncrementalAlterConfigs change on BROKER "0" and "": Kafka's dynamic ones, plus
# two that Kafka fixes at start-up and shareq lets an operator change (described read-only, as Kafka).
DYNAMIC_BROKER_KEYS = KAFKA_DYNAMIC_BROKER_KEYS | {
    "num.partitions",
    "auto.create.topics.enable",
    "errors.deadletterqueue.auto.create.topics.enable",
    "errors.deadletterqueue.topic.name.prefix",
}


def config_layers(broker: BrokerView) -> ConfigLayers:
    """The broker's config layers as DescribeConfigs names them (see ``config_synonyms``)."""
    static = broker.static_config
    return ConfigLayers(
        dynamic_broker=broker.topics.broker_overrides,
        dynamic_default=broker.topics.cluster_defaults,
        static={name: text for name in static.explicit if (text := static.text(name)) is not None},
        defaults=default_layer({name: config_text(s.default) for name, s in SETTINGS.items()}),
    )


def handle_describe_configs(request: Any, ctx: RequestContext) -> Any:
    layers = config_layers(ctx.broker)
    synonyms_wanted = bool(getattr(request, "include_synonyms", False))
    results = []
    for resource in request.resources:
        keys = None if not resource.configuration_keys else set(resource.configuration_keys)
        code, message = ErrorCode.none, None
        described: list[tuple[str, str | None, Described, int, bool]] = []
        if resource.resource_type == TOPIC:
            topic = ctx.broker.topics.get(resource.resource_name)
            if topic is None:
                code, message = ErrorCode.unknown_topic_or_partition, f"no topic {resource.resource_name}"
            else:
                effective = effective_topic_configs(topic.configs, ctx.broker.config)
                for name, (value, _explicit) in effective.items():
                    kind = int(TOPIC_SETTINGS[name].type)
                    where = describe_topic_config(name, value, topic.configs, layers)
                    described.append((name, value, where, kind, False))
        elif resource.resource_type == BROKER:
            name = resource.resource_name
            if name == "":
                for key in sorted(ctx.broker.topics.cluster_defaults):
                    value = ctx.broker.topics.cluster_defaults[key]
                    kind = _TYPES.get(SETTINGS[key].type, 0) if key in SETTINGS else 0
                    described.append((key, value, describe_cluster_default(key, layers), kind, False))
            elif name == str(ctx.broker.node_id):
                described = _broker_entries(ctx, layers)
            else:
                code, message = ErrorCode.invalid_request, _unexpected_broker(ctx, name)
        elif resource.resource_type == GROUP:
            try:
                for entry in coordinator(ctx).describe_configs(resource.resource_name):
                    kind = (
                        _TYPES[float]
                        if entry.name in RETRY_DOUBLE_CONFIGS
                        else _TYPES[str]
                        if entry.name in _GROUP_STRING_CONFIGS
                        else _TYPES[bool]
                        if entry.name in _GROUP_BOOLEAN_CONFIGS
                        else _INT
                    )
                    broker_key = GROUP_CONFIG_SYNONYMS.get(entry.name)
                    default = (
                        RETRY_CONFIG_DEFAULTS.get(entry.name, "")
                        if broker_key is None
                        else ctx.broker.config.text(broker_key)
                    )
                    overridden = entry.source == _GROUP_SOURCE
                    where = describe_group_config(entry.name, entry.value, default, overridden, layers)
                    described.append((entry.name, entry.value, where, kind, False))
            except AdminFailure as failure:
                code, message = failure.code, str(failure)
        else:
            code, message = ErrorCode.invalid_request, f"unsupported resource type {resource.resource_type}"
        entries = tuple(
            _entry(ctx, name, value, where, kind, read_only, synonyms_wanted)
            for name, value, where, kind, read_only in described
            if keys is None or name in keys
        )
        results.append(
            ctx.build(
                "DescribeConfigsResult",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=entries if code == ErrorCode.none else (),
            )
        )
    return ctx.build(throttle_time=NO_THROTTLE, results=tuple(results))


_INT = 3
_LIST = 7
_GROUP_SOURCE = int(Source.GROUP_CONFIG)

# shareq's own broker settings (Kafka has no such names): described only when an operator set one.
SHAREQ_ONLY_BROKER_KEYS = frozenset(
    {
        "advertised.host",
        "advertised.port",
        "http.host",
        "http.port",
        "http.push.interval.ms",
        "group.share.auto.offset.reset",
        "group.share.isolation.level",
        "share.coordinator.cold.partition.snapshot.interval.ms",
        "share.coordinator.state.flush.mode",
        "share.coordinator.state.topic.prune.interval.ms",
        "share.persister",
    }
)


_DERIVED = frozenset({"listeners", "advertised.listeners"})
SENSITIVE = frozenset(
    {"ssl.keystore.key", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.password"}
)
"""Kafka's PASSWORD-type configs: described with no value and ``is_sensitive``."""


def _broker_entries(
    ctx: RequestContext, layers: ConfigLayers
) -> list[tuple[str, str | None, Described, int, bool]]:
    """Broker configs under Kafka's names: the settings shareq has, then what Kafka describes that
    shareq derives (listeners, log dirs, roles, retention in hours)."""
    broker = ctx.broker
    out: list[tuple[str, str | None, Described, int, bool]] = []
    set_somewhere = set(layers.static) | set(layers.dynamic_broker) | set(layers.dynamic_default)
    for key, setting in SETTINGS.items():
        if (key in SHAREQ_ONLY_BROKER_KEYS and key not in set_somewhere) or key in _DERIVED:
            continue
        where = describe_broker_config(key, layers)
        value = broker.config.text(key)
        if key == "log.retention.ms" and not where.synonyms:
            value = None  # Kafka's default lives on log.retention.hours
        out.append((key, value, where, _TYPES.get(setting.type, 0), key not in KAFKA_DYNAMIC_BROKER_KEYS))
    listener = ",".join(lst.url() for lst in broker.listeners) or f"PLAINTEXT://{broker.host}:{broker.port}"
    advertised = ",".join(adv.url() for adv in broker.advertised_listeners.values()) or listener
    derived: tuple[tuple[str, str | None, Source, int, bool], ...] = (
        ("listeners", listener, Source.STATIC_BROKER_CONFIG, _LIST, False),
        ("advertised.listeners", advertised, Source.STATIC_BROKER_CONFIG, _LIST, True),
        ("log.dirs", str(broker.data_dir.resolve()), Source.STATIC_BROKER_CONFIG, _LIST, True),
        ("process.roles", "broker,controller", Source.STATIC_BROKER_CONFIG, _LIST, True),
        ("log.retention.hours", "168", Source.DEFAULT_CONFIG, _INT, True),
        ("log.retention.minutes", None, Source.DEFAULT_CONFIG, _INT, True),
    )
    for key, value, source, kind, read_only in derived:
        synonyms = () if value is None else (Synonym(key, value, source),)
        out.append((key, value, Described(source, synonyms), kind, read_only))
    return sorted(out, key=lambda entry: entry[0])


def _entry(
    ctx: RequestContext,
    name: str,
    value: str | None,
    where: Described,
    config_type: int,
    read_only: bool,
    with_synonyms: bool,
) -> Any:
    synonyms = (
        tuple(
            ctx.build("DescribeConfigsSynonym", name=s.name, value=s.value, source=int(s.source))
            for s in where.synonyms
        )
        if with_synonyms
        else ()
    )
    sensitive = name in SENSITIVE
    if sensitive:
        value = None
        synonyms = tuple(dataclasses.replace(s, value=None) for s in synonyms)
    return ctx.build(
        "DescribeConfigsResourceResult",
        name=name,
        value=value,
        read_only=read_only,
        config_source=int(where.source),
        is_default=where.source is Source.DEFAULT_CONFIG,
        is_sensitive=sensitive,
        synonyms=synonyms,
        config_type=config_type,
        documentation=None,
    )


_Alter = Callable[[Any, RequestContext, bool], None]


def _alter_resources(request: Any, ctx: RequestContext, alters: Mapping[int, _Alter]) -> Any:
    """Each resource altered by the function for its type (``validate_only`` passed on), its
    failure turned into its own error code and message: both AlterConfigs APIs answer so."""
    responses = []
    for resource in request.resources:
        code, message = ErrorCode.none, None
        alter = alters.get(resource.resource_type)
        try:
            if alter is None:
                code, message = (
                    ErrorCode.invalid_request,
                    f"unsupported resource type {resource.resource_type}",
                )
            else:
                alter(resource, ctx, request.validate_only)
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


def handle_incremental_alter_configs(request: Any, ctx: RequestContext) -> Any:
    return _alter_resources(request, ctx, {GROUP: _alter_group, TOPIC: _alter_topic, BROKER: _alter_broker})


def handle_alter_configs(request: Any, ctx: RequestContext) -> Any:
    """The legacy AlterConfigs (API 33): a resource's dynamic configs are replaced by the ones
    given, so a config left out goes back to its default."""
    return _alter_resources(request, ctx, {TOPIC: _replace_topic, BROKER: _replace_broker_configs})


def _given(resource: Any) -> dict[str, str]:
    return {c.name: c.value for c in resource.configs if c.value is not None}


def _replace_topic(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    topic = ctx.broker.topics.get(resource.resource_name)
    if topic is None:
        raise _Fail(ErrorCode.unknown_topic_or_partition, f"no topic {resource.resource_name}")
    validated = validate_topic_configs(_given(resource))
    if not validate_only:
        ctx.broker.alter_topic_configs(topic.name, validated)


def _replace_broker_configs(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    _replace_broker(resource.resource_name, _given(resource), ctx, validate_only)


def _replace_broker(name: str, updated: dict[str, str], ctx: RequestContext, validate_only: bool) -> None:
    if name not in ("", str(ctx.broker.node_id)):
        raise _Fail(ErrorCode.invalid_request, _unexpected_broker(ctx, name))
    for key in updated:
        if key not in DYNAMIC_BROKER_KEYS:
            raise InvalidConfigError(f"broker config {key!r} cannot be changed at runtime")
    ctx.broker.static_config.with_overrides(updated)  # validates
    if not validate_only:
        ctx.broker.alter_broker_configs(updated, cluster_default=name == "")


def _apply(current: dict[str, str], configs: Any, lists: Any = None) -> dict[str, str]:
    """The configs after the operations; ``lists(name)`` gives a list config's current items for
    APPEND and SUBTRACT (only topics have list configs)."""
    updated = dict(current)
    for config in configs:
        if config.config_operation in (APPEND, SUBTRACT) and lists is not None:
            items = lists(config.name, updated)
            if items is None:
                raise InvalidConfigError(
                    f"Config value append is not allowed for config key: {config.name}"
                    if config.config_operation == APPEND
                    else f"Config value subtract is not allowed for config key: {config.name}"
                )
            given = [v.strip() for v in (config.value or "").split(",") if v.strip()]
            if config.config_operation == APPEND:
                items = items + [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            updated[config.name] = ",".join(items)
        elif config.config_operation == SET:
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
    effective = effective_topic_configs(topic.configs, ctx.broker.config)

    def lists(name: str, current: dict[str, str]) -> list[str] | None:
        setting = TOPIC_SETTINGS.get(name)
        if setting is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if setting.type is not ConfigType.LIST:
            return None
        text = current[name] if name in current else effective[name][0]
        return [v.strip() for v in text.split(",") if v.strip()]

    updated = _apply(topic.configs, resource.configs, lists)
    validate_topic_configs(updated)
    if not validate_only:
        ctx.broker.alter_topic_configs(topic.name, updated)


def _alter_broker(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    """BROKER "<node id>" alters this broker's own dynamic configs; BROKER "" the cluster defaults."""
    name = resource.resource_name
    if name not in ("", str(ctx.broker.node_id)):
        raise _Fail(ErrorCode.invalid_request, _unexpected_broker(ctx, name))
    registry = ctx.broker.topics
    current = registry.cluster_defaults if name == "" else registry.broker_overrides
    _replace_broker(name, _apply(current, resource.configs), ctx, validate_only)


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


def _unexpected_broker(ctx: RequestContext, name: str) -> str:
    return f"Unexpected broker id, expected {ctx.broker.node_id} or empty string, but received {name}"


class _Fail(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


CLIENT_METRICS = 16
BROKER_LOGGER = 8
# v0 was ListClientMetricsResources; v1 (Kafka 4.1, KIP-1142) lists any config resource type.
# BROKER_LOGGER is left out: shareq has no per-logger configs to describe.
_LISTABLE = {0: (CLIENT_METRICS,), 1: (GROUP, CLIENT_METRICS, BROKER, TOPIC)}


def handle_list_config_resources(request: Any, ctx: RequestContext) -> Any:
    """The resources that have configs, in Kafka's order: groups with overrides (a group that so
    far has only configs included), client-metrics subscriptions (shareq has none), the broker,
    then every topic (internal ones too, as Kafka's ``getAllTopics``)."""
    supported = _LISTABLE[min(ctx.version, 1)]
    asked = tuple(int(t) for t in getattr(request, "resource_types", ())) or supported
    unsupported = [t for t in asked if t not in supported]
    if unsupported:
        return ctx.build(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.unsupported_version,
            config_resources=(),
        )
    found: list[tuple[int, str]] = []
    share = ctx.broker.share
    if GROUP in asked and share is not None:
        found += [(GROUP, group_id) for group_id in share.coordinator.configured_groups()]
    if BROKER in asked:
        found.append((BROKER, str(ctx.broker.node_id)))
    if TOPIC in asked:
        found += [(TOPIC, topic.name) for topic in ctx.broker.topics]
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        config_resources=tuple(
            ctx.build("ConfigResource", resource_name=name, resource_type=kind) for kind, name in found
        ),
    )


HANDLERS = {
    DESCRIBE_CONFIGS: (VersionRange(1, 4), handle_describe_configs),
    INCREMENTAL_ALTER_CONFIGS: (VersionRange(0, 1), handle_incremental_alter_configs),
    ALTER_CONFIGS: (VersionRange(0, 2), handle_alter_configs),
    LIST_CONFIG_RESOURCES: (VersionRange(0, 1), handle_list_config_resources),
}
