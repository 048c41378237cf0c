"""``shareq dlq``: look into a share group's dead-letter topic, and move dead letters back.

``describe GROUP`` reads the group's DLQ topic (its ``errors.deadletterqueue.topic.name``) from the
beginning to its end and counts the dead letters by source topic, partition and cause.

``redrive --from DLQ_TOPIC`` moves dead letters back: it consumes the DLQ topic in a share group of
its own (``shareq-redrive.<DLQ_TOPIC>`` unless ``--group``), produces each record's original key,
value and headers (without the ``__dlq.`` ones) to the source topic its headers name (or ``--to``),
waits for the produce to be acknowledged, and only then ACCEPTs the dead letter. Killed midway, a
second run goes on where the first stopped (the share group remembers what was moved; a record in
flight at the kill may be moved twice, never lost). Dry run by default: without ``--execute`` it
only reads and reports what would move. Only standard Kafka APIs: any Kafka 4.2+ cluster works.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import click

from shareq.client import (
    AcknowledgeType,
    Admin,
    ConfigResource,
    Consumer,
    ConsumerRecord,
    Producer,
    ResourceType,
    ShareConsumer,
)
from shareq.client.admin_types import OffsetSpec

from ._common import bootstrap_option, emit_json, friendly_errors, json_option, table

DLQ_HEADER_PREFIX = "__dlq."
TOPIC_HEADER = "__dlq.errors.topic"
PARTITION_HEADER = "__dlq.errors.partition"
MESSAGE_HEADER = "__dlq.errors.message"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    """What a DLQ record says about itself: its source and cause, and the original record."""

    source_topic: str | None
    source_partition: int | None
    cause: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _last(headers: Iterable[tuple[str, bytes | None]], name: str) -> str | None:
    """The last header ``name`` (the DLQ's, when a copied record carried its own)."""
    found: str | None = None
    for key, value in headers:
        if key == name and value is not None:
            found = value.decode(errors="replace")
    return found


def parse_dead_letter(record: ConsumerRecord) -> DeadLetter:
    partition = _last(record.headers, PARTITION_HEADER)
    return DeadLetter(
        source_topic=_last(record.headers, TOPIC_HEADER),
        source_partition=int(partition) if partition is not None and partition.isdigit() else None,
        cause=_last(record.headers, MESSAGE_HEADER) or "",
        key=record.key,
        value=record.value,
        headers=tuple((k, v) for k, v in record.headers if not k.startswith(DLQ_HEADER_PREFIX)),
    )


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[ConsumerRecord]:
    """Every record of ``topic`` from its start to its end offsets as of now."""
    with Admin(bootstrap) as admin:
        partitions = admin.describe_topic(topic).partitions
    out: list[ConsumerRecord] = []
    with Consumer(bootstrap) as consumer:
        ends = {p: info.offset for p, info in consumer.offsets(topic, OffsetSpec.LATEST).items()}
        consumer.assign({(topic, p): OffsetSpec.EARLIEST for p in range(len(partitions))})
        deadline = time.monotonic() + timeout
        while any(consumer.position(topic, p) < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                raise click.ClickException(f"timed out reading {topic}")
            out += consumer.poll(0.5)
    return out


@click.group()
def dlq() -> None:
    """Dead-letter queues of share groups (KIP-1191): describe, redrive."""


@dlq.command("describe")
@click.argument("group")
@bootstrap_option
@json_option
@friendly_errors
def describe(group: str, bootstrap: str, as_json: bool) -> None:
    """Summarise GROUP's dead-letter topic by source topic, partition and cause."""
    with Admin(bootstrap) as admin:
        resource = ConfigResource(ResourceType.GROUP, group)
        configs = admin.describe_configs([resource], keys=["errors.deadletterqueue.topic.name"])
    entry = configs[resource].get("errors.deadletterqueue.topic.name")
    topic = entry.value if entry is not None else None
    if not topic:
        raise click.ClickException(f"share group {group} has no dead-letter topic")
    counts = Counter(
        (d.source_topic or "?", d.source_partition if d.source_partition is not None else -1, d.cause)
        for d in map(parse_dead_letter, read_topic(bootstrap, topic))
    )
    rows = sorted(counts.items())
    if as_json:
        emit_json(
            {
                "group": group,
                "dlq_topic": topic,
                "total": sum(counts.values()),
                "by_source": [{"topic": t, "partition": p, "cause": c, "count": n} for (t, p, c), n in rows],
            }
        )
        return
    click.echo(f"dead-letter topic {topic}: {sum(counts.values())} records")
    if rows:
        click.echo(
            table(["SOURCE-TOPIC", "PARTITION", "CAUSE", "COUNT"], [[t, p, c, n] for (t, p, c), n in rows])
        )


@dlq.command("redrive")
@click.option("--from", "source", required=True, help="the DLQ topic to move records out of")
@click.option("--to", "target", help="produce here instead of each record's source topic")
@click.option("--rate", type=click.FloatRange(min=0.001), help="at most this many records per second")
@click.option("--filter-cause", "causes", multiple=True, help="only dead letters whose cause contains this")
@click.option("--group", help="share group of the redrive (default shareq-redrive.<DLQ topic>)")
@click.option("--idle", type=float, default=3.0, show_default=True, help="stop after this long with nothing")
@click.option("--max-records", type=click.IntRange(min=1), help="stop after moving this many")
@click.option("--execute", is_flag=True, help="really move records (default: dry run, report only)")
@bootstrap_option
@json_option
@friendly_errors
def redrive(
    source: str,
    target: str | None,
    rate: float | None,
    causes: tuple[str, ...],
    group: str | None,
    idle: float,
    max_records: int | None,
    execute: bool,
    bootstrap: str,
    as_json: bool,
) -> None:
    """Move dead letters of DLQ topic --from back to their source topic (or --to)."""
    if not execute:
        plan: Counter[tuple[str, str]] = Counter()
        skipped = 0
        for d in map(parse_dead_letter, read_topic(bootstrap, source)):
            destination = target or d.source_topic
            if not _wanted(d, causes) or destination is None:
                skipped += 1
                continue
            plan[(destination, d.cause)] += 1
        total = sum(plan.values())
        if as_json:
            emit_json(
                {
                    "dry_run": True,
                    "would_move": total,
                    "skipped": skipped,
                    "by_target": [{"topic": t, "cause": c, "count": n} for (t, c), n in sorted(plan.items())],
                }
            )
            return
        click.echo(f"dry run: would move {total} records ({skipped} skipped); --execute to move them")
        if plan:
            click.echo(table(["TARGET", "CAUSE", "COUNT"], [[t, c, n] for (t, c), n in sorted(plan.items())]))
        return
    moved, skipped = _redrive(bootstrap, source, target, rate, causes, group, idle, max_records, as_json)
    if as_json:
        emit_json({"dry_run": False, "moved": moved, "skipped": skipped})
    else:
        click.echo(f"moved {moved} records ({skipped} skipped)")


def _wanted(d: DeadLetter, causes: tuple[str, ...]) -> bool:
    return not causes or any(c.lower() in d.cause.lower() for c in causes)


def _redrive(
    bootstrap: str,
    source: str,
    target: str | None,
    rate: float | None,
    causes: tuple[str, ...],
    group: str | None,
    idle: float,
    max_records: int | None,
    quiet: bool,
) -> tuple[int, int]:
    group = group or f"shareq-redrive.{source}"
    with Admin(bootstrap) as admin:  # a new redrive group starts at the DLQ's beginning
        admin.alter_configs(
            ConfigResource(ResourceType.GROUP, group), {"share.auto.offset.reset": "earliest"}
        )
    moved = skipped = 0
    interval = 0.0 if rate is None else 1.0 / rate
    next_send = time.monotonic()
    producer = Producer(bootstrap, linger_ms=0, idempotent=False)  # at least once anyway
    consumer = ShareConsumer(bootstrap, group, topics=[source])
    try:
        last_seen = time.monotonic()
        while max_records is None or moved < max_records:
            records = consumer.poll(0.5)
            if not records:
                if time.monotonic() - last_seen > idle:
                    break
                continue
            last_seen = time.monotonic()
            sent: list[ConsumerRecord] = []
            for record in records:
                d = parse_dead_letter(record)
                destination = target or d.source_topic
                if (max_records is not None and moved + len(sent) >= max_records) or destination is None:
                    consumer.acknowledge(record, AcknowledgeType.RELEASE)
                    continue
                if not _wanted(d, causes):
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)  # this group passes it by
                    skipped += 1
                    continue
                if interval:
                    pause = next_send - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    next_send = max(next_send, time.monotonic()) + interval
                partition = d.source_partition if target is None else None
                producer.send(destination, d.value, key=d.key, headers=d.headers, partition=partition)
                if interval:  # paced: let each go at once, so a kill repeats at most one record
                    producer.flush()
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                    consumer.commit()
                    moved += 1
                    continue
                sent.append(record)
            producer.flush()  # durable in the target before the dead letters are let go
            for record in sent:
                consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            moved += len(sent)
            consumer.commit()
            if not quiet:
                click.echo(f"moved {moved}, skipped {skipped}", err=True)
    finally:
        consumer.close()
        producer.close()
    return moved, skipped
