"""Client-side error kinds: a broker's answer (``KafkaError`` with its ``ErrorCode``) versus a broken link.

``KafkaError`` is what a caller catches to inspect ``code``; ``BrokerConnectionError`` means the request may
or may not have reached the broker; ``UnsupportedVersionError`` means client and broker share no version.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


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
    """The broker supports no version of an API that this client can speak."""

    def __init__(self, api_key: int, client: tuple[int, int], broker: tuple[int, int] | None) -> None:
        self.api_key = api_key
        super().__init__(f"api key {api_key}: client speaks v{client[0]}-{client[1]}, broker offers {broker}")


class ProtocolViolation(ClientError):
    """The broker sent something this client cannot make sense of (wrong correlation id, bad frame)."""


def raise_for(code: ErrorCode | int, message: str | None = None, *, context: str = "") -> None:
    """Raise ``KafkaError`` unless ``code`` is NONE."""
    if int(code) != 0:
        raise KafkaError(code, message, context=context)
