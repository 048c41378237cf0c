"""Starting the real broker as a subprocess for integration tests, and librdkafka timeouts that fail fast."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

READY_PREFIX = "shareq listening on "
START_DEADLINE_S = 20.0

# librdkafka settings that make a broken broker fail a test in seconds, not minutes.
FAST_FAILURE = {
    "socket.timeout.ms": 5000,
    "message.timeout.ms": 15000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
    "retry.backoff.ms": 50,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class BrokerProcess:
    """``python -m shareq serve`` on a free port; restartable on the same data directory."""

    def __init__(self, data_dir: Path, *configs: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.configs = configs
        self.process: subprocess.Popen[str] | None = None
        self.stderr_lines: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        command = [sys.executable, "-m", "shareq", "serve", "--data-dir", str(self.data_dir)]
        command += ["--port", str(self.port), "--host", "127.0.0.1"]
        for config in self.configs:
            command += ["--config", config]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy()
        )
        lines: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=_pump, args=(self.process.stdout, lines, None), daemon=True).start()
        threading.Thread(
            target=_pump, args=(self.process.stderr, None, self.stderr_lines), daemon=True
        ).start()
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise TimeoutError(f"broker did not get ready: {self.stderr_lines[-20:]}")
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"broker exited before ready: {self.stderr_lines[-20:]}")
            if line.startswith(READY_PREFIX):
                return self

    def kill(self) -> None:
        """SIGKILL: no chance to flush or close anything."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def terminate(self) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
                raise
        return self.process.returncode

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _pump(stream: object, lines: queue.Queue[str | None] | None, sink: list[str] | None) -> None:
    for line in stream:  # type: ignore[attr-defined]
        if lines is not None:
            lines.put(line.rstrip("\n"))
        if sink is not None:
            sink.append(line.rstrip("\n"))
    if lines is not None:
        lines.put(None)
