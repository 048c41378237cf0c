"""``shareq demo``: a Spark Structured Streaming pipeline on a share group, end to end on a laptop.

An embedded broker, an ``orders`` topic with 3 partitions, a producer streaming synthetic orders
(a few of them malformed), and a streaming query that consumes the share group with more tasks than
partitions, parses and enriches the orders, writes good ones to a Parquet table and an output topic,
and rejects the malformed ones. It prints a live progress line and a summary, then exits.

With ``--exactly-once`` the query is the exactly-once pipeline instead: the share group → parse and
enrich (stateless) → the output topic, one transaction per micro-batch holding the output and the
batch's acknowledgements (malformed orders REJECTed in it). The progress line shows, per the sink's
commit reports, records claimed, written, rejected and dropped (a batch whose claim was refused).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

GROUP = "order-pipeline"
SOURCE_TOPIC = "orders"
OUTPUT_TOPIC = "orders-enriched"
PRODUCTS = {
    "espresso": ("coffee", 2.5),
    "croissant": ("bakery", 3.1),
    "beans-1kg": ("coffee", 24.0),
    "grinder": ("equipment", 189.0),
    "mug": ("merch", 12.0),
}
ORDER_SCHEMA = "order_id long, customer string, product string, quantity int"
BATCH_RECORDS = 50_000


def java_missing() -> str | None:
    """What to install when Spark cannot find a JVM, or None."""
    home = os.environ.get("JAVA_HOME")
    if (home and Path(home, "bin", "java").exists()) or shutil.which("java"):
        return None
    return "the demo runs Spark, which needs Java 17: install a JDK or JRE 17 (e.g. openjdk-17-jre-headless)"


@dataclass
class Tally:
    """What the pipeline's foreachBatch saw (it runs in this process, on the driver)."""

    accepted: int = 0
    rejected: int = 0
    redelivered: int = 0
    batches: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    produce_started_at: float | None = None
    last_batch_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def done(self) -> int:
        return self.accepted + self.rejected


def order_events(count: int, malformed_every: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """Synthetic (key, value) order events; every ``malformed_every``-th one is broken."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        customer = f"c{rng.randrange(200):03d}"
        if malformed_every and i % malformed_every == malformed_every - 1:
            value = rng.choice([b"{truncated", b"\x00\x01garbage", b'{"order_id": "x"}'])
        else:
            order = {
                "order_id": i,
                "customer": customer,
                "product": rng.choice(sorted(PRODUCTS)),
                "quantity": rng.randint(1, 5),
            }
            value = json.dumps(order).encode()
        out.append((customer.encode(), value))
    return out


def _produce(
    bootstrap: str, events: list[tuple[bytes, bytes]], duration_s: float, stop: threading.Event
) -> None:
    from shareq.client import Producer

    chunks = max(1, int(duration_s / 0.1))
    per_chunk = max(1, -(-len(events) // chunks))
    with Producer(bootstrap) as producer:
        for start in range(0, len(events), per_chunk):
            if stop.is_set():
                return
            now_ms = int(time.time() * 1000)
            for key, value in events[start : start + per_chunk]:
                producer.send(SOURCE_TOPIC, value, key=key, timestamp_ms=now_ms)
            producer.flush()
            time.sleep(0.1)


def _pipeline(spark: Any, bootstrap: str, table: Path, tally: Tally) -> Any:
    from pyspark.sql import functions as F

    from shareq.spark import acknowledge_failed

    products = spark.createDataFrame(
        [(name, cat, price) for name, (cat, price) in PRODUCTS.items()],
        "product string, category string, price double",
    )

    def process(batch: Any, batch_id: int) -> None:
        parsed = batch.withColumn("order", F.from_json(F.col("value").cast("string"), ORDER_SCHEMA))
        valid = F.col("order.customer").isNotNull() & F.col("order.product").isin(*PRODUCTS)
        parsed = parsed.withColumn("ok", F.coalesce(valid, F.lit(False))).persist()
        good = (
            parsed.where("ok")
            .select("topic", "partition", "offset", "timestamp", "deliveryCount", "order.*")
            .join(F.broadcast(products), "product")
            .withColumn("amount", F.round(F.col("quantity") * F.col("price"), 2))
            .withColumn("tier", F.when(F.col("amount") >= 100, "gold").otherwise("standard"))
        )
        # Idempotent by batch id: a replayed batch overwrites its own directory.
        good.write.mode("overwrite").parquet(str(table / f"batch_id={batch_id}"))
        (
            good.select(
                F.col("customer").cast("binary").alias("key"),
                F.to_json(F.struct("order_id", "customer", "product", "category", "amount", "tier"))
                .cast("binary")
                .alias("value"),
            )
            .write.format("shareq")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", OUTPUT_TOPIC)
            .mode("append")
            .save()
        )
        bad_row = F.struct("topic", "partition", "offset", "deliveryCount")
        stats = parsed.agg(
            F.count("*").alias("n"),
            F.sum(F.when(F.col("deliveryCount") > 1, 1).otherwise(0)).alias("redelivered"),
            F.collect_list(F.when(~F.col("ok"), bad_row)).alias("bad"),
            F.collect_list(F.unix_millis("timestamp")).alias("stamps"),
        ).first()
        parsed.unpersist()
        rejected = acknowledge_failed(
            stats.bad, bootstrap_servers=bootstrap, group_id=GROUP, ack_type="reject"
        )
        finished_ms = time.time() * 1000
        if not stats.n:
            return  # the query's first micro-batch: nothing acquired yet
        with tally.lock:
            tally.batches += 1
            tally.rejected += rejected
            tally.accepted += int(stats.n) - rejected
            tally.redelivered += int(stats.redelivered or 0)
            tally.latencies_ms += [finished_ms - ts for ts in stats.stamps]
            tally.last_batch_at = finished_ms / 1000

    return (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", SOURCE_TOPIC)
        .option("group.id", GROUP)
        .option("startingOffsets", "earliest")
        .option("minPartitions", "6")
        .option("maxRecordsPerTrigger", str(BATCH_RECORDS))
        .load()
        .writeStream.foreachBatch(process)
        .option("checkpointLocation", str(table.parent / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def _eos_pipeline(spark: Any, bootstrap: str, checkpoint: Path) -> Any:
    """Share group → parse, enrich → output topic, exactly once; malformed orders are REJECTed in the
    batch's transaction (the reject* columns name their source record)."""
    from pyspark.sql import functions as F

    products = spark.createDataFrame(
        [(name, cat, price) for name, (cat, price) in PRODUCTS.items()],
        "product string, category string, price double",
    )
    parsed = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", SOURCE_TOPIC)
        .option("group.id", GROUP)
        .option("startingOffsets", "earliest")
        .option("minPartitions", "6")
        .option("maxRecordsPerTrigger", str(BATCH_RECORDS))
        .option("exactlyOnce", "true")
        .load()
        .withColumn("order", F.from_json(F.col("value").cast("string"), ORDER_SCHEMA))
    )
    valid = F.col("order.customer").isNotNull() & F.col("order.product").isin(*PRODUCTS)
    bad = ~F.coalesce(valid, F.lit(False))
    out = (
        parsed.join(F.broadcast(products), F.col("order.product") == products.product, "left")
        .withColumn("amount", F.round(F.col("order.quantity") * F.col("price"), 2))
        .select(
            F.col("order.customer").cast("binary").alias("key"),
            F.to_json(
                F.struct(
                    "order.order_id",
                    "order.customer",
                    "order.product",
                    "category",
                    "amount",
                    F.when(F.col("amount") >= 100, "gold").otherwise("standard").alias("tier"),
                )
            ).alias("value"),
            F.when(bad, F.col("topic")).alias("rejectTopic"),
            F.when(bad, F.col("partition")).alias("rejectPartition"),
            F.when(bad, F.col("offset")).alias("rejectOffset"),
        )
    )
    return (
        out.writeStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", OUTPUT_TOPIC)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds")
        .start()
    )


@dataclass
class EosTally:
    """The exactly-once sink's commit reports, summed."""

    batches: int = 0
    claimed: int = 0
    written: int = 0
    rejected: int = 0
    dropped_batches: int = 0
    dropped_records: int = 0
    last_drop: str = ""
    commit_ms: list[float] = field(default_factory=list)

    @classmethod
    def read(cls, checkpoint: Path) -> EosTally:
        from shareq.spark.eos import eos_reports

        tally = cls()
        for r in eos_reports(str(checkpoint)) if checkpoint.exists() else []:
            if not (r["claimed"] or r["dropped"]):
                continue  # a micro-batch with nothing to claim
            tally.batches += 1
            tally.claimed += r["claimed"]
            tally.written += r["written"]
            tally.rejected += r["rejected"]
            tally.commit_ms.append(float(r["commitMs"]))
            if r["dropped"]:
                tally.dropped_batches += 1
                tally.dropped_records += r["dropped"]
                tally.last_drop = f"batch {r['batchId']}: {r['reason']}"
        return tally

    def line(self, records: int) -> str:
        return (
            f"  batches {self.batches:4d}  claimed {self.claimed:7d}/{records}  written {self.written:7d}  "
            f"rejected {self.rejected:4d}  dropped {self.dropped_records:5d} "
            f"in {self.dropped_batches} batches"
        )


def _eos_summary(tally: EosTally, produced: int, malformed: int, elapsed: float) -> str:
    commit = statistics.median(tally.commit_ms) if tally.commit_ms else 0.0
    lines = [
        "",
        "summary (exactly once)",
        f"  records in       {produced} ({malformed} malformed)",
        f"  written          {tally.written}  (to {OUTPUT_TOPIC}, in committed transactions)",
        f"  rejected         {tally.rejected}  (archived in the same transactions)",
        f"  dropped          {tally.dropped_records} records in {tally.dropped_batches} batches "
        "(delivered again)",
        f"  micro-batches    {tally.batches}  (sink commit median {commit:,.0f} ms)",
        f"  wall time        {elapsed:.1f} s",
    ]
    if tally.last_drop:
        lines.insert(6, f"  last drop        {tally.last_drop}")
    return "\n".join(lines)


def _run_eos(spark: Any, bootstrap: str, root: Path, records: int, timeout: float, events: Any) -> EosTally:
    """The exactly-once pipeline with its progress line; returns the final tally."""
    checkpoint = root / "checkpoint"
    query = _eos_pipeline(spark, bootstrap, checkpoint)
    _wait_for_first_batch(query, deadline=time.monotonic() + timeout)
    events()
    deadline = time.monotonic() + timeout
    tty = sys.stdout.isatty()
    shown = ""
    try:
        while True:
            tally = EosTally.read(checkpoint)
            line = tally.line(records)
            if line != shown:
                click.echo("\r" + line if tty else line, nl=not tty)
                if tally.last_drop and not tty:
                    click.echo(f"    dropped {tally.last_drop}")
                shown = line
            if tally.written + tally.rejected >= records:
                break
            if query.exception() is not None:
                raise click.ClickException(f"the streaming query failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise click.ClickException(f"timed out with {tally.claimed}/{records} records claimed")
            time.sleep(0.25)  # the refresh rate of a progress line, not a synchronisation
    finally:
        if tty:
            click.echo("")
        query.stop()
    return tally


def _wait_for_first_batch(query: Any, deadline: float) -> None:
    """Wait until the query has run its first (empty) micro-batch: the source is in the group."""
    while time.monotonic() < deadline and query.exception() is None and query.lastProgress is None:
        time.sleep(0.2)


def _summary(tally: Tally, produced: int, malformed: int, table_rows: int, elapsed: float) -> str:
    span = (tally.last_batch_at or 0) - (tally.produce_started_at or 0)
    lat = sorted(tally.latencies_ms)
    p50 = statistics.median(lat) if lat else 0.0
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0.0
    rate = tally.done / span if span > 0 else float(tally.done)
    return "\n".join(
        [
            "",
            "summary",
            f"  records in       {produced} ({malformed} malformed)",
            f"  accepted         {tally.accepted}  (Parquet table rows: {table_rows})",
            f"  rejected         {tally.rejected}",
            f"  redelivered      {tally.redelivered}",
            f"  micro-batches    {tally.batches}",
            f"  throughput       {rate:,.0f} records/s (first record produced to last batch committed)",
            f"  end-to-end       p50 {p50:,.0f} ms, p99 {p99:,.0f} ms (produce to sink commit)",
            f"  wall time        {elapsed:.1f} s",
        ]
    )


@click.command()
@click.option("--records", default=100_000, show_default=True, help="Order events to produce.")
@click.option("--malformed-every", default=97, show_default=True, help="Every n-th event is malformed.")
@click.option("--produce-seconds", default=4.0, show_default=True, help="Spread production over this long.")
@click.option(
    "--data-dir", type=click.Path(path_type=Path), default=None, help="Keep broker data and output here."
)
@click.option("--timeout", default=600.0, show_default=True, help="Give up after this many seconds.")
@click.option(
    "--exactly-once",
    is_flag=True,
    help="Run the exactly-once pipeline (share group → enrich → topic in one transaction per micro-batch).",
)
def demo(
    records: int,
    malformed_every: int,
    produce_seconds: float,
    data_dir: Path | None,
    timeout: float,
    exactly_once: bool,
) -> None:
    """Run a Spark streaming pipeline on a share group against an embedded broker, then exit."""
    missing = java_missing()
    if missing:
        raise click.ClickException(missing)
    from shareq.client import Admin
    from shareq.server import EmbeddedBroker
    from shareq.spark.local import local_spark

    started = time.monotonic()
    root = data_dir or Path(tempfile.mkdtemp(prefix="shareq-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    events = order_events(records, malformed_every)
    malformed = records // malformed_every if malformed_every else 0
    tally = Tally()
    stop = threading.Event()
    try:
        config: dict[str, object] = {"share.transactional.acks.enable": True} if exactly_once else {}
        with EmbeddedBroker(root / "broker", config=config) as broker:
            click.echo(f"broker on {broker.bootstrap}; data in {root}")
            with Admin(broker.bootstrap) as admin:
                admin.create_topic(SOURCE_TOPIC, 3)
                admin.create_topic(OUTPUT_TOPIC, 3)
            click.echo("starting Spark (local[2]) ...")
            spark = local_spark("shareq-demo")
            if exactly_once:
                try:

                    def start_producing() -> None:
                        args = (broker.bootstrap, events, produce_seconds, stop)
                        threading.Thread(target=_produce, args=args, daemon=True).start()

                    eos = _run_eos(spark, broker.bootstrap, root, records, timeout, start_producing)
                finally:
                    stop.set()
                    spark.stop()
                click.echo(_eos_summary(eos, records, malformed, time.monotonic() - started))
                return
            try:
                table = root / "orders_table"
                query = _pipeline(spark, broker.bootstrap, table, tally)
                # Produce once the query is up, so latency measures the pipeline, not Spark's start.
                _wait_for_first_batch(query, deadline=time.monotonic() + timeout)
                producer = threading.Thread(
                    target=_produce, args=(broker.bootstrap, events, produce_seconds, stop), daemon=True
                )
                tally.produce_started_at = time.time()
                producer.start()
                deadline = time.monotonic() + timeout
                tty = sys.stdout.isatty()
                shown = ""
                while True:
                    with tally.lock:
                        finished = tally.done >= records
                        line = (
                            f"  batches {tally.batches:4d}  in {tally.done:7d}/{records}  "
                            f"accepted {tally.accepted:7d}  rejected {tally.rejected:4d}  "
                            f"redelivered {tally.redelivered:4d}"
                        )
                    if line != shown:  # the last line shown is the final tally
                        click.echo("\r" + line if tty else line, nl=not tty)
                        shown = line
                    if finished:
                        break
                    if query.exception() is not None:
                        raise click.ClickException(f"the streaming query failed: {query.exception()}")
                    if time.monotonic() > deadline:
                        raise click.ClickException(f"timed out with {tally.done}/{records} records processed")
                    time.sleep(0.25)  # the refresh rate of a progress line, not a synchronisation
                if tty:
                    click.echo("")
                query.stop()
                table_rows = spark.read.parquet(str(table)).count()
            finally:
                stop.set()
                spark.stop()
            click.echo(_summary(tally, records, malformed, table_rows, time.monotonic() - started))
    finally:
        if data_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    sys.stdout.flush()
