"""Client quotas (KIP-13, KIP-55, KIP-546) without I/O: the configured quotas per entity, how a
connection's usage is measured against them, and the throttle time Kafka answers with."""

from .entities import (
    ANONYMOUS,
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    USER,
    ClientQuotas,
    Entity,
    FilterComponent,
    QuotaError,
    make_entity,
)
from .rate import WindowedRate, throttle_ms
from .usage import QuotaUsage

__all__ = [
    "ANONYMOUS",
    "CLIENT_ID",
    "CONSUMER_BYTE_RATE",
    "IP",
    "PRODUCER_BYTE_RATE",
    "USER",
    "ClientQuotas",
    "Entity",
    "FilterComponent",
    "QuotaError",
    "QuotaUsage",
    "WindowedRate",
    "make_entity",
    "throttle_ms",
]
