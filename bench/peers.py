"""Run the peer brokers (Redis Streams, RabbitMQ) beside a shareq benchmark, in the same invocation.

The peers are measured by the reference scripts shipped beside the project (``bench-peers``: its
``servers.sh``, ``redis_streams.py``, ``rabbitmq_queue.py`` and ``quiet_gate.py``), called here as
subprocesses by path; nothing of them is copied. Absolute figures drift 20-30% between runs on a
shared 2-core box, so only ratios taken in one run mean anything.

    PYTHONPATH=src python bench/peers.py [--records 200000] [--consumers 4]

Environment:
  SHAREQ_BENCH_PEERS   the bench-peers directory (default: the first ``shared/bench-peers`` found
                       beside the project's directory or one of its ancestors)
  SHAREQ_PEER_PYTHON   a Python that has redis-py, hiredis and pika (see bench/README.md); the
                       current interpreter is used when it has them
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REDIS = "Redis Streams AOF everysec +hiredis, batch XACK"
RABBIT = "RabbitMQ quorum, multi-ack every 500"

# Recorded in bench-peers' RESULTS.md (2026-11-21, this kind of machine; N=200,000 x 100 B, C=4),
# printed only when the peers cannot be measured here.
RECORDED = {
    REDIS: 297_358.0,
    RABBIT: 84_160.0,
}
# shareq with 4 ShareConsumers must reach at least this multiple of each peer.
TARGETS = {REDIS: 1.0, RABBIT: 3.0}

INSTALL_HINT = """\
to measure the peers in this run (see bench/README.md):
  apt-get install -y redis-server rabbitmq-server     # the scripts start their own servers on loopback
  python3 -m venv <dir> && <dir>/bin/pip install redis==8.1.0 hiredis==3.5.0 pika==1.4.4
  export SHAREQ_PEER_PYTHON=<dir>/bin/python"""

RABBIT_BIN = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # where servers.sh runs it from
PORTS = (6390, 5672, 4369, 25672)  # servers.sh: Redis; RabbitMQ AMQP, epmd, distribution
STEP_TIMEOUT = 180.0  # each peer script; servers.sh steps get 90 s


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerFigure:
    """One peer's consume-and-acknowledge rate, measured now or recorded earlier."""

    name: str
    consume_per_s: float
    measured: bool
    detail: str = ""


def peers_dir() -> Path:
    """SHAREQ_BENCH_PEERS, else the first ``shared/bench-peers`` beside the project or an ancestor."""
    override = os.environ.get("SHAREQ_BENCH_PEERS")
    if override:
        return Path(override)
    root = Path(__file__).resolve().parents[1]
    for ancestor in root.parents:
        candidate = ancestor / "shared" / "bench-peers"
        if candidate.is_dir():
            return candidate
    return root.parent / "shared" / "bench-peers"


def peer_python() -> str | None:
    """A Python with redis-py (+hiredis) and pika, or None when there is none."""
    candidates = [os.environ.get("SHAREQ_PEER_PYTHON", ""), sys.executable]
    probe = "import pika, redis; from redis.utils import HIREDIS_AVAILABLE; assert HIREDIS_AVAILABLE"
    for python in filter(None, candidates):
        try:
            ok = subprocess.run([python, "-c", probe], capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return python
    return None


def missing() -> list[str]:
    """What prevents measuring the peers here (empty when they can be measured)."""
    gaps: list[str] = []
    scripts = peers_dir()
    lacking = [
        name
        for name in ("servers.sh", "redis_streams.py", "rabbitmq_queue.py", "quiet_gate.py")
        if not (scripts / name).is_file()
    ]
    if lacking:
        gaps.append(f"{', '.join(lacking)} not found in {scripts} (set SHAREQ_BENCH_PEERS)")
    for binary in ("redis-server", "redis-cli", "epmd", "runuser"):
        if shutil.which(binary) is None:
            gaps.append(f"{binary} not installed")
    if not Path(RABBIT_BIN).is_file():
        gaps.append("rabbitmq-server not installed")
    for port in PORTS:
        with socket.socket() as probe:
            probe.settimeout(1.0)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                gaps.append(f"127.0.0.1:{port} is already in use (a system service or another run?)")
    if peer_python() is None:
        gaps.append("no Python with redis-py + hiredis + pika (set SHAREQ_PEER_PYTHON)")
    return gaps


def quiet_gate(python: str, max_wait: float) -> str:
    """Wait (bounded) for the box to go idle; returns what the gate saw, for the printout."""
    script = peers_dir() / "quiet_gate.py"
    if max_wait <= 0 or not script.is_file():
        return "no idle gate"
    try:
        out = subprocess.run(
            [python, str(script), "--max-wait", str(max_wait)],
            capture_output=True,
            text=True,
            timeout=max_wait + 30,
            check=True,
        ).stdout
        gate = json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return "gate failed"
    return f"busy {gate['busy_cores']} cores after {gate['waited_s']} s"


class Servers:
    """The peer servers, started by servers.sh with all state under one temporary directory."""

    def __init__(self) -> None:
        self.state = Path(tempfile.mkdtemp(prefix="shareq-peers-"))
        self.state.chmod(0o755)  # the RabbitMQ node runs as the rabbitmq user
        self.env = {**os.environ, "PB": str(self.state)}
        self.script = str(peers_dir() / "servers.sh")

    def run(self, *args: str) -> None:
        done = subprocess.run(
            ["bash", self.script, *args],
            env=self.env,
            timeout=90,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"servers.sh {' '.join(args)}: rc {done.returncode}: {done.stderr.strip()[-300:]}"
            )

    @contextmanager
    def redis(self, mode: str) -> Iterator[None]:
        try:
            self.run("redis-start", mode)
            yield
        finally:
            self.run("redis-stop")

    @contextmanager
    def rabbit(self) -> Iterator[None]:
        try:
            self.run("rabbit-start")
            yield
        finally:
            self.run("rabbit-stop")

    def close(self) -> None:
        shutil.rmtree(self.state, ignore_errors=True)


def step_timeout(records: int) -> float:
    """A peer script's bound: 180 s plus 1 s per 4,000 records (it produces them all, then consumes
    them; RabbitMQ's quorum queue did both at about 15k records a second, and at 4M that overran a
    bound set at that pace)."""
    return STEP_TIMEOUT + records / 4_000


def run_script(python: str, script: str, args: list[str], timeout: float = STEP_TIMEOUT) -> dict[str, Any]:
    """Run one peer script in its own process group (its consumers are forked), return its final line."""
    proc = subprocess.Popen(
        [python, str(peers_dir() / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the script and the consumers it forked, nothing else
        proc.communicate()
        raise RuntimeError(f"{script} did not finish within {timeout:.0f} s") from None
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            final: dict[str, Any] = json.loads(line)
            if final.get("final"):
                return final
    raise RuntimeError(f"{script} gave no final line (rc {proc.returncode}): {err[-400:]}")


def describe(final: dict[str, Any]) -> str:
    verified = "verified" if final.get("all_verified") else "NOT verified"
    client = final.get("client", "?") + (" +hiredis" if final.get("hiredis") else "")
    return f"{final.get('server_version', '?')}, {client}, {verified}"


def measure(records: int, consumers: int, gate_max_wait: float) -> list[PeerFigure]:
    """Redis Streams (AOF everysec, hiredis, batch XACK) then RabbitMQ quorum, each on a fresh server."""
    python = peer_python()
    assert python is not None
    bound = step_timeout(records)
    common = ["--n", str(records), "--consumers", str(consumers), "--runs", "1", "--timeout", str(bound - 10)]
    figures: list[PeerFigure] = []
    servers = Servers()
    try:
        with servers.redis("aof"), _failure_noted(REDIS, figures):
            gate = quiet_gate(python, gate_max_wait)
            final = run_script(
                python, "redis_streams.py", [*common, "--ack", "batch", "--no-redelivery"], bound
            )
            name = REDIS if final.get("hiredis") else REDIS.replace("+hiredis", "(no hiredis)")
            rate = final["median"]["consume_msgs_per_s"]
            figures.append(
                PeerFigure(name=name, consume_per_s=rate, measured=True, detail=f"{describe(final)}; {gate}")
            )
        with servers.rabbit(), _failure_noted(RABBIT, figures):
            gate = quiet_gate(python, gate_max_wait)
            pid_file = str(servers.state / "rabbitmq" / "rabbit.pid")
            args = [
                *common,
                "--queue-type",
                "quorum",
                "--ack",
                "batch",
                "--redelivery",
                "none",
                "--pid-file",
                pid_file,
            ]
            final = run_script(python, "rabbitmq_queue.py", args, bound)
            rate = final["median"]["consume_msgs_per_s"]
            figures.append(
                PeerFigure(
                    name=RABBIT, consume_per_s=rate, measured=True, detail=f"{describe(final)}; {gate}"
                )
            )
    finally:
        servers.close()
    return figures


@contextmanager
def _failure_noted(name: str, figures: list[PeerFigure]) -> Iterator[None]:
    """A peer that fails or overruns its bound is reported as such and the next one still runs."""
    try:
        yield
    except (RuntimeError, subprocess.SubprocessError, KeyError, ValueError) as exc:
        print(f"{name}: not measured ({exc})", flush=True)
        figures.append(
            PeerFigure(name=name, consume_per_s=float("nan"), measured=False, detail=f"FAILED: {exc}")
        )


def recorded() -> list[PeerFigure]:
    return [
        PeerFigure(name=name, consume_per_s=rate, measured=False, detail="bench-peers RESULTS.md")
        for name, rate in RECORDED.items()
    ]


def peer_figures(mode: str, records: int, consumers: int, gate_max_wait: float) -> list[PeerFigure]:
    """mode: "auto" measures when possible, else recorded; "measure" insists; "recorded" never measures."""
    if mode == "recorded":
        return recorded()
    gaps = missing()
    if gaps:
        if mode == "measure":
            raise RuntimeError("cannot measure the peers: " + "; ".join(gaps))
        print("peers not measured here: " + "; ".join(gaps))
        if any("in use" not in gap for gap in gaps):
            print(INSTALL_HINT)
        return recorded()
    try:
        return measure(records, consumers, gate_max_wait)
    except (RuntimeError, subprocess.SubprocessError, KeyError, ValueError) as exc:
        if mode == "measure":
            raise
        print(f"peer measurement failed ({exc}); falling back to the recorded figures")
        return recorded()


def _source(figure: PeerFigure) -> str:
    if figure.measured:
        return "measured"
    return "NOT MEASURED" if math.isnan(figure.consume_per_s) else "RECORDED"


def print_comparison(shareq: dict[int, float], peers: list[PeerFigure], reference: int = 4) -> None:
    """Side-by-side table, then shareq at `reference` consumers over each targeted peer."""
    rows = [
        (f"shareq, {count} librdkafka ShareConsumer(s)", rate, "measured") for count, rate in shareq.items()
    ]
    rows += [(p.name, p.consume_per_s, _source(p)) for p in peers]
    width = max(len(name) for name, _, _ in rows)
    print(f"{'consume+ack (same N, 100 B)':<{width}}  {'rec/s':>10}  source")
    for name, rate, source in rows:
        print(f"{name:<{width}}  {rate:>10,.0f}  {source}")
    for p in peers:
        if p.detail:
            print(f"  {p.name}: {p.detail}")
    ours = shareq.get(reference)
    for p in peers:
        target = TARGETS.get(p.name)
        if target is None:
            continue
        if ours is None or math.isnan(p.consume_per_s):
            why = "not measured" if ours is not None else f"shareq with {reference} consumers not run"
            print(f"ratio vs {p.name}: n/a ({why})")
            continue
        ratio = ours / p.consume_per_s
        verdict = "met" if ratio >= target else "NOT met"
        label = "" if p.measured else " (against a RECORDED figure, not this run)"
        head = f"ratio shareq {reference} ShareConsumers / {p.name}: {ratio:.2f}x"
        print(f"{head}, target >= {target:g}x: {verdict}{label}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--peers", choices=["auto", "measure", "recorded"], default="measure")
    parser.add_argument("--gate-max-wait", type=float, default=20.0)
    args = parser.parse_args()
    for p in peer_figures(args.peers, args.records, args.consumers, args.gate_max_wait):
        source = _source(p)
        print(f"{p.name}: {p.consume_per_s:,.0f} rec/s ({source}; {p.detail})")


if __name__ == "__main__":
    main()
