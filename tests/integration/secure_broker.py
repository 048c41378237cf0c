"""A broker with TLS and SASL listeners for the security tests: certificates from ``trustme`` (a
throwaway CA issues the broker's and a client's certificate), the first administrator's SCRAM
credential written with ``shareq users add --data-dir`` before the broker starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from click.testing import CliRunner

from shareq.cli.main import main
from shareq.client import ClientSecurity
from shareq.embedded import EmbeddedBroker

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server: Path  # key and chain in one PEM file, as ssl.keystore.location holds them
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("carol@example.com", common_name="carol")
    paths = Certificates(
        directory / "ca.pem", directory / "server.pem", directory / "client.pem", directory / "client.key"
    )
    ca.cert_pem.write_to_path(str(paths.ca))
    server.private_key_and_cert_chain_pem.write_to_path(str(paths.server))
    for blob in client.cert_chain_pems:
        blob.write_to_path(str(paths.client_cert), append=True)
    client.private_key_pem.write_to_path(str(paths.client_key))
    return paths


def add_user(data_dir: Path, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
    result = CliRunner().invoke(
        main,
        ["users", "add", user, "--password", password, "--mechanism", mechanism, "--data-dir", str(data_dir)],
    )
    assert result.exit_code == 0, result.output


def secure_config(certs: Certificates, **extra: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "requested",
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{ADMIN}",
        "group.share.auto.offset.reset": "earliest",
        "share.coordinator.state.topic.num.partitions": "1",
        "group.share.min.heartbeat.interval.ms": "200",
        "group.share.heartbeat.interval.ms": "500",
        "group.share.assignment.interval.ms": "0",
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }


def bootstrap(broker: EmbeddedBroker, listener: str) -> str:
    endpoint = broker.broker.listener(listener)
    return f"{endpoint.host}:{endpoint.port}"


FAST = {
    "socket.timeout.ms": 5000,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "topic.metadata.refresh.interval.ms": 1000,
}


def rdkafka_config(
    broker: EmbeddedBroker, certs: Certificates, user: str | None, password: str | None = None, **extra: Any
) -> dict[str, Any]:
    """librdkafka settings for SASL_SSL with SCRAM-SHA-512 as ``user`` (SSL without SASL if ``None``)."""
    config: dict[str, Any] = {"ssl.ca.location": str(certs.ca), **FAST}
    if user is None:
        config.update({"bootstrap.servers": bootstrap(broker, "SSL"), "security.protocol": "SSL"})
    else:
        config.update(
            {
                "bootstrap.servers": bootstrap(broker, "SASL_SSL"),
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user,
                "sasl.password": password,
            }
        )
    config.update(extra)
    return config


def client_security(certs: Certificates, user: str, password: str) -> ClientSecurity:
    return ClientSecurity(
        protocol="SASL_SSL",
        mechanism="SCRAM-SHA-512",
        username=user,
        password=password,
        ca_location=str(certs.ca),
    )
