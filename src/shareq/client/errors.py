"""Client-side error kinds: a broker's answer (``KafkaError`` with its ``ErrorCode``) versus a broken link.

``KafkaError`` is what a caller catches to inspect ``code``; ``BrokerConnectionError`` means the request may
or may not have reached the broker; ``UnsupportedVersionError`` means client and broker share no version.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from shareq.protocol import api_keys

_SHARE_GROUPS = (
    "the broker does not serve share groups (KIP-932): Kafka serves them from 4.1 with the share.version "
    "feature enabled (kafka-features.sh upgrade --feature share.version=1); shareq always does"
)
# What a broker that lacks an API is missing, and the setting that turns it on.
_MISSING = {
    api_keys.TXN_SHARE_ACKNOWLEDGE: (
        "the broker does not serve transactional acknowledgements (KIP-1289, TxnShareAcknowledge): on "
        "shareq, start it with share.transactional.acks.enable=true; a Kafka cluster needs a release that "
        "implements KIP-1289, with it enabled"
    ),
    api_keys.SHARE_GROUP_HEARTBEAT: _SHARE_GROUPS,
    api_keys.SHARE_FETCH: _SHARE_GROUPS,
    api_keys.SHARE_ACKNOWLEDGE: _SHARE_GROUPS,
}
# Versions that carry a feature of their own: (api key, lowest version) -> what it is.
_VERSION_FEATURES = {
    (api_keys.SHARE_ACKNOWLEDGE, 2): (
        "the broker cannot renew acquisition locks (KIP-1222's RENEW, ShareAcknowledge v2): Kafka serves it "
        "from 4.2; shareq always does"
    ),
}


class ClientError(Exception):
    """Base class of every error raised by ``shareq.client``."""


class KafkaError(ClientError):
    """The broker answered with a non-zero error code."""

    def __init__(self, code: ErrorCode | int, message: str | None = None, *, context: str = "") -> None:
        self.code = ErrorCode(int(code))
        self.message = message
        self.context = context
        text = f"{self.code.name} ({int(self.code)})"
        if context:
            text = f"{context}: {text}"
        if message:
            text = f"{text}: {message}"
        super().__init__(text)

    @property
    def retriable(self) -> bool:
        return bool(self.code.retriable)


class BrokerConnectionError(ClientError, ConnectionError):
    """The TCP link to a broker failed (connect, send, receive or a timeout)."""


class UnsupportedVersionError(ClientError):
    """The broker supports no version of an API that this client can speak; the message says what
    the broker lacks and which setting turns it on, where that is known."""

    def __init__(self, api_key: int, client: tuple[int, int], broker: tuple[int, int] | None) -> None:
        self.api_key = api_key
        offered = "none" if broker is None else f"v{broker[0]}-{broker[1]}"
        detail = f"api key {api_key}: client speaks v{client[0]}-{client[1]}, broker offers {offered}"
        feature = _VERSION_FEATURES.get((api_key, client[0])) if broker is not None else _MISSING.get(api_key)
        super().__init__(f"{feature} ({detail})" if feature else detail)


class ProtocolViolation(ClientError):
    """The broker sent something this client cannot make sense of (wrong correlation id, bad frame)."""


def raise_for(code: ErrorCode | int, message: str | None = None, *, context: str = "") -> None:
    """Raise ``KafkaError`` unless ``code`` is NONE."""
    if int(code) != 0:
        raise KafkaError(code, message, context=context)
