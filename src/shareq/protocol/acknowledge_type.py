"""Share acknowledgement types as on the wire, for the broker's engine, the client and the Spark
connector alike (all may import ``protocol``)."""

from __future__ import annotations

import enum


class AcknowledgeType(enum.IntEnum):
    """Wire values of share acknowledgement types (KIP-932; RENEW is KIP-1222's type 4, from
    ShareAcknowledge v2)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4
