"""ListConfigResources (api 74): a group that so far has only configs is listed, with the broker
and the topics, in Kafka's order; unsupported types are refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio_wire import KioConnection

from shareq.client import Admin, ConfigResource, KafkaError, ResourceType
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data") as b:
        yield b


def test_groups_with_configs_brokers_and_topics(broker: EmbeddedBroker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("orders")
        assert admin.list_config_resources([ResourceType.GROUP]) == []
        admin.alter_configs(
            ConfigResource(ResourceType.GROUP, "only-configs"), {"share.delivery.count.limit": "3"}
        )
        listed = admin.list_config_resources()
        assert listed[:2] == [
            ConfigResource(ResourceType.GROUP, "only-configs"),
            ConfigResource(ResourceType.BROKER, "0"),
        ]
        assert ConfigResource(ResourceType.TOPIC, "orders") in listed[2:]
        assert all(r.type is ResourceType.TOPIC for r in listed[2:])
        assert admin.list_config_resources([ResourceType.BROKER]) == [
            ConfigResource(ResourceType.BROKER, "0")
        ]
        # Removing the last override removes the group from the list.
        admin.alter_configs(
            ConfigResource(ResourceType.GROUP, "only-configs"), {"share.delivery.count.limit": None}
        )
        assert admin.list_config_resources([ResourceType.GROUP]) == []
        with pytest.raises(KafkaError) as refused:
            admin.list_config_resources([ResourceType.TOPIC, 8])  # type: ignore[list-item]  # 8: BROKER_LOGGER
        assert refused.value.code.name == "unsupported_version"


def test_v0_lists_client_metrics_only(broker: EmbeddedBroker) -> None:
    """v0 was ListClientMetricsResources: shareq has no client-metrics subscriptions."""
    connection = KioConnection(broker.bootstrap)
    try:
        response = connection.send(load_request_schema(74, 0)())
    finally:
        connection.close()
    assert int(response.error_code) == 0 and response.config_resources == ()
