"""What a handler gets besides its decoded request, and the shape of a handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shareq.protocol import Codec, RequestHeader

if TYPE_CHECKING:
    from .broker import Broker


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestContext:
    """Per-request facts: the broker, the connection's peer and the codec of this version.

    ``build(name, **fields)`` constructs a response entity (or a nested one by class name) of the
    request's version, dropping fields that version does not have.
    """

    broker: Broker
    header: RequestHeader
    codec: Codec
    peer: str
    connection_id: int

    @property
    def version(self) -> int:
        return self.header.api_version

    def build(self, name: str | None = None, /, **values: Any) -> Any:
        from shareq.protocol import build

        cls = self.codec.response_class if name is None else getattr(self.codec.response_module, name)
        return build(cls, **values)


Handler = Callable[[Any, RequestContext], "Awaitable[Any] | Any"]
"""Takes the decoded request and its context, returns the response entity (``None``: no reply),
or an awaitable of it (for long polls)."""
