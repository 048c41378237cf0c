"""Crash-durable delivery counts with real clients: a poison record whose delivery takes down either
its consumer process (SIGKILL) or the broker (SIGKILL, as a co-located consumer running out of memory
would), three times each way, alternating. With ``shareq.delivery.count.durable`` it is dead-lettered
after exactly ``limit`` deliveries seen by the consumers; with the config off (Kafka's behaviour) every
broker crash forgets the delivery in flight, so the consumers see it ``limit`` + 3 times."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from broker_harness import BrokerProcess, kill_group, spawn
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from share_consumers import FAST, SHARE_BROKER, as_pairs, create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

LIMIT = 5
NOTHING_FOR_S = 4.0
"""A round in which no consumer gets the record this long: it is gone (archived)."""

_CONSUMER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "g",
                   "share.acknowledgement.mode": "explicit",
                   "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200})
c.subscribe(["q"])
while True:
    for m in c.poll(0.2):
        print(m.delivery_count(), flush=True)
        time.sleep(3600)  # holds the record until killed
"""


def _alter_group(bootstrap: str, changes: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changes.items()]
    resource = ConfigResource(ResourceType.GROUP, "g", incremental_configs=entries)
    admin.incremental_alter_configs([resource], request_timeout=15)[resource].result()


def _deliver(bootstrap: str) -> tuple[subprocess.Popen[str], int | None]:
    """A consumer process that prints the poison record's delivery count when it gets it (None if it
    gets nothing for ``NOTHING_FOR_S`` after joining) and then holds it."""
    proc = spawn([sys.executable, "-c", _CONSUMER, bootstrap], stdout=subprocess.PIPE, env=os.environ.copy())
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    deadline = time.monotonic() + NOTHING_FOR_S + 3  # joining the group takes a heartbeat or two
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            return proc, int(line)
        time.sleep(0.05)
    return proc, None


def _dead_letter_count(bootstrap: str) -> bytes:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest", **FAST}
    )
    consumer.subscribe(["dlq.q"])
    try:
        deadline = time.monotonic() + 15
        while True:
            assert time.monotonic() < deadline, "nothing in the DLQ"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                return dict(message.headers() or [])["__dlq.errors.delivery.count"]
    finally:
        consumer.close()


@pytest.mark.parametrize("durable", [True, False])
def test_a_poison_record_reaches_the_limit_only_with_durable_counts(tmp_path: Path, durable: bool) -> None:
    config = {**SHARE_BROKER, "errors.deadletterqueue.auto.create.topics.enable": "true"}
    broker = BrokerProcess(tmp_path / "data", *as_pairs(config))
    broker.start()
    counts: list[int] = []
    try:
        create_topic(broker.bootstrap, "q", 1)
        produce(broker.bootstrap, "q", [b"poison"], 1)
        changes = {"share.delivery.count.limit": str(LIMIT), "errors.deadletterqueue.topic.name": "dlq.q"}
        if durable:
            changes["shareq.delivery.count.durable"] = "true"
        _alter_group(broker.bootstrap, changes)
        broker_kills = 0
        for _ in range(LIMIT + 5):
            proc, count = _deliver(broker.bootstrap)
            try:
                if count is None:
                    break  # not delivered any more
                counts.append(count)
                if broker_kills < 3 and len(counts) % 2 == 1:
                    broker.kill()  # the record took the broker down
                    broker_kills += 1
                    kill_group(proc)
                    broker.start()
            finally:
                kill_group(proc)  # the record took its consumer down: the broker releases it
        assert broker_kills == 3
        dead = _dead_letter_count(broker.bootstrap)
    finally:
        broker.kill()
    if durable:
        assert counts == [1, 2, 3, 4, 5]  # exactly the limit's deliveries, three broker crashes included
    else:
        assert counts == [1, 1, 2, 2, 3, 3, 4, 5]  # Kafka's: each broker crash forgets one delivery
    assert dead == str(LIMIT).encode()
