"""The query's share-group membership, on shareq's ``ShareConsumer`` (explicit acknowledgement).

Lives only in the stream reader's long-lived driver process. The consumer heartbeats in its own
background thread; this wrapper speaks in the connector's terms: acquired
``(topic, partition, offset, delivery count)`` and acknowledgement ranges by topic name.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from shareq.client import AcknowledgeType, ClientError, ShareConsumer, UnsupportedVersionError
from shareq.client import AckRange as ClientAckRange

from .cluster import _client_kwargs
from .options import ConnectOptions

log = logging.getLogger(__name__)

AckRange = tuple[str, int, int, int, int]  # topic, partition, first, last, acknowledge type
AcquiredRun = tuple[str, int, int, int, int]  # topic, partition, first, last, delivery count
RENEW = 4


class ShareSession:
    """Acquire records for micro-batches and acknowledge them by range."""

    def __init__(self, connect: ConnectOptions, *, group_id: str, topics: Sequence[str]) -> None:
        self._consumer = ShareConsumer(
            connect.bootstrap, group_id, topics=list(topics), **_client_kwargs(connect)
        )
        self.supports_renew = True  # until the broker says otherwise

    @property
    def member_id(self) -> str:
        """This member's id in the share group (an exactly-once sink claims in its name)."""
        return self._consumer.member_id

    @property
    def lock_duration_ms(self) -> int | None:
        """The acquisition lock timeout the broker last reported (None before the first fetch)."""
        value = self._consumer.acquisition_lock_timeout_ms
        return value if value > 0 else None

    def wait_for_assignment(self, timeout: float) -> bool:
        return bool(self._consumer.membership.wait_for_assignment(timeout))

    def acquire(self, *, max_records: int | None, wait_ms: int) -> list[AcquiredRun]:
        """One ShareFetch round: the runs newly acquired by this member, as the broker reported them
        (AcquiredRecords). The records' bytes are not decoded here; executors read them by offset."""
        got = self._consumer.acquire_ranges(max_records or 10_000, wait_ms / 1000.0)
        return [
            (r.topic, r.partition, r.first_offset, r.last_offset, r.delivery_count or 1) for r in got.ranges
        ]

    def acknowledge(self, ranges: Sequence[AckRange]) -> list[str]:
        """Send acknowledgements now; returns failures as text. They are not raised: a failed
        acknowledgement means a lapsed lock or a lost session, and the broker redelivers."""
        if not ranges:
            return []
        renewing = any(kind == RENEW for *_, kind in ranges)
        try:
            self._consumer.acknowledge_ranges(
                ClientAckRange(
                    topic_id=self._consumer.cluster.topic(topic).topic_id,
                    partition=partition,
                    first_offset=first,
                    last_offset=last,
                    type=AcknowledgeType(int(kind)),
                )
                for topic, partition, first, last, kind in ranges
            )
            results = self._consumer.commit()
        except UnsupportedVersionError as exc:
            if renewing:
                self.supports_renew = False
                log.warning(
                    "the broker cannot renew acquisition locks (%s); relying on the lock duration", exc
                )
            return [str(exc)]
        except ClientError as exc:
            return [str(exc)]
        return [
            f"{topic}-{partition}: {code.name}" for (topic, partition), code in results.items() if int(code)
        ]

    def close(self) -> None:
        try:
            self._consumer.close()
        except ClientError as exc:
            log.info("closing the share consumer: %s", exc)
