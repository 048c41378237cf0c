"""ACL operations as the protocol's 32-bit fields carry them (Metadata, DescribeCluster,
DescribeTopicPartitions, group describes).

shareq has no authorizer yet: as Kafka without ``authorizer.class.name``, a principal is allowed
every operation a resource type supports. The bit of operation ``n`` is ``1 << n``.
"""

from __future__ import annotations

from enum import IntEnum


class AclOperation(IntEnum):
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648
"""What a response carries when the client did not ask (Integer.MIN_VALUE)."""

_A = AclOperation
TOPIC_OPERATIONS = (
    _A.READ,
    _A.WRITE,
    _A.CREATE,
    _A.DELETE,
    _A.ALTER,
    _A.DESCRIBE,
    _A.DESCRIBE_CONFIGS,
    _A.ALTER_CONFIGS,
)
CLUSTER_OPERATIONS = (
    _A.CREATE,
    _A.CLUSTER_ACTION,
    _A.DESCRIBE_CONFIGS,
    _A.ALTER_CONFIGS,
    _A.IDEMPOTENT_WRITE,
    _A.ALTER,
    _A.DESCRIBE,
)
GROUP_OPERATIONS = (_A.READ, _A.DESCRIBE, _A.DELETE, _A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS)


def bit_field(operations: tuple[AclOperation, ...]) -> int:
    """The operations as one 32-bit field."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field


def authorized(wanted: bool, operations: tuple[AclOperation, ...]) -> int:
    """The field a response carries: the allowed operations if asked for, else 'unknown'."""
    return bit_field(operations) if wanted else UNKNOWN_AUTHORIZED_OPERATIONS
