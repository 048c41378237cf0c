"""Writing a framed response to a connection without copying its record bytes.

A response arrives as buffers (``encode_response_chunks``): the envelope in small pieces and the
record batches exactly as the log read returned them. On a plain TCP socket whose transport has
nothing queued, the buffers go to the kernel with ``os.writev`` straight from those objects; only
what the socket does not take at once is handed to the transport (which copies it into its
buffer) and waited for with ``drain``. Anything else (TLS, a queued transport) uses ``writelines``.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Sequence
from typing import Any

from shareq.protocol.messages import Buffer

_IOV_MAX = 1024 if hasattr(os, "writev") else 0  # Linux's IOV_MAX


def _plain_socket(transport: asyncio.BaseTransport) -> Any:
    """The transport's socket when it writes raw TCP (or Unix) bytes to it, else ``None``."""
    if not _IOV_MAX or transport.get_extra_info("sslcontext") is not None:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
        return None
    return sock


class Sender:
    """Writes the responses of one connection; what kind of socket it is is looked up once."""

    __slots__ = ("_sock", "writer")

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._sock = _plain_socket(writer.transport)

    async def send(self, chunks: Sequence[Buffer]) -> int:
        """Write ``chunks`` in order; returns how many bytes had to be buffered (copied) to do so."""
        writer = self.writer
        transport = writer.transport
        # fileno() is -1 once the socket is closed, so a descriptor number reused by another
        # connection is never written to
        fd: int = self._sock.fileno() if self._sock is not None else -1
        if fd < 0 or not isinstance(transport, asyncio.WriteTransport) or transport.get_write_buffer_size():
            writer.writelines(chunks)
            await writer.drain()
            return sum(len(c) for c in chunks)
        views = [memoryview(c) for c in chunks]
        i = 0
        while i < len(views):
            try:
                sent = os.writev(fd, views[i : i + _IOV_MAX])
            except (BlockingIOError, InterruptedError):
                break
            while sent:
                n = len(views[i])
                if sent < n:
                    views[i] = views[i][sent:]
                    break
                sent -= n
                i += 1
            else:
                continue
            break  # the socket took only part: it is full, the transport queues the rest
        buffered = 0
        for view in views[i:]:
            buffered += len(view)
            transport.write(view)
        if buffered:
            await writer.drain()
        return buffered
