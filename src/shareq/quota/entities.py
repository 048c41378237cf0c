"""Client quotas: what is configured for which entity, validated, described and resolved (no I/O).

An entity names a ``user``, a ``client-id``, both, or an ``ip``; a name of ``None`` is that type's
default. Values are Kafka's quota keys. The rules are Kafka's (``ClientQuotaControlManager`` for
alterations, ``ClientQuotasImage.describe`` for filters, ``DefaultQuotaCallback`` for which entity
applies to a connection); a refusal raises ``QuotaError`` carrying the protocol's error name.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
# Kafka's QuotaConfig: the keys each kind of entity takes, with their types.
USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    "request_percentage": "double",
    "controller_mutation_rate": "double",
}
IP_KEYS = {"connection_creation_rate": "int"}
_MAX = {"long": 2.0**63 - 1, "int": 2.0**31 - 1}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

ANONYMOUS = "ANONYMOUS"
"""The user of a connection without authentication, as Kafka names it (``User:ANONYMOUS``)."""

Entity = tuple[tuple[str, str | None], ...]
"""``((entity type, name or None for the default), ...)`` sorted by type."""


class QuotaError(ValueError):
    """A refused request; ``error`` is the protocol error's name (``invalid_request`` ...)."""

    def __init__(self, message: str, error: str = "invalid_request") -> None:
        super().__init__(message)
        self.error = error


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """Validate an entity's types and names (Kafka's ``validateEntity`` and the combination rule)."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            raise QuotaError(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise QuotaError(f"Empty {entity_type} not supported")
        seen[entity_type] = name
    if not seen:
        raise QuotaError("Invalid empty client quota entity")
    if IP in seen:
        if len(seen) > 1:
            raise QuotaError(
                "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
            )
        address = seen[IP]
        if address is not None and not _is_ip(address):
            raise QuotaError(f"{address} is not a valid IP or resolvable host.")
    return tuple(sorted(seen.items()))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def valid_keys(entity: Entity) -> Mapping[str, str]:
    return IP_KEYS if entity[0][0] == IP else USER_CLIENT_KEYS


def validate_value(entity: Entity, key: str, value: float) -> None:
    """Kafka's ``validateQuotaKeyValue``: a known key, a positive value, integral where it must be."""
    kind = valid_keys(entity).get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if value <= 0.0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if kind == "double":
        return
    if value > _MAX[kind]:
        raise QuotaError(
            f"Proposed value for {key} is too large for {'a LONG' if kind == 'long' else 'an INT'}."
        )
    if abs(value % 1.0) > 1e-6:
        raise QuotaError(f"{key} cannot be a fractional value.")


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """One component of a DescribeClientQuotas filter."""

    entity_type: str
    match_type: int
    match: str | None = None


class ClientQuotas:
    """Quota values per entity; ``alter`` changes them, ``describe`` and ``resolve`` read them."""

    def __init__(self, entries: Mapping[Entity, Mapping[str, float]] | None = None) -> None:
        self.entries: dict[Entity, dict[str, float]] = {
            entity: dict(values) for entity, values in (entries or {}).items() if values
        }

    # -- alterations -------------------------------------------------------------------------------

    def check_alter(self, entity: Entity, changes: Mapping[str, float | None]) -> None:
        """Raise ``QuotaError`` unless every change is valid for ``entity`` (removals always are)."""
        for key, value in changes.items():
            if value is not None:
                validate_value(entity, key, value)

    def alter(self, entity: Entity, changes: Mapping[str, float | None]) -> bool:
        """Apply validated changes (``None`` removes a key); True when something changed."""
        current = dict(self.entries.get(entity, {}))
        updated = dict(current)
        for key, value in changes.items():
            if value is None:
                updated.pop(key, None)
            else:
                updated[key] = value
        if updated == current:
            return False
        if updated:
            self.entries[entity] = updated
        else:
            self.entries.pop(entity, None)
        return True

    # -- description -------------------------------------------------------------------------------

    def describe(
        self, components: Sequence[FilterComponent], *, strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities matching a filter, as ``ClientQuotasImage.describe`` selects them."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for c in components:
            if not c.entity_type:
                raise QuotaError("Invalid empty entity type.")
            if c.entity_type in exact or c.entity_type in typed:
                raise QuotaError(f"Entity type {c.entity_type} cannot appear more than once in the filter.")
            if c.entity_type not in ENTITY_TYPES:
                raise QuotaError(f"Unsupported entity type {c.entity_type}", "unsupported_version")
            if c.match_type == MATCH_EXACT:
                if c.match is None:
                    raise QuotaError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[c.entity_type] = c.match
            elif c.match_type == MATCH_DEFAULT:
                if c.match is not None:
                    raise QuotaError(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                    )
                exact[c.entity_type] = None
            elif c.match_type == MATCH_SPECIFIED:
                if c.match is not None:
                    raise QuotaError(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                    )
                typed.add(c.entity_type)
            else:
                raise QuotaError(f"Unknown match type {c.match_type}")
        if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
            raise QuotaError(
                "Invalid entity filter component combination. IP filter component should not be used "
                "with user or clientId filter component."
            )
        out = []
        for entity, values in self.entries.items():
            names = dict(entity)
            if strict and len(names) != len(exact) + len(typed):
                continue
            if any(t not in names or names[t] != name for t, name in exact.items()):
                continue
            if any(t not in names for t in typed):
                continue
            out.append((entity, dict(values)))
        return out

    # -- enforcement -------------------------------------------------------------------------------

    def resolve(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """The quota ``key`` that applies to a connection, and the ``(user, client-id)`` its usage is
        counted under; None when no quota applies. Most specific first (``DefaultQuotaCallback``):
        user and client-id, user and default client-id, user, default user and client-id, both
        defaults, default user, client-id, default client-id."""
        levels: tuple[tuple[Entity, tuple[str, str]], ...] = (
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, None), (USER, user)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
            (((CLIENT_ID, None), (USER, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)),
        )
        for entity, tags in levels:
            value = self.entries.get(entity, {}).get(key)
            if value is not None:
                return value, tags
        return None

    # -- persistence -------------------------------------------------------------------------------

    def to_json(self) -> list[dict[str, object]]:
        return [
            {"entity": [[t, n] for t, n in entity], "values": dict(sorted(values.items()))}
            for entity, values in sorted(self.entries.items(), key=lambda item: repr(item[0]))
        ]

    @classmethod
    def from_json(cls, document: Iterable[Mapping[str, object]]) -> ClientQuotas:
        entries: dict[Entity, dict[str, float]] = {}
        for item in document:
            pairs = item["entity"]
            values = item["values"]
            assert isinstance(pairs, list) and isinstance(values, dict)
            entity: Entity = tuple(sorted((str(t), None if n is None else str(n)) for t, n in pairs))
            entries[entity] = {str(k): float(v) for k, v in values.items()}
        return cls(entries)
