"""Engine errors, split by whose fault they are.

``ShareRequestError`` is a peer fault: a client asked for something the share-partition refuses
(it carries the Kafka ``ErrorCode`` the server edge will answer with). ``ShareEngineBug`` is a local
fault: the engine or its shell broke an invariant, which no client input should ever cause.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class ShareEngineError(Exception):
    """Base of every error raised by the share-partition engine."""


class ShareRequestError(ShareEngineError):
    """A request the share-partition refuses; nothing was changed."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code

    @property
    def error_name(self) -> str:
        """The Kafka name of the error, e.g. ``INVALID_RECORD_STATE``."""
        return self.error_code.name.upper()


class InvalidRecordState(ShareRequestError):
    """Records not in flight, not acquired by the caller, or already being transitioned."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_record_state, message)


class InvalidRequest(ShareRequestError):
    """A malformed request: overlapping or backwards batches, offsets past the end, bad types."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_request, message)


class ShareEngineBug(ShareEngineError):
    """A broken invariant inside the engine or its driver (a local bug, never a client's fault)."""


class IllegalStateTransition(ShareEngineBug):
    """A record-state transition the transition table does not allow; the state is unchanged."""
