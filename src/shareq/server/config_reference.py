"""The broker's configuration reference (docs/configuration.md), generated from the config table.

    python -m shareq.server.config_reference > docs/configuration.md

One row per setting the broker accepts under ``--config`` (and ``IncrementalAlterConfigs`` on the
BROKER resource where it is dynamic): name, type, default, accepted values, whether it can change at
runtime, and what it does. A unit test keeps the committed file equal to this output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shareq.config import (
    KAFKA_CONFIGS_ACTED_ON,
    SETTINGS,
    Setting,
    _at_least_minus_one,
    _non_negative,
    _positive,
)
from shareq.coordinators.group.config import STORED_ONLY_GROUP_CONFIGS
from shareq.kafka_configs import GROUP_CONFIGS
from shareq.topic_configs import _TABLE as TOPIC_TABLE

from .handlers.configs import DYNAMIC_BROKER_KEYS

_NAMED_BOUNDS: dict[Callable[[Any], bool], str] = {
    _positive: ">= 1",
    _non_negative: ">= 0",
    _at_least_minus_one: ">= -1",
}
_TOPIC_OF = {t.synonym: t.name for t in TOPIC_TABLE if t.synonym is not None}

HEADER = """# Broker configuration reference

Generated from the broker's config table by `python -m shareq.server.config_reference`; do not edit
by hand (a unit test compares this file with the table).

Set a value at start with `shareq serve --config NAME=VALUE` (repeatable). Settings marked
*dynamic* can also be changed while the broker runs with IncrementalAlterConfigs on the BROKER
resource (`"0"` for this broker, `""` for the cluster default), e.g. Kafka's `kafka-configs.sh
--alter --entity-type brokers --entity-name 0 --add-config NAME=VALUE`; the others are read at start.
Group-level share configs (`share.*`) and topic configs are described by DescribeConfigs on their
resources; a topic config falls back to the broker setting named in its row.

## Settings shareq acts on

| name | type | default | accepted | dynamic | what it does |
|---|---|---|---|---|---|
"""


def _bounds(setting: Setting) -> str:
    if setting.bounds:
        return setting.bounds
    if setting.kafka is not None and setting.kafka.validator:
        return setting.kafka.validator
    named = _NAMED_BOUNDS.get(setting.validator) if setting.validator is not None else None
    if named is not None:
        return named
    topic = _TOPIC_OF.get(setting.name)
    if topic is not None:
        return f"as topic config `{topic}`"
    if setting.type is bool:
        return "true | false"
    return "any"


def _default(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _doc(setting: Setting) -> str:
    if setting.doc:
        return setting.doc
    if setting.name in KAFKA_CONFIGS_ACTED_ON:
        return KAFKA_CONFIGS_ACTED_ON[setting.name]
    topic = _TOPIC_OF.get(setting.name)
    return f"default of the topic config `{topic}`" if topic else ""


STORED_HEADER = """
## Kafka's other broker configs: accepted, stored, described

Every other broker config of Kafka 4.4 (the table is generated from Kafka's own definitions into
`shareq.kafka_configs`). `--config` and a `server.properties` brought from Kafka take them, with
Kafka's type and validation; IncrementalAlterConfigs changes the ones Kafka changes at runtime
(*dynamic*) and refuses the others as Kafka does; DescribeConfigs and `kafka-configs.sh --describe
--all` list them with Kafka's default, type and synonyms. On one shareq node they change nothing:
they are about replication and followers, the controller quorum, thread pools, tiered storage,
metrics reporters, quotas of replication traffic and other things a single Python process does not
have. A name neither Kafka nor shareq knows is kept and logged at start as supplied but not used,
as Kafka does.

| name | Kafka type | default | accepted | dynamic |
|---|---|---|---|---|
"""

GROUP_HEADER = """
## Group configs

Set on a group with IncrementalAlterConfigs on its GROUP resource (`kafka-configs.sh --entity-type
groups`), described with the broker config each falls back to. shareq acts on the share-group,
dead-letter and consumer-group session configs; the streams-group configs and
`consumer.assignment.interval.ms` are validated as Kafka validates them, stored and described, and
change nothing (shareq has no streams groups, and assigns a consumer group at every change).

| name | Kafka type | default | accepted | falls back to | shareq |
|---|---|---|---|---|---|
"""


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _kafka_default(default: str | None) -> str:
    return "(none)" if default is None else "(empty)" if default == "" else f"`{default}`"


def _render_stored() -> str:
    rows = []
    for name in sorted(SETTINGS):
        setting = SETTINGS[name]
        if not setting.stored_only or setting.kafka is None:
            continue
        kafka = setting.kafka
        cells = [
            f"`{name}`",
            kafka.type,
            _kafka_default(kafka.default),
            kafka.validator or "any",
            "dynamic" if name in DYNAMIC_BROKER_KEYS else "no",
        ]
        rows.append(_row(cells))
    return STORED_HEADER + "\n".join(rows) + "\n"


def _render_groups() -> str:
    rows = []
    for name in sorted(GROUP_CONFIGS):
        kafka = GROUP_CONFIGS[name]
        cells = [
            f"`{name}`",
            kafka.type,
            _kafka_default(kafka.default),
            kafka.validator or "any",
            f"`{kafka.synonyms[0]}`" if kafka.synonyms else "",
            "stored only" if name in STORED_ONLY_GROUP_CONFIGS else "acts on it",
        ]
        rows.append(_row(cells))
    return GROUP_HEADER + "\n".join(rows) + "\n"


def render() -> str:
    rows = []
    for name in sorted(SETTINGS):
        setting = SETTINGS[name]
        if setting.stored_only:
            continue
        cells = [
            f"`{name}`",
            setting.type.__name__,
            f"`{_default(setting.default)}`",
            _bounds(setting),
            "dynamic" if name in DYNAMIC_BROKER_KEYS else "no",
            _doc(setting),
        ]
        rows.append(_row(cells))
    return HEADER + "\n".join(rows) + "\n" + _render_stored() + _render_groups()


if __name__ == "__main__":
    print(render(), end="")
