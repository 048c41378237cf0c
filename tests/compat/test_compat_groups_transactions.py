"""Consumer groups and transactions through librdkafka, against Kafka and shareq. The clients run in a child
process with their own deadline: a broker without these APIs must fail the test, not hang or crash the
test process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from compat_support import Server, create_topic, produce

pytestmark = pytest.mark.timeout(90)

_GROUP_CONSUMER = """
import sys, time
from confluent_kafka import Consumer
bootstrap, topic, group = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 10000, "socket.timeout.ms": 5000})
c.subscribe([topic])
got, deadline = [], time.monotonic() + 12
while len(got) < 10 and time.monotonic() < deadline:
    m = c.poll(0.2)
    if m is not None and m.error() is None:
        got.append(m.offset())
if got:
    c.commit(asynchronous=False)
committed = c.committed(c.assignment(), timeout=10) if got else []
print(sorted(got), sorted(tp.offset for tp in committed), flush=True)
c.close()
"""

_TRANSACTIONAL_PRODUCER = """
import sys
from confluent_kafka import Consumer, Producer, TopicPartition
bootstrap, topic = sys.argv[1:3]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-" + topic, "socket.timeout.ms": 5000,
              "transaction.timeout.ms": 10000})
p.init_transactions(10)
p.begin_transaction()
for i in range(3):
    p.produce(topic, value=b"committed", partition=0)
p.commit_transaction(20)
p.begin_transaction()
p.produce(topic, value=b"aborted", partition=0)
p.abort_transaction(20)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_committed",
              "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0, 0)])
values = []
import time
deadline = time.monotonic() + 15
while len(values) < 3 and time.monotonic() < deadline:
    m = c.poll(0.2)
    if m is not None and m.error() is None:
        values.append(m.value().decode())
print(values, flush=True)
c.close()
"""


_TRANSACTION_OFFSETS = """
import sys, time
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
bootstrap, topic = sys.argv[1:3]
fast = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000}
p = Producer({**fast, "transactional.id": "txo-" + topic, "transaction.timeout.ms": 20000})
p.init_transactions(15)
def txn(values, commit):
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v.encode(), partition=0)
    p.flush(15)
    (p.commit_transaction if commit else p.abort_transaction)(15)
txn(["c0", "c1", "c2"], True)
txn(["a0", "a1"], False)
p.begin_transaction()
for v in ("o0", "o1"):
    p.produce(topic, value=v.encode(), partition=0)
p.flush(15)
def ends(isolation):
    c = Consumer({**fast, "group.id": "unused", "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()
def read(isolation, until):
    c = Consumer({**fast, "group.id": "unused", "isolation.level": isolation, "fetch.wait.max.ms": 50})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 15
    while time.monotonic() < deadline and c.position([TopicPartition(topic, 0)])[0].offset < until:
        for m in c.consume(100, timeout=0.2):
            if m.error() is None:
                got.append((m.offset(), m.value().decode()))
    c.close()
    return got
print("open", ends("read_uncommitted"), ends("read_committed"), flush=True)
print("stable", read("read_committed", 7), flush=True)
zombie_error = None
successor = Producer({**fast, "transactional.id": "txo-" + topic})
successor.init_transactions(15)
try:
    p.commit_transaction(15)
except KafkaException as e:
    zombie_error = (e.args[0].fatal(), e.args[0].code() == -144)
print("fenced", zombie_error, ends("read_uncommitted"), ends("read_committed"), flush=True)
print("committed", read("read_committed", 10), flush=True)
print("uncommitted", [o for o, _ in read("read_uncommitted", 10)], flush=True)
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )


def test_consumer_group_consumes_and_commits(server: Server, names: tuple[str, str]) -> None:
    """A librdkafka Consumer with subscribe() joins a group, reads all 10 records and commits offset 10."""
    topic, group = names
    create_topic(server, topic)
    produce(server, topic, [b"c%d" % i for i in range(10)])
    result = _run(_GROUP_CONSUMER, server.bootstrap, topic, group)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == f"{list(range(10))} [10]"


def test_transactional_producer_read_committed(server: Server, names: tuple[str, str]) -> None:
    """A transactional producer commits 3 records and aborts 1; a read_committed consumer sees the 3."""
    create_topic(server, names[0])
    result = _run(_TRANSACTIONAL_PRODUCER, server.bootstrap, names[0])
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(["committed"] * 3)


def test_transaction_offsets_lso_and_fencing(server: Server, names: tuple[str, str]) -> None:
    """Markers take one offset each; an open transaction holds read_committed at its first offset
    (ListOffsets and Fetch); a second producer with the same id fences the first and aborts its
    open transaction; read_committed never sees aborted records."""
    create_topic(server, names[0])
    result = _run(_TRANSACTION_OFFSETS, server.bootstrap, names[0])
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert lines == [
        "open (0, 9) (0, 7)",
        "stable [(0, 'c0'), (1, 'c1'), (2, 'c2')]",
        "fenced (True, True) (0, 10) (0, 10)",
        "committed [(0, 'c0'), (1, 'c1'), (2, 'c2')]",
        "uncommitted [0, 1, 2, 4, 5, 7, 8]",
    ], result.stdout


def test_our_consumer_drops_aborted_transactions_when_read_committed(
    server: Server, names: tuple[str, str]
) -> None:
    """Two transactions interleave in one partition; one aborts. shareq's own Consumer at
    read_committed returns only the committed records (the broker sends the aborted-transaction
    list, the client filters), at read_uncommitted every data record."""
    from confluent_kafka import Producer

    from shareq.client import Consumer as OurConsumer

    topic = names[0]
    create_topic(server, topic)

    def producer(tid: str) -> Producer:
        p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": tid, "linger.ms": 0})
        p.init_transactions(30)
        p.begin_transaction()
        return p

    doomed, kept = producer(f"{topic}-a"), producer(f"{topic}-b")
    for i in range(3):
        for p, tag in ((doomed, "a"), (kept, "b")):
            p.produce(topic, f"{tag}{i}".encode(), partition=0)
            assert p.flush(15) == 0  # one batch per record: the two transactions interleave
    kept.commit_transaction(30)
    doomed.abort_transaction(30)
    later = producer(f"{topic}-c")
    later.produce(topic, b"c0", partition=0)
    later.commit_transaction(30)

    def read(isolation: int) -> list[str]:
        with OurConsumer(server.bootstrap, isolation_level=isolation) as consumer:
            end = consumer.offsets(topic)[0].offset
            consumer.assign({(topic, 0): 0})
            values: list[str] = []
            deadline = time.monotonic() + 30
            while consumer.position(topic, 0) < end and time.monotonic() < deadline:
                records = consumer.poll(1.0)
                values += [r.value.decode() for r in records if r.value is not None]
            return values

    assert read(1) == ["b0", "b1", "b2", "c0"]
    assert read(0) == ["a0", "b0", "a1", "b1", "a2", "b2", "c0"]
