"""Kafka Streams 4.4 as a client, with exactly_once_v2, against a Kafka 4.4 node and shareq.

A word count written for the test (``tests/kafka-streams/WordCount.java``: a repartition topic, a counting
store with its changelog, no record cache) reads lines while its broker is killed and started again. Streams
commits with transactions (transaction.version 2: an epoch bump per commit, partitions and offsets added
implicitly), regroups through its internal topics and restores its store from the compacted changelog;
with exactly-once, a read_committed reader of the output finds each word's counts 1..n exactly once on both
brokers.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import test_compat_client_restart
from broker_harness import kill_group
from compat_support import kafka_unavailable
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from test_compat_client_restart import Node

import kafka_harness

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka"), pytest.mark.timeout(300)]

restartable = test_compat_client_restart.node  # a one-node Kafka or shareq that can be killed and restarted
PARTITIONS = 2
LINES = [f"w{i % 7} w{i % 5} w{i % 3}" for i in range(60)]
FAST = {"socket.timeout.ms": 10000, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500}


def _streams_command(bootstrap: str, app_id: str, source: str, sink: str, state_dir: Path) -> list[str]:
    try:
        kafka_lib, streams_lib = kafka_harness.ensure_kafka_jars(), kafka_harness.ensure_streams_jars()
    except kafka_harness.KafkaUnavailable as error:
        kafka_unavailable(str(error))
    log4j = kafka_lib / "log4j2-tools.properties"
    return [
        "java",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{kafka_lib}/*:{streams_lib}/*",
        str(kafka_harness.STREAMS_DIR / "WordCount.java"),
        *(bootstrap, app_id, source, sink, str(state_dir)),
    ]


def _produce(bootstrap: str, topic: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 60000, **FAST})
    for i, line in enumerate(lines):
        producer.produce(topic, key=str(i).encode(), value=line.encode())
    assert producer.flush(60) == 0


def _committed_output(bootstrap: str, topic: str, at_least: int, timeout_s: float) -> list[tuple[str, str]]:
    """The output as read_committed sees it, once it holds ``at_least`` records (and a moment more, to see
    a duplicate) or the time is up."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            **FAST,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[tuple[str, str]] = []
        deadline = time.monotonic() + timeout_s
        settle: float | None = None
        while time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=0.2):
                if m.error() is None:
                    got.append((m.key().decode(), m.value().decode()))
            if len(got) >= at_least:
                settle = settle if settle is not None else time.monotonic() + 1.0
                if time.monotonic() > settle:
                    break
        return got
    finally:
        consumer.close()


def _epochs(bootstrap: str, app_id: str) -> list[int]:
    """The producer epoch of each of the application's transactional ids, as kafka-transactions shows it."""
    tools = "org.apache.kafka.tools."
    listed = kafka_harness.run_tool(tools + "TransactionsCommand", "--bootstrap-server", bootstrap, "list")
    ids = [line.split()[0] for line in listed.stdout.splitlines() if line.startswith(app_id)]
    epochs = []
    for txn_id in ids:
        out = (
            kafka_harness.run_tool(
                tools + "TransactionsCommand",
                "--bootstrap-server",
                bootstrap,
                "describe",
                "--transactional-id",
                txn_id,
            )
            .stdout.strip()
            .splitlines()
        )
        header, row = out[-2].split(), out[-1].split()
        epochs.append(int(row[header.index("ProducerEpoch")]))
    return epochs


def _expected(lines: list[str]) -> list[tuple[str, str]]:
    counts = Counter(word for line in lines for word in line.split())
    return sorted((word, str(n)) for word, total in counts.items() for n in range(1, total + 1))


def test_word_count_exactly_once_v2_through_a_restart(restartable: Node, tmp_path: Path) -> None:
    """Each word's counts 1..n reach the output exactly once, half of the lines read before the broker is
    killed and started again and half after; the application's producers bumped their epochs as they
    committed (transaction.version 2)."""
    node = restartable
    stem = uuid.uuid4().hex[:8]
    source, sink, app_id = f"lines-{stem}", f"counts-{stem}", f"wordcount-{stem}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap, **FAST})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (source, sink)]).values():
        future.result(30)
    half = len(LINES) // 2
    first, second = LINES[:half], LINES[half:]
    app = subprocess.Popen(
        _streams_command(node.bootstrap, app_id, source, sink, tmp_path / "state"),
        stdin=subprocess.PIPE,
        stdout=(tmp_path / "streams.out").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _produce(node.bootstrap, source, first)
        before = _committed_output(node.bootstrap, sink, len(_expected(first)), 120)
        assert sorted(before) == _expected(first), (tmp_path / "streams.out").read_text()[-3000:]
        assert node.restart_later().wait(120)
        _produce(node.bootstrap, source, second)
        after = _committed_output(node.bootstrap, sink, len(_expected(LINES)), 150)
        assert sorted(after) == _expected(LINES), (tmp_path / "streams.out").read_text()[-3000:]
        epochs = _epochs(node.bootstrap, app_id)  # TV2: every commit bumped it (TV1 keeps 0 throughout)
        assert epochs and min(epochs) >= 2, epochs
    finally:
        assert app.stdin is not None
        app.stdin.close()
        try:
            app.wait(30)
        except subprocess.TimeoutExpired:
            kill_group(app)
            app.wait(10)
