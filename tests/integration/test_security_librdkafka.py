"""librdkafka clients (Producer, Consumer, ShareConsumer, AdminClient) against TLS and SASL_SSL
listeners with SCRAM-SHA-512 and ACLs: refused with a wrong password, an unknown user or a
missing ACL, allowed once the ACL is added."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography import x509
from secure_broker import (
    ADMIN,
    ADMIN_PASSWORD,
    Certificates,
    add_user,
    rdkafka_config,
    secure_config,
)

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

BOB, BOB_PASSWORD = "bob", "bob-secret"


def _admin(
    broker: EmbeddedBroker, certs: Certificates, user: str = ADMIN, password: str = ADMIN_PASSWORD
) -> AdminClient:
    return AdminClient(rdkafka_config(broker, certs, user, password))


def _setup(broker: EmbeddedBroker, certs: Certificates, topic: str, partitions: int = 1) -> AdminClient:
    """As the administrator: bob gets a credential, the topic exists."""
    admin = _admin(broker, certs)
    upsert = UserScramCredentialUpsertion(
        BOB, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), BOB_PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=10)
    for future in admin.create_topics([NewTopic(topic, partitions)]).values():
        future.result(timeout=10)
    return admin


def _allow(
    admin: AdminClient, kind: ResourceType, name: str, operation: AclOperation, principal: str = f"User:{BOB}"
) -> None:
    binding = AclBinding(
        kind, name, ResourcePatternType.LITERAL, principal, "*", operation, AclPermissionType.ALLOW
    )
    for future in admin.create_acls([binding]).values():
        future.result(timeout=10)


def _produce(config: dict[str, Any], topic: str, values: list[bytes]) -> list[Any]:
    """Produce with a fresh producer; returns the delivery errors (``None`` for each success)."""
    producer = Producer({**config, "message.timeout.ms": 5000})
    outcomes: list[Any] = []
    for value in values:
        try:
            producer.produce(topic, value, on_delivery=lambda error, _m: outcomes.append(error))
        except KafkaException as error:
            outcomes.append(error.args[0])
    producer.flush(10)
    return outcomes


def _auth_errors(config: dict[str, Any]) -> list[KafkaError]:
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce("anything", b"x")
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(1)
    return errors


def test_wrong_password_and_unknown_user_are_refused(secure: EmbeddedBroker, certs: Certificates) -> None:
    _setup(secure, certs, "t")
    for user, password in ((BOB, "not-the-password"), ("mallory", "whatever")):
        errors = _auth_errors(rdkafka_config(secure, certs, user, password))
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in errors[0].str()
    assert _produce(rdkafka_config(secure, certs, BOB, BOB_PASSWORD), "t", [b"ok"])[0].code() == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )


def test_producer_and_consumer_need_topic_and_group_acls(secure: EmbeddedBroker, certs: Certificates) -> None:
    admin = _setup(secure, certs, "orders")
    bob = rdkafka_config(secure, certs, BOB, BOB_PASSWORD)
    assert [e.code() for e in _produce(bob, "orders", [b"a"])] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    _allow(admin, ResourceType.TOPIC, "orders", AclOperation.WRITE)
    assert _produce(bob, "orders", [b"a", b"b", b"c"]) == [None, None, None]

    def consume(group: str) -> tuple[list[bytes], KafkaError | None]:
        consumer = Consumer({**bob, "group.id": group, "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        try:
            while len(got) < 3 and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error() is not None:
                    return got, message.error()
                got.append(message.value())
        finally:
            consumer.close()
        return got, None

    got, error = consume("readers")
    assert not got and error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(admin, ResourceType.GROUP, "readers", AclOperation.READ)
    got, error = consume("readers")
    assert not got and error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _allow(admin, ResourceType.TOPIC, "orders", AclOperation.READ)
    got, error = consume("readers")
    assert error is None and sorted(got) == [b"a", b"b", b"c"]


def test_share_consumer_needs_group_read(secure: EmbeddedBroker, certs: Certificates) -> None:
    admin = _setup(secure, certs, "jobs", partitions=2)
    admin_config = rdkafka_config(secure, certs, ADMIN, ADMIN_PASSWORD)
    assert _produce(admin_config, "jobs", [b"j%d" % i for i in range(20)]) == [None] * 20
    _allow(admin, ResourceType.TOPIC, "jobs", AclOperation.READ)
    bob = rdkafka_config(secure, certs, BOB, BOB_PASSWORD)

    def share_poll(expect: int) -> tuple[list[bytes], list[KafkaError]]:
        consumer = ShareConsumer({**bob, "group.id": "workers"})
        consumer.subscribe(["jobs"])
        got: list[bytes] = []
        errors: list[KafkaError] = []
        deadline = time.monotonic() + 15
        try:
            while len(got) < expect and not errors and time.monotonic() < deadline:
                try:
                    messages = consumer.poll(0.2)
                except KafkaException as error:
                    errors.append(error.args[0])
                    break
                for message in messages:
                    if message.error() is not None:
                        errors.append(message.error())
                    else:
                        got.append(message.value())
        finally:
            consumer.close()
        return got, errors

    got, errors = share_poll(20)
    assert not got and errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, errors
    _allow(admin, ResourceType.GROUP, "workers", AclOperation.READ)
    got, errors = share_poll(20)
    assert not errors and sorted(got) == sorted(b"j%d" % i for i in range(20))


def test_admin_needs_cluster_alter(secure: EmbeddedBroker, certs: Certificates) -> None:
    admin = _setup(secure, certs, "t")
    bob_admin = _admin(secure, certs, BOB, BOB_PASSWORD)
    binding = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:eve",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as refused:
        for future in bob_admin.create_acls([binding]).values():
            future.result(timeout=10)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    _allow(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)
    for future in bob_admin.create_acls([binding]).values():
        future.result(timeout=10)
    every = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    found = admin.describe_acls(every).result(timeout=10)
    assert binding in found and len(found) == 2


def test_metadata_hides_topics_and_acls_survive_restart(tmp_path: Path, certs: Certificates) -> None:
    data = tmp_path / "data"
    add_user(data, ADMIN, ADMIN_PASSWORD)
    with EmbeddedBroker(data, secure_config(certs)) as broker:
        admin = _setup(broker, certs, "visible")
        for future in admin.create_topics([NewTopic("hidden", 1)]).values():
            future.result(timeout=10)
        _allow(admin, ResourceType.TOPIC, "visible", AclOperation.DESCRIBE)
        listed = _admin(broker, certs, BOB, BOB_PASSWORD).list_topics(timeout=10).topics
        assert set(listed) == {"visible"}
    with EmbeddedBroker(data, secure_config(certs)) as broker:
        listed = _admin(broker, certs, BOB, BOB_PASSWORD).list_topics(timeout=10).topics
        assert set(listed) == {"visible"}  # the credential and the ACL came back from disk


def test_ssl_client_certificate_is_the_principal(secure: EmbeddedBroker, certs: Certificates) -> None:
    admin = _setup(secure, certs, "certs")
    ssl = rdkafka_config(
        secure,
        certs,
        None,
        **{"ssl.certificate.location": str(certs.client_cert), "ssl.key.location": str(certs.client_key)},
    )
    assert [e.code() for e in _produce(ssl, "certs", [b"x"])] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    subject = x509.load_pem_x509_certificate(certs.client_cert.read_bytes()).subject.rfc4514_string()
    assert subject.startswith("CN=carol,")
    _allow(admin, ResourceType.TOPIC, "certs", AclOperation.WRITE, principal=f"User:{subject}")
    assert _produce(ssl, "certs", [b"x"]) == [None]


def test_reauthentication_keeps_a_producer_going(tmp_path: Path, certs: Certificates) -> None:
    data = tmp_path / "data"
    add_user(data, ADMIN, ADMIN_PASSWORD)
    with EmbeddedBroker(data, secure_config(certs, **{"connections.max.reauth.ms": "1000"})) as broker:
        producer = Producer({**rdkafka_config(broker, certs, ADMIN, ADMIN_PASSWORD), "linger.ms": 0})
        outcomes: list[Any] = []
        started = time.monotonic()
        while time.monotonic() - started < 3.5:
            producer.produce("steady", b"x", on_delivery=lambda e, _m: outcomes.append(e))
            producer.poll(0.05)
        producer.flush(10)
        assert outcomes and all(e is None for e in outcomes)
        # the first authentication per connection plus at least two re-authentications
        assert broker.broker.io.api(36).requests >= 2 * 3


def test_required_client_certificate(tmp_path: Path, certs: Certificates) -> None:
    """``ssl.client.auth=required`` on one listener (Kafka's per-listener prefix): a client without
    a certificate is refused, one with a certificate the truststore signed gets answers."""
    import socket
    import ssl

    from shareq.client.connection import BrokerConnection
    from shareq.client.security import ClientSecurity

    config = secure_config(certs, **{"listener.name.ssl.ssl.client.auth": "required"})
    with EmbeddedBroker(tmp_path / "data", config) as broker:
        endpoint = broker.broker.listener("SSL")
        context = ssl.create_default_context(cafile=str(certs.ca))
        with (
            socket.create_connection((endpoint.host, endpoint.port), timeout=5) as raw,
            pytest.raises((ssl.SSLError, ConnectionError)),
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(b"\x00\x00\x00\x00")
            if tls.recv(1) == b"":
                raise ConnectionError("closed")
        security = ClientSecurity(
            protocol="SSL",
            ca_location=str(certs.ca),
            certificate_location=str(certs.client_cert),
            key_location=str(certs.client_key),
        )
        with BrokerConnection(endpoint.host, endpoint.port, security=security) as conn:
            assert conn.broker_versions
