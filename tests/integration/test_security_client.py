"""The project's own client (admin, producer, share consumer) and the ``shareq users`` /
``shareq acls`` commands over SASL_SSL with SCRAM-SHA-512 against a broker with ACLs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kio.schema.errors import ErrorCode
from secure_broker import (
    ADMIN,
    ADMIN_PASSWORD,
    Certificates,
    bootstrap,
    client_security,
)

from shareq.cli.main import main
from shareq.client import Admin, KafkaError, Producer, ShareConsumer
from shareq.embedded import EmbeddedBroker
from shareq.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

DAN, DAN_PASSWORD = "dan", "dan-secret"


def _admin(
    broker: EmbeddedBroker, certs: Certificates, user: str = ADMIN, password: str = ADMIN_PASSWORD
) -> Admin:
    return Admin(
        bootstrap(broker, "SASL_SSL"), security=client_security(certs, user, password), request_timeout=10
    )


def _allow(admin: Admin, kind: ResourceType, name: str, operation: Operation) -> None:
    admin.create_acls(
        [AclBinding(kind, name, PatternType.LITERAL, f"User:{DAN}", "*", operation, Permission.ALLOW)]
    )


def test_wrong_password_and_unknown_user(secure: EmbeddedBroker, certs: Certificates) -> None:
    with _admin(secure, certs) as admin:
        admin.upsert_scram_credential(DAN, DAN_PASSWORD)
        assert DAN in admin.describe_scram_credentials()
    for user, password in ((DAN, "wrong"), ("nobody", "x")):
        with pytest.raises(KafkaError) as refused, _admin(secure, certs, user, password) as admin:
            admin.list_topics()
        assert refused.value.code == ErrorCode.sasl_authentication_failed
        assert "SCRAM-SHA-512" in str(refused.value)
    with _admin(secure, certs, DAN, DAN_PASSWORD) as admin:
        assert admin.list_topics() == {}  # authenticated, but may describe nothing


def test_producer_share_consumer_and_admin_need_acls(secure: EmbeddedBroker, certs: Certificates) -> None:
    with _admin(secure, certs) as admin:
        admin.upsert_scram_credential(DAN, DAN_PASSWORD)
        admin.create_topic("work", 1)
    security = client_security(certs, DAN, DAN_PASSWORD)
    sasl = bootstrap(secure, "SASL_SSL")
    with Producer(sasl, security=security, retries=0, request_timeout=5) as producer:
        with pytest.raises(KafkaError) as refused:
            producer.send("work", b"a").result()
        assert refused.value.code == ErrorCode.topic_authorization_failed
    with _admin(secure, certs) as admin:
        _allow(admin, ResourceType.TOPIC, "work", Operation.WRITE)
        _allow(admin, ResourceType.TOPIC, "work", Operation.READ)
    with Producer(sasl, security=security) as producer:
        for i in range(10):
            producer.send("work", b"w%d" % i)
        producer.flush()

    consumer = ShareConsumer(sasl, "crew", topics=["work"], security=security, request_timeout=5)
    try:
        with pytest.raises(KafkaError) as refused:
            consumer.poll(2.0)
        assert refused.value.code == ErrorCode.group_authorization_failed
    finally:
        consumer.close()
    with _admin(secure, certs) as admin:
        _allow(admin, ResourceType.GROUP, "crew", Operation.READ)
    consumer = ShareConsumer(sasl, "crew", topics=["work"], security=security)
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 15
        while len(got) < 10 and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(0.5) if r.value is not None)
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"w%d" % i for i in range(10))

    binding = AclBinding(
        ResourceType.GROUP, "other", PatternType.LITERAL, "User:eve", "*", Operation.READ, Permission.ALLOW
    )
    with _admin(secure, certs, DAN, DAN_PASSWORD) as dan_admin:
        with pytest.raises(KafkaError) as refused:
            dan_admin.create_acls([binding])
        assert refused.value.code == ErrorCode.cluster_authorization_failed
        with _admin(secure, certs) as admin:
            _allow(admin, ResourceType.CLUSTER, "kafka-cluster", Operation.ALTER)
        dan_admin.create_acls([binding])
    every_eve = AclFilter(
        ResourceType.ANY, None, PatternType.ANY, "User:eve", None, Operation.ANY, Permission.ANY
    )
    with _admin(secure, certs) as admin:
        assert admin.describe_acls(every_eve) == [binding]


def test_users_and_acls_commands(secure: EmbeddedBroker, certs: Certificates, tmp_path: Path) -> None:
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN}" password="{ADMIN_PASSWORD}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n"
    )
    common = ["--bootstrap", bootstrap(secure, "SASL_SSL"), "--command-config", str(properties)]
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(main, [*args, *common])
        assert result.exit_code == 0, result.output
        return result.output

    run("users", "add", DAN, "--password", DAN_PASSWORD, "--mechanism", "SCRAM-SHA-256")
    assert ["dan", "SCRAM-SHA-256", "8192"] in [line.split() for line in run("users", "list").splitlines()]
    run(
        "acls",
        "add",
        "--topic",
        "t",
        "--allow-principal",
        f"User:{DAN}",
        "--operation",
        "read",
        "--operation",
        "describe",
    )
    listing = run("acls", "list", "--topic", "t")
    assert "User:dan" in listing and "READ" in listing and "DESCRIBE" in listing
    assert "removed 2" in run("acls", "remove", "--topic", "t")
    assert "User:dan" not in run("acls", "list")
    run("users", "remove", DAN, "--mechanism", "SCRAM-SHA-256")
    assert [line.split()[0] for line in run("users", "list").splitlines()[1:]] == ["admin"]
    # without credentials the command says why, in one line
    result = runner.invoke(main, ["users", "list", "--bootstrap", bootstrap(secure, "SASL_SSL")])
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_per_resource_refusals_and_filtered_listings(secure: EmbeddedBroker, certs: Certificates) -> None:
    """Refused resources answer their *_AUTHORIZATION_FAILED code beside allowed ones; listings
    show only what the principal may describe; authorized operations are the principal's."""
    from shareq.client import ConfigResource
    from shareq.client import ResourceType as ConfigType

    with _admin(secure, certs) as admin:
        admin.upsert_scram_credential(DAN, DAN_PASSWORD)
        admin.create_topic("mine", 1)
        admin.create_topic("theirs", 1)
        _allow(admin, ResourceType.TOPIC, "mine", Operation.DESCRIBE_CONFIGS)
        _allow(admin, ResourceType.TOPIC, "mine", Operation.READ)
        _allow(admin, ResourceType.GROUP, "crew", Operation.READ)
    security = client_security(certs, DAN, DAN_PASSWORD)
    consumer = ShareConsumer(bootstrap(secure, "SASL_SSL"), "crew", topics=["mine"], security=security)
    try:
        consumer.poll(0.5)
    finally:
        consumer.close()
    with _admin(secure, certs) as admin:
        consumer = ShareConsumer(
            bootstrap(secure, "SASL_SSL"),
            "others",
            topics=["theirs"],
            security=client_security(certs, ADMIN, ADMIN_PASSWORD),
        )
        consumer.poll(0.5)
        consumer.close()
    with _admin(secure, certs, DAN, DAN_PASSWORD) as dan:
        assert set(dan.list_topics()) == {"mine"}
        assert [g.group_id for g in dan.list_groups()] == ["crew"]  # READ implies DESCRIBE
        with pytest.raises(KafkaError) as refused:
            dan.describe_configs([ConfigResource(ConfigType.TOPIC, "theirs")])
        assert refused.value.code == ErrorCode.topic_authorization_failed
        assert (
            "retention.ms"
            in dan.describe_configs([ConfigResource(ConfigType.TOPIC, "mine")])[
                ConfigResource(ConfigType.TOPIC, "mine")
            ]
        )
        with pytest.raises(KafkaError) as refused:
            dan.describe_share_groups(["others"])
        assert refused.value.code == ErrorCode.group_authorization_failed
        with pytest.raises(KafkaError) as refused:  # FindCoordinator already needs DESCRIBE, as in Kafka
            dan.delete_groups(["others"])
        assert refused.value.code == ErrorCode.group_authorization_failed
        assert dan.describe_share_group("crew").group_id == "crew"
        conn = dan.cluster.any_connection()
        _v, m = conn.module(15)  # DescribeGroups: one allowed group, one refused, answered in place
        response = conn.send(
            m.DescribeGroupsRequest(groups=("crew", "others"), include_authorized_operations=True)
        )
        by_id = {g.group_id: g for g in response.groups}
        assert by_id["others"].error_code == ErrorCode.group_authorization_failed
        assert by_id["crew"].error_code == ErrorCode.none
        assert by_id["crew"].authorized_operations == (1 << Operation.READ) | (1 << Operation.DESCRIBE)


def test_inline_pem_keystore_and_truststore(tmp_path: Path, certs: Certificates) -> None:
    """``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` and ``ssl.truststore.certificates``
    inline (one line, as a properties file may carry them), per listener."""
    from shareq.client import ClientSecurity
    from shareq.client.connection import BrokerConnection

    pem = certs.server.read_text()
    chain_start = pem.index("-----BEGIN CERTIFICATE-----")
    key, chain = pem[:chain_start].strip(), pem[chain_start:]
    config = {
        "listeners": "SSL://127.0.0.1:0",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.key": " ".join(key.split("\n")),
        "listener.name.ssl.ssl.keystore.certificate.chain": chain,
        "listener.name.ssl.ssl.truststore.certificates": certs.ca.read_text(),
    }
    with EmbeddedBroker(tmp_path / "data", config) as broker:
        security = ClientSecurity(protocol="SSL", ca_location=str(certs.ca))
        with BrokerConnection("127.0.0.1", broker.port, security=security) as conn:
            assert conn.broker_versions
