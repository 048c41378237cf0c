"""SCRAM credentials as Kafka keeps them (RFC 5802 / RFC 7677): salt, stored key, server key and
iteration count per user and mechanism. The password itself is never kept.

AlterUserScramCredentials carries a salt and a *salted* password (the client ran PBKDF2); the
broker derives the stored and server keys from it, as Kafka's ``ScramFormatter`` does, and drops
the salted password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ScramMechanism(IntEnum):
    """The protocol's numbers (AlterUserScramCredentials, DescribeUserScramCredentials)."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        try:
            return cls[name.upper().replace("-", "_")]
        except KeyError:
            return None


MIN_ITERATIONS = 4096
"""Kafka's lower bound for both mechanisms."""
MAX_ITERATIONS = 16384
"""Kafka refuses more iterations than this (``Too many iterations``)."""
DEFAULT_ITERATIONS = 8192


class CredentialError(ValueError):
    """A credential Kafka refuses; ``error`` names the Kafka error code."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict[str, Any]:
        b64 = base64.b64encode
        return {
            "mechanism": self.mechanism.mechanism_name,
            "salt": b64(self.salt).decode(),
            "stored_key": b64(self.stored_key).decode(),
            "server_key": b64(self.server_key).decode(),
            "iterations": self.iterations,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScramCredential:
        mechanism = ScramMechanism.by_name(data["mechanism"])
        if mechanism is None:
            raise ValueError(f"unknown SCRAM mechanism {data['mechanism']!r}")
        b64d = base64.b64decode
        return cls(
            mechanism,
            b64d(data["salt"]),
            b64d(data["stored_key"]),
            b64d(data["server_key"]),
            int(data["iterations"]),
        )

    def verify_password(self, password: str) -> bool:
        """Whether ``password`` derives this credential (PLAIN over the SCRAM store)."""
        salted = salted_password(self.mechanism, password.encode(), self.salt, self.iterations)
        _, stored, _ = _keys(self.mechanism, salted)
        return hmac.compare_digest(stored, self.stored_key)


def check_iterations(iterations: int) -> None:
    if iterations < MIN_ITERATIONS:
        raise CredentialError("unacceptable_credential", "Too few iterations")
    if iterations > MAX_ITERATIONS:
        raise CredentialError("unacceptable_credential", "Too many iterations")


def salted_password(mechanism: ScramMechanism, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password, salt, iterations)


def _keys(mechanism: ScramMechanism, salted: bytes) -> tuple[bytes, bytes, bytes]:
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", mechanism.hash_name)
    return client_key, stored_key, server_key


def credential_from_salted(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored form of an upsertion (the salted password is not kept)."""
    check_iterations(iterations)
    if not salt or not salted:
        raise CredentialError("unacceptable_credential", "Salt and salted password must not be empty")
    _, stored_key, server_key = _keys(mechanism, salted)
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def credential_from_password(
    mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    """What the CLI stores for a password: a fresh random salt, PBKDF2, then the two keys."""
    check_iterations(iterations)
    salt = secrets.token_bytes(32)
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salt, salted, iterations)


class CredentialStore:
    """User -> mechanism -> credential; the shell persists ``to_json()`` after each change."""

    def __init__(self, users: dict[str, dict[ScramMechanism, ScramCredential]] | None = None) -> None:
        self._users: dict[str, dict[ScramMechanism, ScramCredential]] = users or {}

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def mechanisms_of(self, user: str) -> list[ScramCredential]:
        return sorted(self._users.get(user, {}).values(), key=lambda c: c.mechanism)

    def users(self) -> Iterator[str]:
        return iter(sorted(self._users))

    def upsert(self, user: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[credential.mechanism] = credential

    def delete(self, user: str, mechanism: ScramMechanism) -> bool:
        by_mechanism = self._users.get(user)
        if by_mechanism is None or mechanism not in by_mechanism:
            return False
        del by_mechanism[mechanism]
        if not by_mechanism:
            del self._users[user]
        return True

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        return {user: [c.to_json() for c in self.mechanisms_of(user)] for user in sorted(self._users)}

    @classmethod
    def from_json(cls, data: dict[str, list[dict[str, Any]]]) -> CredentialStore:
        store = cls()
        for user, credentials in data.items():
            for entry in credentials:
                store.upsert(user, ScramCredential.from_json(entry))
        return store
