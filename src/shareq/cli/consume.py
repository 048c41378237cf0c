"""``shareq consume``: a console share consumer with explicit acknowledgement.

Each record printed is acknowledged with ``--ack`` (accept by default; release hands it back
for another delivery, reject archives it). Records acquired but not printed (beyond
``--max-records``) are released on exit, so nothing stays locked until its lease expires.
"""

from __future__ import annotations

import json
import time

import click

from shareq.client import AcknowledgeType, ConsumerRecord, ShareConsumer

from ._common import REQUEST_TIMEOUT_S, admin_client, bootstrap_option, friendly_errors, json_option

_ACKS = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def _line(record: ConsumerRecord, as_json: bool, print_key: bool, separator: str) -> str:
    if as_json:
        return json.dumps(
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "delivery_count": record.delivery_count,
                "timestamp": record.timestamp,
                "key": _text(record.key),
                "value": _text(record.value),
            },
            sort_keys=True,
        )
    value = _text(record.value) or ""
    return f"{_text(record.key) or ''}{separator}{value}" if print_key else value


@click.command()
@click.option("--group", "-g", required=True, help="share group to consume in")
@click.option("--topic", "-t", "topics", required=True, multiple=True)
@click.option("--ack", type=click.Choice(sorted(_ACKS)), default="accept", show_default=True)
@click.option("--max-records", type=click.IntRange(min=1), help="stop after this many records")
@click.option("--timeout", type=float, help="stop when no record arrives for this many seconds")
@click.option("--print-key", is_flag=True, help="print KEY<separator>VALUE")
@click.option("--key-separator", default="\t", show_default=repr("\t"))
@bootstrap_option
@json_option
@friendly_errors
def consume(
    group: str,
    topics: tuple[str, ...],
    ack: str,
    max_records: int | None,
    timeout: float | None,
    print_key: bool,
    key_separator: str,
    bootstrap: str,
    as_json: bool,
) -> None:
    """Consume TOPIC(s) in a share group and print each record's value on its own line."""
    with admin_client(bootstrap) as admin:
        for topic in topics:  # a share group waits silently for a missing topic: say so instead
            admin.describe_topic(topic)
    consumer = ShareConsumer(
        bootstrap, group, topics=list(topics), client_id="shareq-cli", request_timeout=REQUEST_TIMEOUT_S
    )
    kind = _ACKS[ack]
    count = 0
    try:
        idle_since = time.monotonic()
        while max_records is None or count < max_records:
            wait = 1.0 if timeout is None else max(0.0, min(1.0, idle_since + timeout - time.monotonic()))
            limit = None if max_records is None else max_records - count
            records = consumer.poll(wait, max_records=limit)
            for record in records:
                click.echo(_line(record, as_json, print_key, key_separator))
                consumer.acknowledge(record, kind)
            count += len(records)
            if records:
                consumer.commit()
                idle_since = time.monotonic()
            elif timeout is not None and time.monotonic() - idle_since >= timeout:
                break
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close(release=True)
    click.echo(f"consumed {count} record(s)", err=True)
