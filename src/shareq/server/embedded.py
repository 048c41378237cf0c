"""``EmbeddedBroker``: a real broker on an ephemeral port in a background thread, for tests and notebooks.

with EmbeddedBroker(tmp_path) as broker:
    Producer({"bootstrap.servers": broker.bootstrap})
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from shareq.config import BrokerConfig

from .broker import Broker

T = TypeVar("T")


class EmbeddedBroker:
    """Starts a ``Broker`` with its own event loop in a daemon thread; stops it on exit."""

    def __init__(
        self,
        data_dir: Path | str | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tempdir = tempfile.TemporaryDirectory(prefix="shareq-")
            data_dir = self._tempdir.name
        self.broker = Broker(Path(data_dir), BrokerConfig.from_mapping(config or {}), host=host, port=port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="shareq-broker", daemon=True)
        self._started: Future[None] = Future()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.broker.start())
        except BaseException as error:
            self._started.set_exception(error)
            return
        self._started.set_result(None)
        self._loop.run_forever()

    def start(self) -> EmbeddedBroker:
        self._thread.start()
        self._started.result(timeout=30)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None

    def call(self, function: Any, *args: Any) -> Any:
        """Run ``function(*args)`` on the broker's loop (the only safe way to touch its state)."""

        async def invoke() -> Any:
            return function(*args)

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(timeout=30)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the broker's loop and return its result (for awaiting broker state)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def http_url(self) -> str:
        """Base URL of the HTTP port (metrics, web view, health); the broker needs ``http.port``."""
        monitor = self.broker.monitor
        if monitor is None:
            raise RuntimeError("the broker serves no HTTP port: set the config http.port")
        return f"http://{monitor.host}:{monitor.port}"

    @property
    def bootstrap(self) -> str:
        return f"{self.broker.host}:{self.broker.port}"

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
