"""Topic-level configs: their Kafka names, the broker setting each defaults to, and validation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shareq.config import BrokerConfig

DLQ_GROUP_ENABLE = "errors.deadletterqueue.group.enable"
"""A topic opts in to receive share groups' dead letters (KIP-1191)."""


class InvalidConfigError(ValueError):
    """An unknown topic config or a value it cannot take."""


@dataclass(frozen=True, slots=True)
class TopicSetting:
    name: str
    broker_key: str | None  # the broker setting that supplies the default, if any
    default: str
    kind: str  # "long", "int", "string", "list", "boolean"
    choices: tuple[str, ...] = ()
    minimum: int | None = None


TOPIC_SETTINGS: dict[str, TopicSetting] = {
    s.name: s
    for s in (
        TopicSetting("retention.ms", "log.retention.ms", "", "long", minimum=-1),
        TopicSetting("retention.bytes", "log.retention.bytes", "", "long", minimum=-1),
        TopicSetting("segment.bytes", "log.segment.bytes", "", "int", minimum=14),
        TopicSetting("flush.messages", "log.flush.interval.messages", "", "long", minimum=1),
        TopicSetting("max.message.bytes", "message.max.bytes", "", "int", minimum=0),
        TopicSetting("cleanup.policy", None, "delete", "list", choices=("delete",)),
        TopicSetting("message.timestamp.type", None, "CreateTime", "string", choices=("CreateTime",)),
        TopicSetting("min.insync.replicas", None, "1", "int", minimum=1),
        TopicSetting(DLQ_GROUP_ENABLE, None, "false", "boolean", choices=("true", "false")),
    )
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values; returns the overrides as strings (``None`` values are dropped)."""
    result: dict[str, str] = {}
    for name, value in configs.items():
        setting = TOPIC_SETTINGS.get(name)
        if setting is None:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        if value is None:
            continue
        if setting.kind in ("long", "int"):
            try:
                number = int(value)
            except ValueError as error:
                raise InvalidConfigError(f"{name}: {value!r} is not an integer") from error
            if setting.minimum is not None and number < setting.minimum:
                raise InvalidConfigError(f"{name}: {number} is below {setting.minimum}")
            if setting.kind == "int" and number > 2**31 - 1:
                raise InvalidConfigError(f"{name}: {number} does not fit an int")
        elif setting.choices and value not in setting.choices:
            raise InvalidConfigError(f"{name}: {value!r} is not one of {', '.join(setting.choices)}")
        result[name] = value
    return result


def effective_topic_configs(
    overrides: Mapping[str, str], broker: BrokerConfig
) -> dict[str, tuple[str, bool]]:
    """Every topic config's value and whether it was set on the topic (True) or defaulted."""
    result: dict[str, tuple[str, bool]] = {}
    for name, setting in TOPIC_SETTINGS.items():
        if name in overrides:
            result[name] = (overrides[name], True)
        elif setting.broker_key is not None:
            result[name] = (str(broker[setting.broker_key]), False)
        else:
            result[name] = (setting.default, False)
    return result
