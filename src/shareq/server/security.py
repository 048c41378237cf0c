"""The asyncio side of security: TLS contexts per listener, each connection's session, and the
file that keeps SCRAM credentials and ACLs (``security.json`` in the data directory).

The decisions live in ``shareq.security`` (pure); this module only reads configs, files and
sockets and hands the results to it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shareq.config import BrokerConfig
from shareq.security.acl import AclBinding, Authorizer, parse_super_users
from shareq.security.jaas import JaasConfigError, PlainUsers, plain_users
from shareq.security.listeners import (
    Listener,
    ListenerConfigError,
    SecurityProtocol,
    advertised_for,
    parse_listeners,
    parse_protocol_map,
)
from shareq.security.sasl import SUPPORTED_MECHANISMS, SaslState
from shareq.security.scram import CredentialStore

from .topics import atomic_write

log = logging.getLogger("shareq.server.security")

ANONYMOUS = "User:ANONYMOUS"
SECURITY_FILE = "security.json"


class SecurityConfigError(ValueError):
    """A listener, TLS or SASL setting the broker cannot start with (one line for the operator)."""


@dataclass(slots=True, eq=False)
class ConnectionSession:
    """Who is on the other end of one connection and which listener it came through."""

    listener: Listener
    advertised: Listener
    client_host: str
    principal: str = ANONYMOUS
    sasl: SaslState | None = None
    idle_since: float | None = None
    """Loop time since which the connection waits for a request (``None``: one is in progress)."""
    writer: Any = None


def resolve_listeners(
    config: BrokerConfig, host: str, port: int
) -> tuple[list[Listener], dict[str, Listener]]:
    """The listeners to bind and what each advertises. Without ``listeners``, one PLAINTEXT
    listener on ``host:port`` advertising ``advertised.host``/``advertised.port`` if set."""
    controllers = {
        n.strip().upper() for n in (config["controller.listener.names"] or "").split(",") if n.strip()
    }
    text = _without(config["listeners"], controllers)
    try:
        protocol_map = parse_protocol_map(config["listener.security.protocol.map"])
        if not text:
            plain = Listener("PLAINTEXT", host, port, SecurityProtocol.PLAINTEXT)
            listeners = [plain]
        else:
            listeners = parse_listeners(text, protocol_map, default_host=host)
        advertised_text = _without(config["advertised.listeners"], controllers)
        if advertised_text:
            advertised = parse_listeners(
                advertised_text, protocol_map, default_host=host, setting="advertised.listeners"
            )
        elif config["advertised.host"] or config["advertised.port"]:
            first = listeners[0]
            advertised = [
                Listener(
                    first.name,
                    config["advertised.host"] or first.host,
                    config["advertised.port"] or 0,
                    first.protocol,
                )
            ]
        else:
            advertised = []
        return listeners, advertised_for(listeners, advertised)
    except ListenerConfigError as error:
        raise SecurityConfigError(str(error)) from error


def _without(text: str | None, names: set[str]) -> str | None:
    """A listener list without the controller listeners a KRaft server.properties names
    (``controller.listener.names``): one node serves no controller quorum, so those are not bound."""
    if not text or not names:
        return text
    kept = [e for e in text.split(",") if e.strip() and e.strip().split("://")[0].upper() not in names]
    return ",".join(kept)


def enabled_mechanisms(config: BrokerConfig, listener: Listener) -> tuple[str, ...]:
    text: str = config.for_listener(listener.name, "sasl.enabled.mechanisms") or ""
    names = tuple(m.strip().upper() for m in text.split(",") if m.strip())
    unsupported = [m for m in names if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise SecurityConfigError(
            f"sasl.enabled.mechanisms of {listener.name}: shareq serves {', '.join(SUPPORTED_MECHANISMS)}, "
            f"not {', '.join(unsupported)}"
        )
    return names


def listener_plain_users(config: BrokerConfig, listener: Listener) -> PlainUsers | None:
    """The PLAIN users of ``listener.name.<listener>.plain.sasl.jaas.config`` (Kafka's only broker-side
    form for them), or ``None`` when the listener lists none (PLAIN then checks SCRAM credentials)."""
    text = config.listener_text(listener.name, "plain.sasl.jaas.config")
    if text is None:
        return None
    try:
        users = plain_users(text)
    except JaasConfigError as error:
        raise SecurityConfigError(f"listener {listener.name}: {error}") from error
    return users if users.credentials else None


_TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


def server_ssl_context(config: BrokerConfig, listener: Listener) -> ssl.SSLContext:
    """A TLS server context from Kafka's PEM settings (file or inline), with ``ssl.client.auth``."""

    def get(name: str) -> Any:
        return config.for_listener(listener.name, name)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    enabled = [p.strip() for p in str(get("ssl.enabled.protocols") or "").split(",") if p.strip()]
    if enabled:  # Kafka's ssl.enabled.protocols: the versions a client may negotiate
        versions = [_TLS_VERSIONS[p] for p in enabled if p in _TLS_VERSIONS]
        if not versions:
            raise SecurityConfigError(
                f"ssl.enabled.protocols of {listener.name}: none of {', '.join(enabled)} is supported"
            )
        context.minimum_version, context.maximum_version = min(versions), max(versions)
    for kind in ("keystore", "truststore"):
        store_type = get(f"ssl.{kind}.type")
        if store_type is not None and str(store_type).upper() != "PEM":
            raise SecurityConfigError(f"ssl.{kind}.type of {listener.name}: shareq reads PEM only")
    password = get("ssl.key.password") or get("ssl.keystore.password")
    location = get("ssl.keystore.location")
    key, chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif key and chain:
            _load_inline_chain(context, key, chain, password)
        else:
            raise SecurityConfigError(
                f"listener {listener.name} ({listener.protocol.value}) needs ssl.keystore.location or "
                "ssl.keystore.key with ssl.keystore.certificate.chain"
            )
        trust_file, trust_inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
        if trust_file:
            context.load_verify_locations(cafile=trust_file)
        elif trust_inline:
            context.load_verify_locations(cadata=trust_inline)
    except (OSError, ssl.SSLError) as error:
        raise SecurityConfigError(f"TLS setup of listener {listener.name} failed: {error}") from error
    client_auth = get("ssl.client.auth")
    context.verify_mode = {
        "required": ssl.CERT_REQUIRED,
        "requested": ssl.CERT_OPTIONAL,
        "none": ssl.CERT_NONE,
    }[client_auth]
    if context.verify_mode != ssl.CERT_NONE and not (
        get("ssl.truststore.location") or get("ssl.truststore.certificates")
    ):
        raise SecurityConfigError(f"ssl.client.auth={client_auth} on {listener.name} needs a truststore")
    return context


def _load_inline_chain(context: ssl.SSLContext, key: str, chain: str, password: str | None) -> None:
    """``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``: Python's ``ssl`` reads files only,
    so the PEM goes to a private temporary file that is removed at once."""
    fd, path = tempfile.mkstemp(prefix="shareq-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(_pem_text(key) + "\n" + _pem_text(chain) + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _pem_text(value: str) -> str:
    """Kafka's inline PEM values may be one line with the newlines written as spaces."""
    value = value.strip()
    if "\n" in value:
        return value
    out: list[str] = []
    rest = value
    while "-----BEGIN " in rest:
        head_start = rest.index("-----BEGIN ")
        head_end = rest.index("-----", head_start + 11) + 5
        tail_start = rest.index("-----END ", head_end)
        tail_end = rest.index("-----", tail_start + 9) + 5
        body = rest[head_end:tail_start].split()
        out.extend([rest[head_start:head_end], *body, rest[tail_start:tail_end]])
        rest = rest[tail_end:]
    return "\n".join(out)


_RDN_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def ssl_principal(ssl_object: Any) -> str:
    """Kafka's default SSL principal: ``User:`` and the peer certificate's subject as RFC 2253
    writes it (most specific first: ``CN=carol,OU=...,O=...``), or ANONYMOUS without one."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    rdns = [
        "+".join(f"{_RDN_NAMES.get(key, key)}={_escape_rdn(value)}" for key, value in rdn)
        for rdn in cert["subject"]
    ]
    return "User:" + ",".join(reversed(rdns))


def _escape_rdn(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


class SecurityServices:
    """SCRAM credentials, ACLs (when an authorizer is configured) and their file."""

    def __init__(self, data_dir: Path, config: BrokerConfig) -> None:
        self._path = data_dir / SECURITY_FILE
        document: dict[str, Any] = {}
        if self._path.exists():
            document = json.loads(self._path.read_text())
        self.credentials = CredentialStore.from_json(document.get("scram_credentials", {}))
        bindings = [AclBinding.from_json(entry) for entry in document.get("acls", [])]
        self.authorizer: Authorizer | None = None
        self._stored_bindings = bindings
        if config["authorizer.class.name"]:
            self.authorizer = Authorizer(
                bindings,
                super_users=parse_super_users(config["super.users"]),
                allow_if_no_acl=config["allow.everyone.if.no.acl.found"],
            )

    def save(self) -> None:
        bindings = self.authorizer.bindings if self.authorizer is not None else self._stored_bindings
        document = {
            "scram_credentials": self.credentials.to_json(),
            "acls": [b.to_json() for b in bindings],
        }
        atomic_write(self._path, json.dumps(document, indent=1, sort_keys=True).encode())
        os.chmod(self._path, 0o600)
