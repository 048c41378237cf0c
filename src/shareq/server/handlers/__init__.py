"""Request handlers, one module per API family, collected into a ``HandlerTable``.

Each module exposes ``HANDLERS: dict[api_key, (VersionRange, handler)]``; the broker advertises
exactly the versions registered here, so adding an API family (share groups, say) is adding a
module and one line in ``default_handlers``. Clients trust the advertisement: librdkafka refuses
share fetches unless Produce v3+ and Fetch v4+ appear, and calls any telemetry api it sees
advertised, so those are deliberately absent until implemented.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from shareq.protocol import VersionRange

from ..context import Handler
from . import (
    acls,
    api_versions,
    classic_groups,
    client_quotas,
    cluster,
    configs,
    consumer_group_heartbeat,
    coordinator,
    fetch,
    groups,
    list_offsets,
    metadata,
    offsets,
    partitions_admin,
    produce,
    producer_id,
    scram_credentials,
    share_acknowledge,
    share_admin,
    share_fetch,
    share_group_heartbeat,
    topics,
    transactions,
    transactions_admin,
)

HandlerEntry = tuple[VersionRange, Handler]


class HandlerTable:
    """Api key -> (supported versions, handler)."""

    def __init__(self) -> None:
        self._entries: dict[int, HandlerEntry] = {}
        self._versions: Mapping[int, VersionRange] = {}

    def register(self, api_key: int, versions: VersionRange, handler: Handler) -> None:
        self._entries[api_key] = (versions, handler)
        self._versions = MappingProxyType({key: v for key, (v, _) in self._entries.items()})

    def update(self, handlers: Mapping[int, HandlerEntry]) -> None:
        for api_key, (versions, handler) in handlers.items():
            self.register(api_key, versions, handler)

    def get(self, api_key: int) -> Handler | None:
        entry = self._entries.get(api_key)
        return None if entry is None else entry[1]

    @property
    def versions(self) -> Mapping[int, VersionRange]:
        """Api key -> advertised versions (read on every request, so kept, not rebuilt)."""
        return self._versions


def default_handlers() -> HandlerTable:
    table = HandlerTable()
    for module in (
        api_versions,
        metadata,
        topics,
        produce,
        fetch,
        list_offsets,
        coordinator,
        producer_id,
        configs,
        client_quotas,
        share_group_heartbeat,
        share_fetch,
        share_acknowledge,
        groups,
        share_admin,
        classic_groups,
        offsets,
        consumer_group_heartbeat,
        transactions,
        transactions_admin,
        cluster,
        partitions_admin,
        acls,
        scram_credentials,
    ):
        table.update(module.HANDLERS)
    return table
