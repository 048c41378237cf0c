"""One client connection: read a frame, decode, dispatch, write the response, repeat.

Requests of one connection are handled strictly in order (Kafka's model), so a long-polling
Fetch simply delays that connection. A peer fault closes only this connection, with one log line
naming the peer and the reason; nothing a client sends can stop the server.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any

from shareq.protocol import (
    PeerProtocolError,
    UnsupportedRequest,
    decode_request,
    encode_response_chunks,
    encode_unsupported,
    parse_request_header,
    read_frame_size,
)
from shareq.protocol.api_keys import METADATA
from shareq.protocol.messages import Buffer

from .context import RequestContext
from .log_limit import RateLimitedLog
from .metadata_cache import Generation, Key
from .send import Sender

if TYPE_CHECKING:
    from .broker import Broker
    from .security import ConnectionSession

log = logging.getLogger("shareq.server.connection")
peer_warnings = RateLimitedLog(log)
_METADATA_KEY = METADATA.to_bytes(2, "big")


async def serve_connection(
    broker: Broker,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    connection_id: int,
    session: ConnectionSession,
    peer: str,
) -> None:
    max_frame = broker.config["socket.request.max.bytes"]
    clock = asyncio.get_running_loop().time
    sender = Sender(writer)
    try:
        while True:
            session.idle_since = clock()
            try:
                prefix = await reader.readexactly(4)
            except asyncio.IncompleteReadError as error:
                if error.partial:
                    peer_warnings.info("closing %s: connection ended inside a length prefix", peer)
                return
            session.idle_since = None  # a request in progress (a long poll too) is not idleness
            size = read_frame_size(prefix, max_frame)
            try:
                payload = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                peer_warnings.info("closing %s: connection ended inside a %d-byte frame", peer, size)
                return
            started = time.perf_counter()
            reply = await _handle_frame(broker, payload, peer, connection_id, session)
            if reply is not None:
                api_key, chunks = reply
                buffered = await sender.send(chunks)
                io = broker.io.api(api_key)
                io.requests += 1
                io.bytes_received += size + 4
                io.bytes_sent += sum(len(c) for c in chunks)
                io.bytes_buffered += buffered
                broker.counters.request_done(api_key, time.perf_counter() - started)
    except PeerProtocolError as error:
        peer_warnings.warning("closing %s: %s", peer, error)
    except (ConnectionError, asyncio.CancelledError):
        pass
    except Exception:
        log.exception("closing %s after an internal error", peer)
    finally:
        writer.close()


async def _handle_frame(
    broker: Broker, payload: bytes, peer: str, connection_id: int, session: ConnectionSession
) -> tuple[int, list[Buffer]] | None:
    """The api key and the framed reply (``None``: the request takes no reply)."""
    supported = broker.handlers.versions
    cache = broker.metadata_cache
    cache_key: Key | None = None
    generation: Generation = (0, 0)
    if payload[:2] == _METADATA_KEY:  # a question asked before is answered from the cache
        header = parse_request_header(payload)
        generation = cache.generation()
        cache_key = cache.key(header, payload, session)
        cached = cache.lookup(cache_key, generation, header.correlation_id)
        if cached is not None:
            _admit(session, METADATA)
            return METADATA, cached
    try:
        request = decode_request(payload, supported)
    except UnsupportedRequest as unsupported:
        peer_warnings.info(
            "%s sent unsupported api %d v%d", peer, unsupported.api_key, unsupported.api_version
        )
        return unsupported.api_key, [encode_unsupported(unsupported, supported)]
    _admit(session, request.api_key)
    handler = broker.handlers.get(request.api_key)
    assert handler is not None  # decode_request only accepts registered keys
    context = RequestContext(
        broker=broker,
        header=request.header,
        codec=request.codec,
        peer=peer,
        connection_id=connection_id,
        session=session,
    )
    response: Any = handler(request.body, context)
    if inspect.isawaitable(response):
        response = await response
    if response is None:
        return None
    chunks = encode_response_chunks(request.codec, request.header.correlation_id, response)
    if cache_key is not None:
        cache.store(cache_key, generation, request.codec, response, chunks)
    return request.api_key, chunks


def _admit(session: ConnectionSession, api_key: int) -> None:
    if session.sasl is not None:  # the one check security adds to a plain listener's path
        refusal = session.sasl.admits(api_key, time.time_ns() // 1_000_000)
        if refusal is not None:
            raise PeerProtocolError(refusal)
