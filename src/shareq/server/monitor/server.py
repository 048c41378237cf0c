"""The broker's HTTP port (aiohttp, on the broker's own loop): ``/metrics``, the web view,
``/healthz`` and ``/readyz``.

Running on the broker's loop means a scrape reads state between two requests, never in the middle
of one, with no locks; the price is that a scrape takes loop time, so it stays a walk over what is
in memory (runs, not records).

| path | what |
|---|---|
| ``/metrics`` | Prometheus text format |
| ``/healthz`` | 200 while the process serves HTTP |
| ``/readyz`` | 200 once logs are recovered and coordinators loaded, 503 before and while stopping |
| ``/`` | the live web view (HTML + one small script, no build step) |
| ``/api/state`` | what the view draws, as JSON |
| ``/events`` | the same, pushed every ``http.push.interval.ms`` (server-sent events) |
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from importlib import resources
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest

from .prometheus import BrokerCollector
from .view import snapshot

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("shareq.server.monitor")

_STATIC = {
    "/": ("index.html", "text/html"),
    "/view.js": ("view.js", "text/javascript"),
    "/view.css": ("view.css", "text/css"),
}


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


class MonitorServer:
    """``await start()`` binds the port (``port`` 0: any free one, then ``.port``); ``await stop()``."""

    def __init__(self, broker: Broker, host: str, port: int, push_interval_ms: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.push_interval_s = push_interval_ms / 1000.0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker))
        ProcessCollector(registry=self.registry)
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/events", self._events)
        for path in _STATIC:
            app.router.add_get(path, self._asset)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        server = site._server
        if self.port == 0 and isinstance(server, asyncio.Server) and server.sockets:
            self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self._stopping.set()  # event streams end, so cleanup need not wait for them
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- handlers --------------------------------------------------------------------------------

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        broker = self.broker
        if broker.ready and not broker.stopping:
            return web.Response(text="ready\n")
        reason = "stopping" if broker.stopping else "starting: recovering logs and loading coordinators"
        return web.Response(status=503, text=reason + "\n")

    async def _state(self, request: web.Request) -> web.Response:
        return web.json_response(snapshot(self.broker), dumps=_dumps)

    async def _asset(self, request: web.Request) -> web.Response:
        name, content_type = _STATIC[request.path]
        return web.Response(body=_static(name), content_type=content_type, charset="utf-8")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: one ``state`` event now and every push interval after."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        try:
            while not self._stopping.is_set() and not self.broker.stopping:
                data = _dumps(snapshot(self.broker)).encode()
                await response.write(b"event: state\ndata: " + data + b"\n\n")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.push_interval_s)
        except ConnectionError:
            pass  # the page went away
        return response


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))
