"""What metrics cost: share-consume throughput with the HTTP port off, against on and scraped every
second (plus, optionally, the web view's event stream open), in the same run.

    PYTHONPATH=src python bench/metrics_cost.py [--records 400000] [--rounds 3] [--view]

One broker per setting runs from the start (``python -m shareq serve``, as bench/share_consume.py
starts it). Each round produces the same records (100 B, 4 partitions, a new topic) to every broker
and drains them with 4 librdkafka ShareConsumers (implicit acknowledgement), then again with 4
acknowledging explicitly; for each phase the settings run back to back, in alternating order from
round to round, so drift on a shared machine hits them alike. Printed: the median rate over rounds
and the median of the per-round ratios to the port-off run (target: at least 0.95). While a broker with the
port on is consumed, a thread GETs ``/metrics`` every second (and, with ``--view``, keeps ``/events``
open, which pushes the web view's state every second); the scrape's own time is printed too.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from broker_process import free_port, start_broker
from share_consume import produce, run_phase, stop_broker

PHASES = (("share", "implicit"), ("share explicit", "explicit"))


@dataclass
class Setting:
    name: str
    http: bool
    view: bool = False
    rates: dict[str, list[float]] = field(default_factory=dict)
    cpu_us: dict[str, list[float]] = field(default_factory=dict)
    scrapes: list[float] = field(default_factory=list)


def start(data_dir: Path, port: int, http_port: int | None) -> subprocess.Popen[str]:
    return start_broker(
        data_dir,
        port,
        configs=("group.share.auto.offset.reset=earliest",),
        args=() if http_port is None else ("--http-port", str(http_port)),
    )


@contextmanager
def scraping(base: str, seconds: list[float], view: bool) -> Iterator[None]:
    """GET ``/metrics`` every second (timing each), optionally with ``/events`` held open."""
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(1.0):
            started = time.perf_counter()
            with urllib.request.urlopen(base + "/metrics", timeout=10) as response:
                response.read()
            seconds.append(time.perf_counter() - started)

    def events() -> None:
        with urllib.request.urlopen(base + "/events", timeout=10) as stream:
            while not stop.is_set():
                if not stream.readline():
                    return

    threads = [threading.Thread(target=scrape, daemon=True)]
    if view:
        threads.append(threading.Thread(target=events, daemon=True))
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=15)


@dataclass
class Broker:
    setting: Setting
    proc: subprocess.Popen[str]
    bootstrap: str
    http_base: str | None
    data_dir: Path


def start_all(settings: list[Setting]) -> list[Broker]:
    brokers = []
    for setting in settings:
        data_dir = Path(tempfile.mkdtemp(prefix="shareq-metrics-bench-"))
        port = free_port()
        http_port = free_port() if setting.http else None
        proc = start(data_dir, port, http_port)
        base = f"http://127.0.0.1:{http_port}" if http_port is not None else None
        brokers.append(Broker(setting, proc, f"127.0.0.1:{port}", base, data_dir))
    return brokers


def run_phase_on(broker: Broker, name: str, kind: str, records: int, topic: str) -> None:
    setting = broker.setting
    if broker.http_base is not None:
        with scraping(broker.http_base, setting.scrapes, setting.view):
            phase = run_phase(name, broker.bootstrap, broker.proc.pid, records, 4, kind, topic=topic)
    else:
        phase = run_phase(name, broker.bootstrap, broker.proc.pid, records, 4, kind, topic=topic)
    setting.rates.setdefault(name, []).append(phase.rate)
    setting.cpu_us.setdefault(name, []).append(phase.cpu_us)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--view", action="store_true", help="also a setting with the web view's stream open")
    args = parser.parse_args()
    settings = [Setting("http off", http=False), Setting("http on, /metrics 1/s", http=True)]
    if args.view:
        settings.append(Setting("on + web view open", http=True, view=True))
    brokers = start_all(settings)  # all up at once (idle ones cost nothing), so pairs run close in time
    try:
        for round_no in range(args.rounds):
            topic = f"round{round_no}"
            for broker in brokers:
                produce(broker.bootstrap, args.records, topic=topic)
            for name, kind in PHASES:
                order = brokers if round_no % 2 == 0 else brokers[::-1]
                for broker in order:
                    run_phase_on(broker, name, kind, args.records, topic)
            print(f"round {round_no + 1}/{args.rounds} done", flush=True)
    finally:
        for broker in brokers:
            stop_broker(broker.proc)
            shutil.rmtree(broker.data_dir, ignore_errors=True)
    off = settings[0]
    print(f"\n{args.records:,} x 100 B on 4 partitions, 4 ShareConsumers, median of {args.rounds} rounds")
    for name, _ in PHASES:
        for setting in settings:
            rate = statistics.median(setting.rates[name])
            cpu = statistics.median(setting.cpu_us[name])
            # the median of the per-round ratios: each pair ran minutes apart at most
            ratio = statistics.median(
                on / off for on, off in zip(setting.rates[name], off.rates[name], strict=True)
            )
            print(
                f"{name:<15} {setting.name:<22} {rate:>11,.0f} rec/s  {ratio:>5.2f}x  "
                f"{cpu:>5.2f} us/rec broker CPU"
            )
    for setting in settings[1:]:
        if setting.scrapes:
            ms = sorted(s * 1000 for s in setting.scrapes)
            median = statistics.median(ms)
            print(f"{setting.name}: {len(ms)} scrapes, median {median:.1f} ms, max {ms[-1]:.1f} ms")


if __name__ == "__main__":
    main()
