"""Starting the real broker as a subprocess for integration tests, and librdkafka timeouts that fail fast.

A broker runs in its own process group and, on Linux, gets SIGKILL when the test process dies (a killed
test worker leaves no broker behind); it is stopped by killing its group.

A broker that exits without being stopped through ``kill`` or ``terminate`` died, unless the test said it
may exit (``expect_exit``, or a crash point armed with ``SHAREQ_CRASH_AT`` when it started). Each death is
kept, with the tail of the broker's stderr, until ``take_deaths`` hands it over: tests/conftest.py fails
the test a broker died in, even after its last assertion, and even if the test then killed or restarted
it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

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


def _detach_and_die_with_parent() -> None:
    """In the child before exec: its own process group (so it is stopped as a group), and on Linux a
    SIGKILL when its parent dies, so a killed test worker leaves no broker behind."""
    os.setsid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# Linux delivers the parent-death signal when the *thread* that forked the child exits, so a broker
# started from any thread but the main one is forked by this one thread, which lives as long as the
# test process (a broker started from a short-lived thread would otherwise die with it).
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker-spawner")


def spawn(command: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """``subprocess.Popen`` (text mode) of a process in its own group that dies with the test process."""
    if threading.current_thread() is threading.main_thread():
        # The main thread lives as long as the test process. (Forking every broker from the
        # spawner thread instead, Spark sessions created later in the process could not find the
        # Python data sources registered on them.)
        process: subprocess.Popen[str] = subprocess.Popen(
            command, text=True, preexec_fn=_detach_and_die_with_parent, **kwargs
        )
        return process
    future = _SPAWNER.submit(
        subprocess.Popen, command, text=True, preexec_fn=_detach_and_die_with_parent, **kwargs
    )
    spawned: subprocess.Popen[str] = future.result()
    return spawned


def kill_group(process: subprocess.Popen[Any]) -> None:
    """SIGKILL the process's group and reap the process."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


# The brokers started in this process that may still die or hold a death (take_deaths drops the rest).
_STARTED: set[BrokerProcess] = set()


def take_deaths() -> list[str]:
    """The deaths of brokers (unexpected exits) not yet handed over, each once: how it exited and the tail
    of its stderr."""
    deaths: list[str] = []
    for broker in list(_STARTED):
        broker._note_death()
        if broker.death is not None:
            deaths.append(broker.death)
            broker.death = None
        if not broker.alive():
            _STARTED.discard(broker)  # start() adds it again
    return deaths


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
        self._pumps: list[threading.Thread] = []
        # an exit of the current process is accounted for: stopped on purpose, expected, or noted
        self._exit_accounted = False
        # a death noted and not yet handed over by take_deaths
        self.death: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        command = [sys.executable, "-m", "shareq", "serve", "--data-dir", str(self.data_dir)]
        command += ["--port", str(self.port), "--host", "127.0.0.1"]
        for config in self.configs:
            command += ["--config", config]
        self._note_death()  # a broker restarted after it died still died
        self._exit_accounted = bool(os.environ.get("SHAREQ_CRASH_AT"))  # an armed crash point may fire
        _STARTED.add(self)
        self.process = spawn(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=os.environ.copy(),
        )
        lines: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None and self.process.stderr is not None
        self._pumps = [
            threading.Thread(target=_pump, args=(self.process.stdout, lines, None), daemon=True),
            threading.Thread(target=_pump, args=(self.process.stderr, None, self.stderr_lines), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()
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
                self._exit_accounted = True  # this error reports it
                raise RuntimeError(f"broker exited before ready: {self.stderr_lines[-20:]}")
            if line.startswith(READY_PREFIX):
                return self

    def kill(self) -> None:
        """SIGKILL (its whole process group): no chance to flush or close anything."""
        self._note_death()
        self._exit_accounted = True
        if self.process is not None:
            kill_group(self.process)

    def terminate(self) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        assert self.process is not None
        self._note_death()
        self._exit_accounted = True
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                kill_group(self.process)
                raise
        return self.process.returncode

    def expect_exit(self) -> None:
        """The test lets the broker exit by itself, or leaves it dead: its exit is no death."""
        self._exit_accounted = True

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _note_death(self) -> None:
        """If the broker exited and nothing accounts for it, keep the death for take_deaths."""
        if self.process is None or self._exit_accounted or self.process.poll() is None:
            return
        self._exit_accounted = True
        for pump in self._pumps:
            pump.join(timeout=5)
        tail = "\n".join(self.stderr_lines[-30:]) or "(nothing)"
        status = self.process.returncode
        self.death = f"shareq broker {self.bootstrap} died (exit status {status}); its stderr ends:\n{tail}"


def _pump(stream: object, lines: queue.Queue[str | None] | None, sink: list[str] | None) -> None:
    for line in stream:  # type: ignore[attr-defined]
        if lines is not None:
            lines.put(line.rstrip("\n"))
        if sink is not None:
            sink.append(line.rstrip("\n"))
    if lines is not None:
        lines.put(None)
