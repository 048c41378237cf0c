"""``shareq produce``: each line of stdin becomes one record (optionally KEY<sep>VALUE)."""

from __future__ import annotations

import sys

import click

from shareq.client import Producer

from ._common import REQUEST_TIMEOUT_S, bootstrap_option, emit_json, friendly_errors, json_option


@click.command()
@click.option("--topic", "-t", required=True)
@click.option("--key-separator", help="split each line at the first SEP into key and value")
@click.option("--partition", "-p", type=int, help="send every record to this partition")
@bootstrap_option
@json_option
@friendly_errors
def produce(
    topic: str, key_separator: str | None, partition: int | None, bootstrap: str, as_json: bool
) -> None:
    """Produce the lines of stdin to TOPIC."""
    producer = Producer(bootstrap, client_id="shareq-cli", request_timeout=REQUEST_TIMEOUT_S)
    count = 0
    try:
        for raw in sys.stdin.buffer:
            line = raw.rstrip(b"\r\n")
            key: bytes | None = None
            if key_separator:
                head, sep, tail = line.partition(key_separator.encode())
                if sep:
                    key, line = head, tail
            producer.send(topic, line, key=key, partition=partition)
            count += 1
        results = producer.flush()
    finally:
        producer.close()
    if as_json:
        emit_json({"topic": topic, "records": count, "offsets": [[r.partition, r.offset] for r in results]})
    else:
        click.echo(f"produced {count} record(s) to {topic}")
