"""The broker's configuration reference (docs/configuration.md), generated from the config table.

    python -m shareq.server.config_reference > docs/configuration.md

One row per setting the broker accepts under ``--config`` (and ``IncrementalAlterConfigs`` on the
BROKER resource where it is dynamic): name, type, default, accepted values, whether it can change at
runtime, and what it does. A unit test keeps the committed file equal to this output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shareq.config import SETTINGS, Setting, _at_least_minus_one, _non_negative, _positive
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

| name | type | default | accepted | dynamic | what it does |
|---|---|---|---|---|---|
"""


def _bounds(setting: Setting) -> str:
    if setting.bounds:
        return setting.bounds
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
    topic = _TOPIC_OF.get(setting.name)
    return f"default of the topic config `{topic}`" if topic else ""


def render() -> str:
    rows = []
    for name in sorted(SETTINGS):
        setting = SETTINGS[name]
        cells = [
            f"`{name}`",
            setting.type.__name__,
            f"`{_default(setting.default)}`",
            _bounds(setting),
            "dynamic" if name in DYNAMIC_BROKER_KEYS else "no",
            _doc(setting),
        ]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render(), end="")
