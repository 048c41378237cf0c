"""ACL operations as the protocol's 32-bit fields carry them (Metadata, DescribeCluster,
DescribeTopicPartitions, group describes), when no authorizer is configured.

As Kafka without ``authorizer.class.name``, a principal is then allowed every operation a resource
type supports (``OPERATIONS_OF``, the table the authorizer uses too); with an authorizer,
``server/authorization.py`` replaces the field with the principal's real operations. The bit of
operation ``n`` is ``1 << n``.
"""

from __future__ import annotations

from shareq.security.acl import OPERATIONS_OF, Operation, ResourceType

UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648
"""What a response carries when the client did not ask (Integer.MIN_VALUE)."""

TOPIC_OPERATIONS = OPERATIONS_OF[ResourceType.TOPIC]
CLUSTER_OPERATIONS = OPERATIONS_OF[ResourceType.CLUSTER]
GROUP_OPERATIONS = OPERATIONS_OF[ResourceType.GROUP]


def bit_field(operations: tuple[Operation, ...]) -> int:
    """The operations as one 32-bit field."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field


def authorized(wanted: bool, operations: tuple[Operation, ...]) -> int:
    """The field a response carries: the allowed operations if asked for, else 'unknown'."""
    return bit_field(operations) if wanted else UNKNOWN_AUTHORIZED_OPERATIONS
