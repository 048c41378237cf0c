"""Encoded Metadata answers, reused while nothing they depend on has changed.

Clients ask Metadata over and over with the same question (one topic, every second, from a
thousand connections), and the broker gave the same answer each time: building and encoding it
was most of what such a request cost. A cached answer is the response body exactly as the full
path encoded it; a hit frames it behind the new correlation id without decoding the request.

What decides an answer is in the key or the generation:

- the key: the request's version and body bytes (the topics asked for, auto-creation and the
  authorized-operations flags), the listener (its advertised host and port), and, when an
  authorizer is set, the principal and the client host (ACLs may name either);
- the generation: the topic registry's (topics created, deleted or grown) and the authorizer's
  (bindings added or removed). Any change empties the cache.

Only answers without an error are kept (a missing or denied topic is asked again in full, so
auto-creation and its checks run as before), and only when the request changed nothing while it
was answered (an auto-created topic bumps the registry's generation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from shareq.protocol import Codec, RequestHeader, frame
from shareq.protocol.header import response_header
from shareq.protocol.messages import Buffer

if TYPE_CHECKING:
    from .broker import Broker
    from .security import ConnectionSession

CAPACITY = 1024
"""Distinct questions kept at once; past this the cache starts again empty."""

Key = tuple[Any, ...]
Generation = tuple[int, int]


@dataclass(slots=True)
class _Answer:
    header_version: int
    body: bytes


class MetadataCache:
    """The encoded answers of one broker (``hits`` and ``misses`` count lookups)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._answers: dict[Key, _Answer] = {}
        self._generation: Generation = (-1, -1)
        self.hits = 0
        self.misses = 0

    def generation(self) -> Generation:
        security = self._broker.security
        authorizer = security.authorizer if security is not None else None
        return self._broker.topics.generation, authorizer.generation if authorizer is not None else 0

    def key(self, header: RequestHeader, payload: bytes, session: ConnectionSession) -> Key:
        security = self._broker.security
        if security is not None and security.authorizer is not None:
            who: tuple[str, ...] = (session.principal, session.client_host)
        else:
            who = ()
        advertised = session.advertised
        return (header.api_version, payload[header.body_offset :], advertised.host, advertised.port, *who)

    def lookup(self, key: Key, generation: Generation, correlation_id: int) -> list[Buffer] | None:
        """The framed answer for ``key``, or ``None`` (not cached, or cached before a change;
        ``generation`` is what ``generation()`` says now)."""
        if self._generation != generation:
            self._answers.clear()
            self.misses += 1
            return None
        answer = self._answers.get(key)
        if answer is None:
            self.misses += 1
            return None
        self.hits += 1
        return [frame(response_header(correlation_id, answer.header_version) + answer.body)]

    def store(
        self, key: Key, before: Generation, request_codec: Codec, response: Any, chunks: list[Buffer]
    ) -> None:
        """Keep an answer the full path just encoded, if it may be reused."""
        if before != self.generation() or not _clean(response):
            return
        if self._generation != before or len(self._answers) >= CAPACITY:
            self._answers.clear()
            self._generation = before
        header_size = 4 + len(response_header(0, request_codec.response_header_version))
        self._answers[key] = _Answer(request_codec.response_header_version, b"".join(chunks)[header_size:])


def _clean(response: Any) -> bool:
    if getattr(response, "error_code", ErrorCode.none) != ErrorCode.none:
        return False
    return all(topic.error_code == ErrorCode.none for topic in response.topics)
