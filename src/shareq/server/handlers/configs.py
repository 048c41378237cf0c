"""DescribeConfigs and IncrementalAlterConfigs for TOPIC, BROKER and GROUP resources.

GROUP resources are share-group configs (``share.record.lock.duration.ms`` ...), validated
against the broker's ``group.share.*`` bounds by the group coordinator and persisted as group
records before the answer; a group's configs may be set before the group exists.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.config import LISTENER_PREFIX, SETTINGS, ConfigError, config_text
from shareq.coordinators.group import GroupRequestError
from shareq.coordinators.group.config import STORED_ONLY_GROUP_CONFIGS
from shareq.coordinators.group.retry_config import (
    RETRY_BOOLEAN_CONFIGS,
    RETRY_CONFIG_DEFAULTS,
    RETRY_DOUBLE_CONFIGS,
    RETRY_STRING_CONFIGS,
)
from shareq.kafka_configs import BROKER_CONFIGS, GROUP_CONFIGS
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
    parse_value,
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
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32

logger = logging.getLogger(__name__)

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

# Broker configs Kafka changes at runtime (described read_only=false): those its table gives an
# update mode, and the ones topic configs fall back to.
KAFKA_DYNAMIC_BROKER_KEYS = BROKER_SYNONYMS | {
    name for name, config in BROKER_CONFIGS.items() if config.mode != "read-only"
}
# What shareq lets IncrementalAlterConfigs change on BROKER "0" and "": Kafka's dynamic ones, plus
# two that Kafka fixes at start-up and shareq lets an operator change (described read-only, as Kafka).
DYNAMIC_BROKER_KEYS = KAFKA_DYNAMIC_BROKER_KEYS | {
    "num.partitions",
    "auto.create.topics.enable",
    "errors.deadletterqueue.auto.create.topics.enable",
    "errors.deadletterqueue.topic.name.prefix",
}


# Broker configs of Kafka's LIST type (APPEND and SUBTRACT apply to them).
BROKER_LIST_KEYS = frozenset(
    {t.synonym for t in TOPIC_SETTINGS.values() if t.synonym is not None and t.type is ConfigType.LIST}
)
_TOPIC_OF_SYNONYM = {t.synonym: t for t in TOPIC_SETTINGS.values() if t.synonym is not None}
_UNBOUNDED_SYNONYMS = frozenset({"log.retention.ms"})
"""Broker configs Kafka takes with no bound where their topic config has one (retention.ms is at
least -1; a broker's log.retention.ms any long, a negative one meaning no time limit)."""


def check_broker_value(key: str, value: str) -> None:
    """A broker config a topic config falls back to takes what the topic config takes, with
    Kafka's message naming the broker config; ``InvalidConfigError`` otherwise."""
    setting = _TOPIC_OF_SYNONYM.get(key)
    if setting is not None:
        check = None if key in _UNBOUNDED_SYNONYMS else setting.check
        parsed = parse_value(dataclasses.replace(setting, name=key, check=check), value)
        if isinstance(parsed, list) and len(set(parsed)) != len(parsed):  # a broker list: no repeats
            raise InvalidConfigError(f"Configuration '{key}' values must not be duplicated.")


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
                code = ErrorCode.unknown_topic_or_partition
                message = f"The topic '{resource.resource_name}' does not exist."
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
                    if _hidden_shareq_group_config(entry.name, entry.source == _GROUP_SOURCE, keys):
                        continue
                    kafka = GROUP_CONFIGS.get(entry.name)
                    kind = (
                        _TYPES[float]
                        if entry.name in RETRY_DOUBLE_CONFIGS
                        else _TYPE_IDS[kafka.type]
                        if kafka is not None
                        else _TYPES[str]
                        if entry.name in _GROUP_STRING_CONFIGS
                        else _TYPES[bool]
                        if entry.name in _GROUP_BOOLEAN_CONFIGS
                        else _INT
                    )
                    broker_key = GROUP_CONFIG_SYNONYMS.get(entry.name)
                    own_default = (
                        RETRY_CONFIG_DEFAULTS.get(entry.name, "") if kafka is None else kafka.default or ""
                    )
                    default = own_default if broker_key is None else ctx.broker.config.text(broker_key)
                    overridden = entry.source == _GROUP_SOURCE
                    where = describe_group_config(entry.name, entry.value, default, overridden, layers)
                    shown: str | None = entry.value
                    if not overridden and entry.name in STORED_ONLY_GROUP_CONFIGS and where.synonyms:
                        shown = where.synonyms[0].value  # the broker config it falls back to
                    described.append((entry.name, shown, where, kind, False))
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

SHAREQ_GROUP_CONFIG_PREFIX = "shareq."

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


def _hidden_shareq_group_config(name: str, overridden: bool, keys: set[str] | None) -> bool:
    """shareq's own group configs (``shareq.*``, which Kafka does not know) are described when set on
    the group or asked for by name: a group that uses none describes exactly Kafka's list."""
    if not name.startswith(SHAREQ_GROUP_CONFIG_PREFIX) or overridden:
        return False
    return keys is None or name not in keys


_DERIVED = frozenset({"listeners", "advertised.listeners", "log.dirs", "process.roles"})
SENSITIVE = frozenset(
    {"ssl.keystore.key", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.password"}
)
"""Kafka's PASSWORD-type configs: described with no value and ``is_sensitive``."""


def _broker_entries(
    ctx: RequestContext, layers: ConfigLayers
) -> list[tuple[str, str | None, Described, int, bool]]:
    """Broker configs under Kafka's names: every config Kafka 4.4 describes (shareq's value where it
    has the setting, else the value given or Kafka's default), shareq's own settings an operator
    set, names neither knows that were set at runtime (Kafka keeps those), and what Kafka describes
    that shareq derives (listeners, log dirs, roles)."""
    broker = ctx.broker
    out: list[tuple[str, str | None, Described, int, bool]] = []
    set_somewhere = set(layers.static) | set(layers.dynamic_broker) | set(layers.dynamic_default)
    for key, setting in SETTINGS.items():
        kafka = BROKER_CONFIGS.get(key)
        hidden = key in SHAREQ_ONLY_BROKER_KEYS or (kafka is None and key not in KAFKA_DYNAMIC_BROKER_KEYS)
        if (hidden or (kafka is not None and not kafka.described)) and key not in set_somewhere:
            continue
        if key in _DERIVED:
            continue
        where = describe_broker_config(key, layers)
        value = broker.config.text(key)
        if key == "log.retention.ms" and not where.synonyms:
            value = None  # Kafka's default lives on log.retention.hours
        read_only = kafka.mode == "read-only" if kafka is not None else key not in KAFKA_DYNAMIC_BROKER_KEYS
        out.append((key, value, where, _TYPE_IDS[setting.kafka_type], read_only))
    for key, value in {**layers.dynamic_default, **layers.dynamic_broker}.items():
        if key not in SETTINGS and not key.startswith(LISTENER_PREFIX):  # unknown names set at runtime
            out.append((key, value, describe_broker_config(key, layers), _TYPE_IDS["STRING"], False))
    listener = ",".join(lst.url() for lst in broker.listeners) or f"PLAINTEXT://{broker.host}:{broker.port}"
    advertised = ",".join(adv.url() for adv in broker.advertised_listeners.values()) or listener
    derived: tuple[tuple[str, str | None, Source, int, bool], ...] = (
        ("listeners", listener, Source.STATIC_BROKER_CONFIG, _LIST, False),
        ("advertised.listeners", advertised, Source.STATIC_BROKER_CONFIG, _LIST, True),
        ("log.dirs", str(broker.data_dir.resolve()), Source.STATIC_BROKER_CONFIG, _LIST, True),
        ("process.roles", "broker,controller", Source.STATIC_BROKER_CONFIG, _LIST, True),
    )
    for key, value, source, kind, read_only in derived:
        synonyms = () if value is None else (Synonym(key, value, source),)
        out.append((key, value, Described(source, synonyms), kind, read_only))
    return sorted(out, key=lambda entry: entry[0])


# DescribeConfigs' ConfigType ids, by Kafka's type names.
_TYPE_IDS = {
    "BOOLEAN": 1,
    "STRING": 2,
    "INT": 3,
    "SHORT": 4,
    "LONG": 5,
    "DOUBLE": 6,
    "LIST": 7,
    "CLASS": 8,
    "PASSWORD": 9,
}


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
    kafka = BROKER_CONFIGS.get(name)
    sensitive = name in SENSITIVE or (kafka is not None and kafka.type == "PASSWORD")
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


def _alter_resources(request: Any, ctx: RequestContext, alters: Mapping[int, _Alter], legacy: bool) -> Any:
    """Each resource altered by the function for its type (``validate_only`` passed on), its
    failure turned into its own error code and message, as Kafka answers both AlterConfigs APIs.
    Whatever goes wrong with one resource is that resource's answer; the connection stays."""
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        code, message = ErrorCode.none, None
        try:
            _preprocess(resource, ctx, legacy, counts[(resource.resource_type, resource.resource_name)])
            alter = alters.get(resource.resource_type)
            if alter is None:  # CLIENT_METRICS: no subscriptions on this broker
                raise _Fail(ErrorCode.invalid_request, f"Unknown resource type {resource.resource_type}")
            alter(resource, ctx, request.validate_only)
        except _Fail as fail:
            code, message = fail.code, fail.message
        except (InvalidConfigError, ConfigError) as error:
            code, message = ErrorCode.invalid_config, str(error)
        except (AdminFailure, GroupRequestError) as error:
            failure = failure_of(error)
            code, message = failure.code, str(failure)
        except Exception:  # a bug: Kafka answers UNKNOWN_SERVER_ERROR and keeps the connection
            logger.exception("altering configs of %s failed", resource.resource_name)
            code, message = ErrorCode.unknown_server_error, None
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


_RESOURCE_TYPES = frozenset({TOPIC, BROKER, GROUP, CLIENT_METRICS})


def _preprocess(resource: Any, ctx: RequestContext, legacy: bool, occurrences: int) -> None:
    """Kafka's checks before any resource is looked at, in its order."""
    if occurrences > 1:
        raise _Fail(ErrorCode.invalid_request, "Each resource must appear at most once.")
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise _Fail(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [c.name for c in resource.configs if c.value is None and (legacy or c.config_operation != DELETE)]
    if nulls:
        raise _Fail(ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls))
    kind = resource.resource_type
    if kind not in _RESOURCE_TYPES or (legacy and kind == BROKER_LOGGER):
        raise _Fail(ErrorCode.invalid_request, f"Unknown resource type {kind}")
    if kind == BROKER and resource.resource_name != "":
        _check_node_id(resource.resource_name, ctx)
    if kind == TOPIC and resource.resource_name == "":
        raise _Fail(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    if not legacy and kind == BROKER:  # the broker checks these; the controller meets the others
        for config in resource.configs:
            if config.config_operation not in (SET, DELETE, APPEND, SUBTRACT):
                raise _Fail(ErrorCode.invalid_request, f"Unknown operations type {config.config_operation}")


def _check_node_id(name: str, ctx: RequestContext) -> None:
    try:
        node = int(name)
    except ValueError:
        raise _Fail(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}") from None
    if node != ctx.broker.node_id:
        raise _Fail(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {ctx.broker.node_id}, but received {name}",
        )


def handle_incremental_alter_configs(request: Any, ctx: RequestContext) -> Any:
    alters = {GROUP: _alter_group, TOPIC: _alter_topic, BROKER: _alter_broker}
    return _alter_resources(request, ctx, alters, legacy=False)


def handle_alter_configs(request: Any, ctx: RequestContext) -> Any:
    """The legacy AlterConfigs (API 33): a resource's dynamic configs are replaced by the ones
    given, so a config left out goes back to its default."""
    alters = {TOPIC: _replace_topic, BROKER: _replace_broker_configs, GROUP: _replace_group}
    return _alter_resources(request, ctx, alters, legacy=True)


def _given(resource: Any) -> dict[str, str]:
    return {c.name: c.value for c in resource.configs if c.value is not None}


def _topic_of(resource: Any, ctx: RequestContext) -> Any:
    topic = ctx.broker.topics.get(resource.resource_name)
    if topic is None:
        raise _Fail(
            ErrorCode.unknown_topic_or_partition, f"The topic '{resource.resource_name}' does not exist."
        )
    return topic


def _replace_topic(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    topic = _topic_of(resource, ctx)
    validated = validate_topic_configs(_given(resource))
    if validate_only:
        ctx.broker.check_topic_configs(validated)
    else:
        ctx.broker.alter_topic_configs(topic.name, validated)


def _replace_broker_configs(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    _replace_broker(resource.resource_name, _given(resource), ctx, validate_only)


def _replace_broker(name: str, updated: dict[str, str], ctx: RequestContext, validate_only: bool) -> None:
    """Kafka validates a broker change on the broker and answers a bad one INVALID_REQUEST (its
    KAFKA-13609), naming the value as it does for topics."""
    fixed = sorted(k for k in updated if k in SETTINGS and k not in DYNAMIC_BROKER_KEYS)
    if fixed:
        raise _Fail(
            ErrorCode.invalid_request, f"Cannot update these configs dynamically: [{', '.join(fixed)}]"
        )
    try:
        for key, value in updated.items():
            check_broker_value(key, value)
        changed = ctx.broker.static_config.with_overrides(updated)  # validates
        _check_thread_counts(ctx.broker.config, changed)
    except (InvalidConfigError, ConfigError) as error:
        raise _Fail(ErrorCode.invalid_request, str(error)) from None
    if not validate_only:
        ctx.broker.alter_broker_configs(updated, cluster_default=name == "")


# Thread counts Kafka changes at runtime, by at most a factor of two either way (its
# DynamicThreadPool, the socket server's and the log cleaner's reconfiguration checks); stored
# only here, checked as Kafka checks them.
_THREAD_POOLS = ("num.io.threads", "num.network.threads", "num.replica.fetchers", "background.threads")
_THREAD_POOLS_ALSO = ("num.recovery.threads.per.data.dir",)


def _check_thread_counts(current: Any, changed: Any) -> None:
    for key in (*_THREAD_POOLS, *_THREAD_POOLS_ALSO):
        old, new = current[key], changed[key]
        if new == old:
            continue
        failed = f"Dynamic thread count update validation failed for {key}={new}"
        if new <= 0:
            raise ConfigError(f"{failed}, value should be at least 1")
        if new < old // 2:
            raise ConfigError(f"{failed}, value should be at least half the current value {old}")
        if new > old * 2:
            raise ConfigError(f"{failed}, value should not be greater than double the current value {old}")
    old, new = current["log.cleaner.threads"], changed["log.cleaner.threads"]
    if new < 1:
        raise ConfigError("Log cleaner threads should be at least 1")
    if new < old // 2:
        raise ConfigError(f"Log cleaner threads cannot be reduced to less than half the current value {old}")
    if new > old * 2:
        raise ConfigError(
            f"Log cleaner threads cannot be increased to more than double the current value {old}"
        )


def _apply(
    current: Mapping[str, str],
    configs: Any,
    default: Callable[[str], str | None],
    is_list: Callable[[str], bool],
    not_a_list: Callable[[str, int], str] | None = None,
) -> dict[str, str]:
    """The configs after the operations, as Kafka's controller computes them: APPEND and SUBTRACT
    start from the current value, else the config's built-in default, split on commas (empty items
    dropped), and add or remove the given items as they are (not trimmed)."""
    updated = dict(current)
    for config in java_hash_order(configs):
        op = config.config_operation
        if op not in (SET, DELETE, APPEND, SUBTRACT):  # Kafka's controller fails on it
            raise _Fail(ErrorCode.unknown_server_error, None)
        if op == SET:
            updated[config.name] = config.value
        elif op == DELETE:
            updated.pop(config.name, None)
        else:
            if not is_list(config.name):
                raise InvalidConfigError((not_a_list or _not_a_list)(config.name, op))
            base = updated.get(config.name, default(config.name))
            items = [item for item in (base or "").split(",") if item]
            for item in _java_split(config.value):
                if op == APPEND:
                    if item not in items:
                        items.append(item)
                elif item in items:
                    items.remove(item)
            updated[config.name] = ",".join(items)
    return updated


def java_hash_order(configs: Any) -> list[Any]:
    """The configs in the order Kafka's controller meets them: a Java ``HashMap`` by name (its
    first failure is the one answered), buckets by the spread ``String.hashCode``, in insertion
    order within a bucket."""
    items = list(configs)
    size = 16
    while len(items) > size * 3 // 4:
        size *= 2

    def bucket(name: str) -> int:
        h = 0
        for unit in name.encode("utf-16-be").hex(" ", 2).split():
            h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (size - 1)

    return sorted(items, key=lambda config: bucket(config.name))  # stable: insertion order kept


def _not_a_list(name: str, op: int) -> str:
    verb = "APPEND" if op == APPEND else "SUBTRACT"
    return f"Can't {verb} to key {name} because its type is not LIST."


def _java_split(text: str) -> list[str]:
    """Java's ``String.split(",")``: trailing empty strings dropped, but ``""`` gives ``[""]``."""
    if text == "":
        return [""]
    parts = text.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _alter_topic(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    topic = _topic_of(resource, ctx)

    def default(name: str) -> str | None:
        setting = TOPIC_SETTINGS.get(name)
        return None if setting is None else setting.default

    def is_list(name: str) -> bool:
        setting = TOPIC_SETTINGS.get(name)
        return setting is not None and setting.type is ConfigType.LIST

    updated = _apply(topic.configs, resource.configs, default, is_list)
    validated = validate_topic_configs(updated)
    if validate_only:
        ctx.broker.check_topic_configs(validated)
    else:
        ctx.broker.alter_topic_configs(topic.name, validated)


def _alter_broker(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    """BROKER "<node id>" alters this broker's own dynamic configs; BROKER "" the cluster defaults."""
    name = resource.resource_name
    registry = ctx.broker.topics
    current = registry.cluster_defaults if name == "" else registry.broker_overrides

    def default(key: str) -> str | None:
        setting = SETTINGS.get(key)
        return None if setting is None else config_text(setting.default)

    def is_list(key: str) -> bool:
        return key in BROKER_LIST_KEYS

    def not_a_list(key: str, op: int) -> str:  # the broker checks this before the controller does
        verb = "append" if op == APPEND else "subtract"
        return f"Config value {verb} is not allowed for config key: {key}"

    updated = _apply(current, resource.configs, default, is_list, not_a_list)
    _replace_broker(name, updated, ctx, validate_only)


def _alter_group(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    changes: dict[str, str | None] = {}
    for config in java_hash_order(resource.configs):
        if config.config_operation not in (SET, DELETE, APPEND, SUBTRACT):
            raise _Fail(ErrorCode.unknown_server_error, None)
        if config.config_operation == SET:
            changes[config.name] = config.value
        elif config.config_operation == DELETE:
            changes[config.name] = None
        else:
            raise InvalidConfigError(_not_a_list(config.name, config.config_operation))
    _change_group(resource.resource_name, changes, ctx, validate_only)


def _replace_group(resource: Any, ctx: RequestContext, validate_only: bool) -> None:
    """Legacy AlterConfigs on a group: its overrides become the ones given."""
    given: dict[str, str | None] = dict(_given(resource))
    current = coordinator(ctx).group_overrides(resource.resource_name)
    changes = {**{name: None for name in current if name not in given}, **given}
    _change_group(resource.resource_name, changes, ctx, validate_only)


def _change_group(
    group: str, changes: dict[str, str | None], ctx: RequestContext, validate_only: bool
) -> None:
    records = coordinator(ctx).alter_configs(group, changes, validate_only=validate_only)
    persist_records(ctx, records)
    if records:
        group_config_changed(ctx, group)


def _unexpected_broker(ctx: RequestContext, name: str) -> str:
    return f"Unexpected broker id, expected {ctx.broker.node_id} or empty string, but received {name}"


class _Fail(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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
