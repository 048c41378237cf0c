"""SASL/PLAIN users from Kafka's broker-side JAAS line, ``listener.name.<l>.plain.sasl.jaas.config``:
the same ``server.properties`` lines on Kafka 4.4 and on shareq let a listed user in and refuse a wrong
password, an unknown user and a user who only has a SCRAM credential."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from compat_support import COMMON, kafka_unavailable
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

import kafka_harness
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka"), pytest.mark.timeout(240)]

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SASL = {
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
}


@contextmanager
def _kafka(directory: Path) -> Iterator[tuple[str, str]]:
    """One Kafka node with a SASL_PLAINTEXT listener beside its PLAINTEXT one."""
    try:
        kafka_harness.ensure_kafka_jars()
    except (kafka_harness.KafkaUnavailable, OSError) as error:
        kafka_unavailable(str(error))
    cluster = kafka_harness.KafkaCluster(directory, 1, {**COMMON, **SASL})
    node = cluster.nodes[0]
    port = kafka_harness.free_port()
    props = node.properties
    props["listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{port}"
    props["advertised.listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{port}"
    props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
    try:
        cluster.start()
        yield cluster.bootstrap, f"127.0.0.1:{port}"
    finally:
        cluster.stop()


@contextmanager
def _shareq(directory: Path) -> Iterator[tuple[str, str]]:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **SASL}
    with EmbeddedBroker(directory, config) as broker:
        sasl = broker.broker.listener("SASL_PLAINTEXT")
        yield broker.bootstrap, f"{sasl.host}:{sasl.port}"


def _outcome(bootstrap: str, user: str, password: str) -> str:
    """``delivered`` or the first error librdkafka reports for a PLAIN producer as ``user``."""
    errors: list[KafkaError] = []
    delivered: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
            "error_cb": errors.append,
            "message.timeout.ms": 10000,
        }
    )
    producer.produce("plain", b"x", on_delivery=lambda error, _m: delivered.append(error))
    deadline = time.monotonic() + 20
    while not errors and not delivered and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(1)
    if delivered and delivered[0] is None:
        return "delivered"
    if errors:
        return errors[0].name()
    return "timeout" if not delivered else delivered[0].name()


@pytest.mark.parametrize("kind", ["kafka", "shareq"])
def test_plain_users_come_from_the_listeners_jaas_line(tmp_path: Path, kind: str) -> None:
    """The same JAAS line on both: a listed user produces; a wrong password, an unknown user and a
    user with only a SCRAM credential are refused over PLAIN."""
    start = _kafka if kind == "kafka" else _shareq
    with start(tmp_path / kind) as (plaintext, sasl):
        admin = AdminClient({"bootstrap.servers": plaintext})
        admin.create_topics([NewTopic("plain", 1)])["plain"].result(30)
        carol = UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret"
        )
        for future in admin.alter_user_scram_credentials([carol]).values():
            future.result(30)
        outcomes = {
            "listed": _outcome(sasl, "alice", "alice-secret"),
            "wrong password": _outcome(sasl, "alice", "admin-secret"),
            "unknown user": _outcome(sasl, "mallory", "alice-secret"),
            "scram only": _outcome(sasl, "carol", "carol-secret"),
        }
    assert outcomes == {
        "listed": "delivered",
        "wrong password": "_AUTHENTICATION",
        "unknown user": "_AUTHENTICATION",
        "scram only": "_AUTHENTICATION",
    }
