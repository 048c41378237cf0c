"""``shareq consume``: a console consumer, in a share group (default) or a consumer group.

In a share group each record printed is acknowledged with ``--ack`` (accept by default; release
hands it back for another delivery, reject archives it). Records acquired but not printed (beyond
``--max-records``) are released on exit, so nothing stays locked until its lease expires.

With ``--mode consumer`` it joins a KIP-848 consumer group instead, reads its assigned partitions
from their committed offsets and commits after each batch it prints (kafka-console-consumer.sh
with ``--group``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

import click

from shareq.client import AcknowledgeType, ConsumerRecord, GroupConsumer, ShareConsumer

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
@click.option("--group", "-g", required=True, help="group to consume in")
@click.option(
    "--mode",
    type=click.Choice(["share", "consumer"]),
    default="share",
    show_default=True,
    help="share: a share group with acknowledgements; consumer: a consumer group that commits offsets",
)
@click.option(
    "--from",
    "reset",
    type=click.Choice(["earliest", "latest"]),
    default="earliest",
    show_default=True,
    help="consumer mode: where partitions with no committed offset start",
)
@click.option("--topic", "-t", "topics", required=True, multiple=True)
@click.option(
    "--ack", type=click.Choice(sorted(_ACKS)), default="accept", show_default=True, help="share mode only"
)
@click.option("--max-records", type=click.IntRange(min=1), help="stop after this many records")
@click.option("--timeout", type=float, help="stop when no record arrives for this many seconds")
@click.option("--print-key", is_flag=True, help="print KEY<separator>VALUE")
@click.option("--key-separator", default="\t", show_default=repr("\t"))
@bootstrap_option
@json_option
@friendly_errors
def consume(
    group: str,
    mode: str,
    reset: str,
    topics: tuple[str, ...],
    ack: str,
    max_records: int | None,
    timeout: float | None,
    print_key: bool,
    key_separator: str,
    bootstrap: str,
    as_json: bool,
) -> None:
    """Consume TOPIC(s) in a share group (or a consumer group) and print each record's value on its
    own line."""
    with admin_client(bootstrap) as admin:
        for topic in topics:  # a group waits silently for a missing topic: say so instead
            admin.describe_topic(topic)
    if mode == "consumer":
        _consume_in_group(
            bootstrap, group, topics, reset, max_records, timeout, as_json, print_key, key_separator
        )
        return
    consumer = ShareConsumer(
        bootstrap, group, topics=list(topics), client_id="shareq-cli", request_timeout=REQUEST_TIMEOUT_S
    )
    kind = _ACKS[ack]

    def acknowledge(record: ConsumerRecord) -> None:
        consumer.acknowledge(record, kind)

    try:
        count = _print_records(
            consumer.poll,
            consumer.commit,
            max_records,
            timeout,
            lambda r: _line(r, as_json, print_key, key_separator),
            acknowledge,
        )
    finally:
        consumer.close(release=True)
    click.echo(f"consumed {count} record(s)", err=True)


def _print_records(
    poll: Callable[[float, int | None], Sequence[ConsumerRecord]],
    commit: Callable[[], object],
    max_records: int | None,
    timeout: float | None,
    line: Callable[[ConsumerRecord], str],
    after: Callable[[ConsumerRecord], None] | None = None,
) -> int:
    """Poll (at most the records still wanted, None: any number), print each record's ``line``
    (then ``after`` it) and commit after each non-empty poll; until ``max_records``, ``timeout``
    seconds without a record, or Ctrl-C. Returns the count."""
    count = 0
    try:
        idle_since = time.monotonic()
        while max_records is None or count < max_records:
            wait = 1.0 if timeout is None else max(0.0, min(1.0, idle_since + timeout - time.monotonic()))
            records = poll(wait, None if max_records is None else max_records - count)
            for record in records:
                click.echo(line(record))
                if after is not None:
                    after(record)
            count += len(records)
            if records:
                commit()
                idle_since = time.monotonic()
            elif timeout is not None and time.monotonic() - idle_since >= timeout:
                break
    except KeyboardInterrupt:
        pass
    return count


def _consume_in_group(
    bootstrap: str,
    group: str,
    topics: tuple[str, ...],
    reset: str,
    max_records: int | None,
    timeout: float | None,
    as_json: bool,
    print_key: bool,
    key_separator: str,
) -> None:
    consumer = GroupConsumer(
        bootstrap,
        group,
        topics,
        client_id="shareq-cli",
        request_timeout=REQUEST_TIMEOUT_S,
        auto_offset_reset=reset,
    )

    def poll(wait: float, wanted: int | None) -> list[ConsumerRecord]:
        return consumer.poll(wait, max_records=500 if wanted is None else min(500, wanted))

    try:
        count = _print_records(
            poll, consumer.commit, max_records, timeout, lambda r: _line(r, as_json, print_key, key_separator)
        )
    finally:
        consumer.close()
    click.echo(f"consumed {count} record(s)", err=True)
