"""A minimal blocking Kafka client on kio, for requests the real clients cannot be made to send."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer


class KioConnection:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation_id = 0

    def send(self, request: Any) -> Any:
        self.correlation_id += 1
        header_cls = request.__header_schema__
        out = io.BytesIO()
        entity_writer(header_cls)(
            out,
            header_cls(
                request_api_key=request.__api_key__,
                request_api_version=request.__version__,
                correlation_id=self.correlation_id,
                client_id="kio-test",
            ),
        )
        entity_writer(type(request))(out, request)
        payload = out.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        reply = self._recv_frame()
        response_cls = load_response_schema(request.__api_key__, request.__version__)
        (correlation_id,) = struct.unpack_from(">i", reply)
        assert correlation_id == self.correlation_id
        offset = 4 + (1 if response_cls.__header_schema__.__version__ >= 1 else 0)
        response, _ = entity_reader(response_cls)(reply, offset)
        return response

    def _recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv(4))[0]
        return self._recv(size)

    def _recv(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()
