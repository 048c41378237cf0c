"""Why a broker cannot start, said in one line for the operator, in Kafka's words where Kafka has
them (``Socket server failed to bind to 127.0.0.1:9092: Address already in use.``)."""

from __future__ import annotations

import os


class BrokerStartError(RuntimeError):
    """The broker cannot start: the message is one line for the operator (no traceback needed)."""


def os_reason(error: OSError) -> str:
    """``Address already in use`` rather than ``[Errno 98] error while attempting to bind ...``."""
    return os.strerror(error.errno) if error.errno else str(error)
