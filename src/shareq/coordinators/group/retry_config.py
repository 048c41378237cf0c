"""shareq's own share-group configs for retries: redelivery backoff, the window mode, durable counts.

Kafka has no such keys; the ``shareq.`` prefix keeps a future Kafka key from colliding. With none
of them set a group behaves exactly as Kafka's: no delay, the span window, counts kept as Kafka
keeps them. On a Kafka cluster the keys are unknown and the behaviour is Kafka's.

- ``shareq.redelivery.backoff.ms`` (0: no delay): a record released (``release``), timed out
  (``timeout``) or given back by a leaving member (``leave``), for the triggers in
  ``shareq.redelivery.backoff.on``, becomes acquirable again only after
  ``min(max.ms, ms * multiplier ** (delivery count - 1))``, varied by ``± jitter``.
- ``shareq.share.window.mode``: ``span`` (Kafka's: SPSO + the cap bounds first deliveries) or
  ``count`` (only AVAILABLE, ACQUIRED and ARCHIVING records count against the cap).
- ``shareq.delivery.count.durable``: an acquisition's delivery count is written before the
  ShareFetch response leaves, so it survives a broker crash.

The broker bounds every delay with ``shareq.redelivery.backoff.ceiling.ms``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from shareq.coordinators.group.errors import GroupErrorCode, GroupRequestError

REDELIVERY_BACKOFF_MS = "shareq.redelivery.backoff.ms"
REDELIVERY_BACKOFF_MULTIPLIER = "shareq.redelivery.backoff.multiplier"
REDELIVERY_BACKOFF_MAX_MS = "shareq.redelivery.backoff.max.ms"
REDELIVERY_BACKOFF_JITTER = "shareq.redelivery.backoff.jitter"
REDELIVERY_BACKOFF_ON = "shareq.redelivery.backoff.on"
SHARE_WINDOW_MODE = "shareq.share.window.mode"
DELIVERY_COUNT_DURABLE = "shareq.delivery.count.durable"

BACKOFF_CEILING_PROPERTY = "shareq.redelivery.backoff.ceiling.ms"
"""The broker setting bounding every delay (a group's base and maximum, a client's per-release delay)."""
DEFAULT_BACKOFF_CEILING_MS = 900_000

TRIGGERS = ("release", "timeout", "leave")
WINDOW_MODES = ("span", "count")

RETRY_CONFIG_DEFAULTS: dict[str, str] = {
    REDELIVERY_BACKOFF_MS: "0",
    REDELIVERY_BACKOFF_MULTIPLIER: "2.0",
    REDELIVERY_BACKOFF_MAX_MS: "60000",
    REDELIVERY_BACKOFF_JITTER: "0.2",
    REDELIVERY_BACKOFF_ON: ",".join(TRIGGERS),
    SHARE_WINDOW_MODE: "span",
    DELIVERY_COUNT_DURABLE: "false",
}
"""Every shareq retry config with its default, in the order they are described."""

RETRY_CONFIG_NAMES: tuple[str, ...] = tuple(RETRY_CONFIG_DEFAULTS)
RETRY_STRING_CONFIGS = frozenset({REDELIVERY_BACKOFF_ON, SHARE_WINDOW_MODE})
RETRY_BOOLEAN_CONFIGS = frozenset({DELIVERY_COUNT_DURABLE})
RETRY_DOUBLE_CONFIGS = frozenset({REDELIVERY_BACKOFF_MULTIPLIER, REDELIVERY_BACKOFF_JITTER})

RETRY_CONFIG_DOCS: dict[str, str] = {
    REDELIVERY_BACKOFF_MS: "delay before the first redelivery of a released or timed-out record (0: none)",
    REDELIVERY_BACKOFF_MULTIPLIER: "each further delivery multiplies the delay by this (at least 1.0)",
    REDELIVERY_BACKOFF_MAX_MS: "upper bound of the delay",
    REDELIVERY_BACKOFF_JITTER: "the delay varies by up to this fraction (0.0-1.0), fixed per record",
    REDELIVERY_BACKOFF_ON: "triggers that delay: a subset of release,timeout,leave",
    SHARE_WINDOW_MODE: "span (Kafka's in-flight window) or count (only non-terminal records count)",
    DELIVERY_COUNT_DURABLE: "persist each acquisition's delivery count before the fetch answers",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryConfig:
    """The resolved shareq retry settings of a group (defaults: Kafka's behaviour)."""

    backoff_ms: int = 0
    multiplier: float = 2.0
    max_ms: int = 60_000
    jitter: float = 0.2
    on: frozenset[str] = frozenset(TRIGGERS)
    window_count: bool = False
    durable_counts: bool = False
    ceiling_ms: int = DEFAULT_BACKOFF_CEILING_MS

    @property
    def stall_warning(self) -> str | None:
        """Why a delayed head record can stall the partition (backoff with the span window)."""
        if self.backoff_ms > 0 and not self.window_count:
            return (
                f"{REDELIVERY_BACKOFF_MS} is set with {SHARE_WINDOW_MODE}=span: a delayed record at the "
                f"start offset stalls the partition once the window's worth of records behind it is done "
                f"(set {SHARE_WINDOW_MODE}=count)"
            )
        return None


def _invalid(message: str) -> GroupRequestError:
    return GroupRequestError(GroupErrorCode.INVALID_CONFIG, message)


def _int(name: str, raw: str, low: int, high: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise _invalid(f"{name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise _invalid(f"{name} must be between {low} and {high}, got {value}")
    return value


def _float(name: str, raw: str, low: float, high: float) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise _invalid(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value) or not low <= value <= high:
        raise _invalid(f"{name} must be between {low} and {high}, got {raw.strip()}")
    return value


def resolve_retry_config(overrides: Mapping[str, str], ceiling_ms: int) -> RetryConfig:
    """Validate the shareq retry keys of ``overrides`` (others are ignored here).

    Raises ``GroupRequestError(INVALID_CONFIG)`` naming the offending key."""

    def raw(name: str) -> str:
        return overrides.get(name, RETRY_CONFIG_DEFAULTS[name])

    backoff = _int(REDELIVERY_BACKOFF_MS, raw(REDELIVERY_BACKOFF_MS), 0, ceiling_ms)
    if REDELIVERY_BACKOFF_MAX_MS in overrides:
        max_ms = _int(REDELIVERY_BACKOFF_MAX_MS, overrides[REDELIVERY_BACKOFF_MAX_MS], 0, ceiling_ms)
    else:  # the default, within a lower ceiling
        max_ms = min(int(RETRY_CONFIG_DEFAULTS[REDELIVERY_BACKOFF_MAX_MS]), ceiling_ms)
    multiplier = _float(REDELIVERY_BACKOFF_MULTIPLIER, raw(REDELIVERY_BACKOFF_MULTIPLIER), 1.0, 1000.0)
    jitter = _float(REDELIVERY_BACKOFF_JITTER, raw(REDELIVERY_BACKOFF_JITTER), 0.0, 1.0)
    text = raw(REDELIVERY_BACKOFF_ON).strip().lower()
    on = frozenset(t.strip() for t in text.split(",") if t.strip())
    bad = sorted(on - set(TRIGGERS))
    if bad:
        raise _invalid(f"{REDELIVERY_BACKOFF_ON} must be a subset of {','.join(TRIGGERS)}, got {text!r}")
    mode = raw(SHARE_WINDOW_MODE).strip().lower()
    if mode not in WINDOW_MODES:
        raise _invalid(f"{SHARE_WINDOW_MODE} must be one of {', '.join(WINDOW_MODES)}, got {mode!r}")
    durable = raw(DELIVERY_COUNT_DURABLE).strip().lower()
    if durable not in ("true", "false"):
        raise _invalid(f"{DELIVERY_COUNT_DURABLE} must be true or false, got {durable!r}")
    return RetryConfig(
        backoff_ms=backoff,
        multiplier=multiplier,
        max_ms=max_ms,
        jitter=jitter,
        on=on,
        window_count=mode == "count",
        durable_counts=durable == "true",
        ceiling_ms=ceiling_ms,
    )
