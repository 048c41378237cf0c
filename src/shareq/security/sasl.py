"""One connection's SASL state: SaslHandshake, SaslAuthenticate and re-authentication (KIP-368).

Before a session is established only ApiVersions, SaslHandshake and SaslAuthenticate are served
(Kafka closes the connection on anything else). PLAIN is checked against the users of the
listener's ``plain.sasl.jaas.config`` when it lists any (as Kafka does), else against the salted
SCRAM credentials (no password is kept in the clear); SCRAM-SHA-256/512 run RFC 5802's exchange
through ``scramp``. With ``connections.max.reauth.ms`` set, a session lasts that long: the client
re-authenticates on the same connection before it ends, and a request after the end closes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from scramp import ScramException
from scramp import ScramMechanism as _ScrampMechanism

from shareq.protocol.api_keys import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE

from .jaas import PlainUsers
from .scram import CredentialStore, ScramMechanism

ALWAYS_ALLOWED = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class Phase(Enum):
    HANDSHAKE = "handshake"  # waiting for SaslHandshake
    AUTHENTICATE = "authenticate"  # mechanism chosen, tokens flowing
    AUTHENTICATED = "authenticated"
    FAILED = "failed"  # the failing response is sent, then the connection closes


@dataclass(frozen=True, slots=True)
class Step:
    """What to answer to one SaslAuthenticate: an error name (``None`` on success) and bytes."""

    error: str | None
    message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int = 0


class SaslState:
    """The SASL side of one connection (pure; ``now`` in milliseconds)."""

    def __init__(
        self,
        store: CredentialStore,
        enabled: tuple[str, ...],
        reauth_ms: int,
        plain_users: PlainUsers | None = None,
    ) -> None:
        self._store = store
        self._plain_users = plain_users
        self.enabled = enabled
        self._reauth_ms = reauth_ms
        self.phase = Phase.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.session_end: int | None = None  # None: no expiry
        self._scram: tuple[Any, str] | None = None
        self._reauthenticating = False

    # -- gate ----------------------------------------------------------------------------------

    def admits(self, api_key: int, now: int) -> str | None:
        """``None`` when a request of ``api_key`` may be served now, else why the connection closes."""
        if api_key in ALWAYS_ALLOWED:
            return None
        if self.phase is not Phase.AUTHENTICATED:
            if self._reauthenticating and self.principal is not None and not self._expired(now):
                return None  # re-authentication under way: the old session still serves
            return f"unexpected api {api_key} before SASL authentication completed"
        if self._expired(now):
            return "SASL session expired without re-authentication"
        return None

    def _expired(self, now: int) -> bool:
        return self.session_end is not None and now >= self.session_end

    # -- handshake ----------------------------------------------------------------------------

    def handshake(self, mechanism: str) -> str | None:
        """The error name to answer with (``None``: accepted)."""
        if self.phase is Phase.AUTHENTICATED:
            self._reauthenticating = True  # KIP-368: a new handshake starts re-authentication
        elif self.phase is not Phase.HANDSHAKE:
            return "illegal_sasl_state"
        if mechanism not in self.enabled:
            return "unsupported_sasl_mechanism"
        if self._reauthenticating and self.mechanism is not None and mechanism != self.mechanism:
            return "illegal_sasl_state"  # Kafka: re-authentication must keep the mechanism
        self.mechanism = mechanism
        self.phase = Phase.AUTHENTICATE
        self._scram = None
        return None

    # -- authenticate -------------------------------------------------------------------------

    def authenticate(self, auth_bytes: bytes, now: int) -> Step:
        if self.phase is not Phase.AUTHENTICATE or self.mechanism is None:
            self.phase = Phase.FAILED
            return Step("illegal_sasl_state", "SaslAuthenticate before SaslHandshake", b"")
        if self.mechanism == "PLAIN":
            return self._plain(auth_bytes, now)
        return self._scram_step(auth_bytes, now)

    def _plain(self, token: bytes, now: int) -> Step:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return self._fail("Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user_b, password_b = parts
        try:
            user, password, authz = user_b.decode(), password_b.decode(), authzid.decode()
        except UnicodeDecodeError:
            return self._fail("Authentication failed: Invalid username or password")
        if not user:
            return self._fail("Authentication failed: username not specified")
        if not password:
            return self._fail("Authentication failed: password not specified")
        if authz and authz != user:
            return self._fail(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if self._plain_users is not None:
            known = self._plain_users.verify(user, password)
        else:
            credentials = self._store.mechanisms_of(user)
            known = any(c.verify_password(password) for c in credentials)
        if not known:
            return self._fail("Authentication failed: Invalid username or password")
        return self._succeed(user, b"", now)

    def _scram_step(self, token: bytes, now: int) -> Step:
        mechanism = ScramMechanism.by_name(self.mechanism or "")
        assert mechanism is not None
        failure = (
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {mechanism.mechanism_name}"
        )
        try:
            text = token.decode()
        except UnicodeDecodeError:
            return self._fail(failure)
        try:
            if self._scram is None:
                server = _ScrampMechanism(mechanism.mechanism_name).make_server(self._lookup(mechanism))
                server.set_client_first(text)
                first = server.get_server_first()
                self._scram = (server, _client_first_user(text))
                return Step(None, None, first.encode())
            server, user = self._scram
            server.set_client_final(text)
            final: str = server.get_server_final()
        except ScramException:
            return self._fail(failure)
        return self._succeed(user, final.encode(), now)

    def _lookup(self, mechanism: ScramMechanism) -> Callable[[str], tuple[bytes, bytes, bytes, int] | None]:
        def auth_fn(user: str) -> tuple[bytes, bytes, bytes, int] | None:
            credential = self._store.get(user, mechanism)
            if credential is None:
                return None
            return credential.salt, credential.stored_key, credential.server_key, credential.iterations

        return auth_fn

    def _succeed(self, user: str, auth_bytes: bytes, now: int) -> Step:
        principal = f"User:{user}"
        if self._reauthenticating and self.principal is not None and principal != self.principal:
            return self._fail(
                f"Cannot change principals during re-authentication from {self.principal}: {principal}"
            )
        self.principal = principal
        self.phase = Phase.AUTHENTICATED
        self._reauthenticating = False
        self._scram = None
        self.session_end = now + self._reauth_ms if self._reauth_ms > 0 else None
        return Step(None, None, auth_bytes, self._reauth_ms if self._reauth_ms > 0 else 0)

    def _fail(self, message: str) -> Step:
        self.phase = Phase.FAILED
        self._scram = None
        return Step("sasl_authentication_failed", message, b"")


def _client_first_user(client_first: str) -> str:
    """The user of a SCRAM client-first message (``n,,n=alice,r=...``; ``=2C`` / ``=3D`` escapes)."""
    bare = client_first.split(",", 2)[2]
    for attribute in bare.split(","):
        if attribute.startswith("n="):
            return attribute[2:].replace("=2C", ",").replace("=3D", "=")
    return ""
