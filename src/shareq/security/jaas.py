"""Kafka's broker-side JAAS settings for SASL/PLAIN: ``PlainLoginModule`` with ``user_<name>`` entries.

A Kafka broker lists its PLAIN users in ``listener.name.<listener>.plain.sasl.jaas.config``::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";

so that a Kafka ``server.properties`` carries over, shareq reads the same line. The passwords are
salted and hashed as they are read (a SCRAM-SHA-256 credential each) and the text is not kept: only
the operator's file holds them in the clear, as with Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .scram import MIN_ITERATIONS, ScramCredential, ScramMechanism, credential_from_password

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value that is not one login module entry Kafka would accept."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One login module line: its class, control flag and ``key="value"`` options."""

    module: str
    flag: str
    options: dict[str, str]


def parse_jaas_config(text: str) -> JaasEntry:
    """Parse one JAAS entry as Kafka's ``sasl.jaas.config`` holds it (a single module, ``;`` ended)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise JaasConfigError(f"sasl.jaas.config: cannot read {text[pos : pos + 20]!r}")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            tokens.append(("word", word))
        elif equals is not None:
            tokens.append(("=", "="))
        elif semicolon is not None:
            tokens.append((";", ";"))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word" or tokens[-1][0] != ";":
        raise JaasConfigError(
            'sasl.jaas.config must be one entry: <LoginModule class> <flag> key="value" ... ;'
        )
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise JaasConfigError(f"sasl.jaas.config: {tokens[1][1]!r} is not a JAAS control flag")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3:
        raise JaasConfigError('sasl.jaas.config: options must be key="value" pairs')
    for i in range(0, len(body), 3):
        (kind_k, key), (kind_eq, _), (kind_v, value) = body[i : i + 3]
        if kind_k != "word" or kind_eq != "=" or kind_v not in ("value", "word"):
            raise JaasConfigError(f'sasl.jaas.config: option {key!r} must read {key}="value"')
        options[key] = value
    return JaasEntry(module, flag, options)


@dataclass(frozen=True, slots=True)
class PlainUsers:
    """The PLAIN users a listener's JAAS entry lists, each kept as a salted hash."""

    credentials: dict[str, ScramCredential]

    def verify(self, user: str, password: str) -> bool:
        credential = self.credentials.get(user)
        return credential is not None and credential.verify_password(password)


def plain_users(jaas_config: str) -> PlainUsers:
    """The ``user_<name>="<password>"`` options of a ``PlainLoginModule`` entry, hashed (with
    SCRAM's lowest iteration count: every PLAIN login pays for one derivation)."""
    entry = parse_jaas_config(jaas_config)
    if entry.module != PLAIN_LOGIN_MODULE:
        raise JaasConfigError(
            f"plain.sasl.jaas.config names {entry.module}; SASL/PLAIN needs {PLAIN_LOGIN_MODULE}"
        )
    users = {
        key[len("user_") :]: credential_from_password(ScramMechanism.SCRAM_SHA_256, value, MIN_ITERATIONS)
        for key, value in entry.options.items()
        if key.startswith("user_") and len(key) > len("user_")
    }
    return PlainUsers(users)
