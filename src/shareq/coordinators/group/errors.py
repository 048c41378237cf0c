"""Errors of the share-group coordinator.

Two kinds, as in h11: a ``GroupRequestError`` is the peer's fault (a request the coordinator
refuses; it carries the Kafka error it maps to at the wire edge) and leaves state unchanged; a
``GroupStateError`` is a local bug or corrupt durable data and should never reach a client.
"""

from __future__ import annotations

import enum


class GroupErrorCode(enum.IntEnum):
    """Kafka error codes the coordinator can answer with (names and values as in Kafka's ``Errors``).

    The wire edge maps them with ``ErrorCode(code.value)``; the core does not import the codec.
    """

    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_MEMBER_EPOCH = 110


class GroupRequestError(Exception):
    """A request the coordinator refuses; nothing was changed."""

    def __init__(self, code: GroupErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class GroupStateError(Exception):
    """A local invariant broke (a bug) or a durable record could not be decoded."""
