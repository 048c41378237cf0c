"""The shareq broker as a subprocess for the benchmarks: a free loopback port, and ``shareq serve``
started and waited for, so that each benchmark states only what its broker differs in."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

READY = "shareq listening on "


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def parse_cpus(setting: str | None) -> set[int] | None:
    """``all`` or nothing (None: no pinning), or a CPU list such as ``1``, ``0,2`` or ``0-1``."""
    if setting is None or setting == "all":
        return None
    cpus: set[int] = set()
    for part in setting.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def start_broker(
    data_dir: Path | str,
    port: int,
    *,
    configs: Sequence[str] = (),
    args: Sequence[str] = (),
    profile: str | None = None,
    cpus: set[int] | None = None,
    log_level: str | None = "WARNING",
    quiet: bool = False,
    loop_costs: bool = False,
) -> subprocess.Popen[str]:
    """``shareq serve`` on ``port``, returned once it listens.

    ``configs`` are ``key=value`` broker settings, ``args`` further ``serve`` options. With
    ``profile`` the broker runs under cProfile writing there; with ``cpus`` it runs on those CPUs
    only (its threads inherit that); ``quiet`` drops its stderr; ``loop_costs`` runs it through
    ``loop_costs.py`` (its loop's CPU per callback, printed on SIGUSR2).
    """
    command = [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else [])]
    command += [str(Path(__file__).with_name("loop_costs.py"))] if loop_costs else ["-m", "shareq"]
    command += ["serve", "--data-dir", str(data_dir), "--port", str(port), *args]
    for pair in configs:
        command += ["--config", pair]
    if log_level is not None:
        command += ["--log-level", log_level]
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
        env=os.environ.copy(),
        preexec_fn=pin,
    )
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if line.startswith(READY):
            return proc
        if not line:
            proc.kill()
            proc.wait()
            raise RuntimeError("broker did not start")
