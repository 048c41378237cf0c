"""Kafka's listener configuration: ``listeners``, ``listener.security.protocol.map`` and
``advertised.listeners``.

A listener is ``NAME://host:port``; its name maps to one of four security protocols. Without a
map, Kafka's default maps each protocol's own name to itself, so ``SASL_SSL://:9094`` needs no map.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class ListenerConfigError(ValueError):
    """A listener setting Kafka would refuse; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: SecurityProtocol

    def url(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


DEFAULT_PROTOCOL_MAP = {p.value: p for p in SecurityProtocol}

_ENDPOINT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>-?\d+)$")


def parse_protocol_map(text: str | None) -> dict[str, SecurityProtocol]:
    """``"CLIENT:SASL_SSL,INTERNAL:PLAINTEXT"`` -> names to protocols (Kafka's default when unset)."""
    if not text:
        return dict(DEFAULT_PROTOCOL_MAP)
    mapping: dict[str, SecurityProtocol] = {}
    for entry in _items(text):
        name, sep, protocol = entry.partition(":")
        if not sep:
            raise ListenerConfigError(f"listener.security.protocol.map: {entry!r} is not NAME:PROTOCOL")
        try:
            mapping[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError as error:
            raise ListenerConfigError(f"No enum constant for security protocol {protocol.strip()}") from error
    return mapping


def parse_listeners(
    text: str, protocol_map: dict[str, SecurityProtocol], *, default_host: str, setting: str = "listeners"
) -> list[Listener]:
    """The endpoints of ``text``; an empty host takes ``default_host``. Names must be unique and
    mapped to a protocol, ports in 0..65535 (0: any free port)."""
    listeners: list[Listener] = []
    for entry in _items(text):
        match = _ENDPOINT.match(entry)
        if match is None:
            raise ListenerConfigError(f"{setting}: unable to parse {entry} to a broker endpoint")
        name = match["name"].upper()
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ListenerConfigError(
                f"{setting}: no security protocol defined for listener {name} "
                "(set listener.security.protocol.map)"
            )
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise ListenerConfigError(f"{setting}: port {port} of {name} is out of range")
        host = match["host"].strip("[]") or default_host
        if any(existing.name == name for existing in listeners):
            raise ListenerConfigError(f"{setting}: each listener must have a different name; {name} repeats")
        listeners.append(Listener(name, host, port, protocol))
    if not listeners:
        raise ListenerConfigError(f"{setting} names no endpoint")
    return listeners


def advertised_for(listeners: list[Listener], advertised: list[Listener]) -> dict[str, Listener]:
    """Listener name -> the endpoint clients are told; unnamed listeners advertise themselves."""
    out = {listener.name: listener for listener in listeners}
    for endpoint in advertised:
        if endpoint.name not in out:
            raise ListenerConfigError(
                f"advertised.listeners: {endpoint.name} is not a listener name in listeners"
            )
        out[endpoint.name] = endpoint
    return out


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
