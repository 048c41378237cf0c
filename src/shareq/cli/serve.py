"""``shareq serve``: run the broker until SIGTERM or SIGINT, then shut down cleanly."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from shareq.config import BrokerConfig, ConfigError
from shareq.heap import retain_large_buffers

if TYPE_CHECKING:
    from shareq.server import Broker


@click.command()
@click.argument("properties", required=False, type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="where the logs live (default: the first of log.dirs, else log.dir)",
)
@click.option("--port", default=9092, show_default=True, type=int)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--config", "pairs", multiple=True, metavar="KEY=VALUE", help="broker config under its Kafka name"
)
@click.option(
    "--http-port",
    type=int,
    default=None,
    help="serve /metrics, the live web view and /healthz, /readyz on this port (config http.port)",
)
@click.option("--log-level", default="INFO", show_default=True)
def serve(
    properties: Path | None,
    data_dir: Path | None,
    port: int,
    host: str,
    pairs: tuple[str, ...],
    http_port: int | None,
    log_level: str,
) -> None:
    """Serve the Kafka protocol from DATA_DIR. PROPERTIES is a Kafka server.properties file; its
    settings come first, then each --config."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    import shareq.server.compaction  # noqa: F401  (registers the log.* and log.cleaner.* settings)

    try:
        if properties is not None:
            pairs = (*(f"{k}={v}" for k, v in read_properties(properties.read_text()).items()), *pairs)
        if http_port is not None:
            pairs = (*pairs, f"http.port={http_port}")
        config = BrokerConfig.from_pairs(pairs)
    except ConfigError as error:
        raise click.BadParameter(str(error), param_hint="--config") from error
    if data_dir is None:
        named = config.text("log.dirs") or config.text("log.dir")
        if not named:
            raise click.UsageError("give --data-dir, or log.dirs in the properties or --config")
        data_dir = Path(named.split(",")[0].strip())
    from shareq.server.start_errors import BrokerStartError

    try:
        asyncio.run(_serve(data_dir, host, port, config))
    except BrokerStartError as error:
        # One line, as Kafka says it (``Socket server failed to bind to H:P: Address already in
        # use.``), and a non-zero exit; the traceback helps no operator here.
        logging.getLogger("shareq.server").error("%s", error)
        sys.exit(1)


def read_properties(text: str) -> dict[str, str]:
    """A Java properties file as Kafka reads server.properties: ``#``/``!`` comment lines, ``=``,
    ``:`` or blanks between key and value, an odd trailing backslash continuing the line."""
    values: dict[str, str] = {}
    pending: str | None = None
    for raw in text.splitlines():
        stripped = raw.lstrip()
        if pending is None and (not stripped or stripped[0] in "#!"):
            continue
        line = stripped if pending is None else pending + stripped
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            pending = line[:-1]
            continue
        pending = None
        match = _PROPERTY.match(line)
        if match is not None:
            values[match.group(1)] = match.group(2).strip()
    return values


_PROPERTY = re.compile(r"((?:[^\s=:\\]|\\.)+)\s*[=:\s]?\s*(.*)")


def _io_line(broker: Broker) -> str:
    return "io " + json.dumps({str(api): io for api, io in broker.io.snapshot().items()})


_YOUNG_COLLECTION_THRESHOLD = 20_000


async def _serve(data_dir: Path, host: str, port: int, config: BrokerConfig) -> None:
    from shareq.server import Broker

    broker = Broker(data_dir, config, host=host, port=port)
    try:
        await broker.start()
    except BaseException:
        await broker.stop()  # close whatever opened before the failure
        raise
    # What start-up built (modules, schemas, the logs' indexes) lives as long as the broker: out
    # of the collector's sight, a full collection no longer walks it. Requests that allocate
    # much (hundreds of acknowledgement batches each) triggered full collections costing tens
    # of milliseconds each, a quarter of the broker's CPU at a REJECT every tenth record.
    gc.freeze()
    # A young collection after 20,000 new container objects rather than 700: a ShareAcknowledge
    # with a REJECT every tenth record builds thousands of short-lived tuples (wire batches,
    # state deltas), and at 700 the collector ran several times inside each request, walking
    # what it still held. Measured with bench/dlq.py: about a tenth of the broker's CPU there.
    gc.set_threshold(_YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    # Fetch and ShareFetch read and send megabytes per request: reuse those buffers' pages.
    retain_large_buffers()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    # SIGUSR1 prints the per-api I/O counters as one JSON line (benchmarks and operators read it)
    loop.add_signal_handler(signal.SIGUSR1, lambda: print(_io_line(broker), flush=True))
    if broker.monitor is not None:
        monitor = broker.monitor
        print(f"shareq http on http://{monitor.host}:{monitor.port}/ (metrics at /metrics)", flush=True)
    print(f"shareq listening on {broker.host}:{broker.port}", flush=True)
    if len(broker.listeners) > 1 or broker.listeners[0].protocol.value != "PLAINTEXT":
        for listener in broker.listeners:
            print(f"  {listener.url()} ({listener.protocol.value})", flush=True)
    await stop.wait()
    logging.getLogger("shareq.server").info("shutting down")
    await broker.stop()
