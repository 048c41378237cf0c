"""Integration fixtures: the real broker as a subprocess (``python -m shareq serve``) or embedded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_harness import BrokerProcess
from secure_broker import ADMIN, ADMIN_PASSWORD, Certificates, add_user, make_certificates, secure_config
from share_consumers import SHARE_BROKER

from shareq.embedded import EmbeddedBroker


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def embedded_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data") as broker:
        yield broker


@pytest.fixture(params=["coordinator", "in-log"])
def persister(request: pytest.FixtureRequest) -> str:
    """``share.persister``: the share-group wire, crash and admin tests run on both."""
    return str(request.param)


@pytest.fixture
def share_broker(tmp_path: Path, persister: str) -> Iterator[EmbeddedBroker]:
    """An embedded broker with the share-group test settings (``share_consumers.SHARE_BROKER``),
    once per persister."""
    config = {**SHARE_BROKER, "share.persister": persister}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker:
        yield broker


# The secured broker of the security tests: SASL_SSL with SCRAM, an authorizer, and an admin user.


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def secure(tmp_path: Path, certs: Certificates) -> Iterator[EmbeddedBroker]:
    data = tmp_path / "data"
    add_user(data, ADMIN, ADMIN_PASSWORD)
    with EmbeddedBroker(data, secure_config(certs)) as broker:
        yield broker
