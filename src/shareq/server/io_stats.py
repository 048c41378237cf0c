"""Bytes read from logs and bytes sent, per api: the figures that show a request's cost.

A fetch should cost what it returns, not what the partition holds; these counters make that
visible (``shareq serve`` prints them on SIGUSR1; tests and benchmarks read them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class ApiIo:
    """Counters of one api key since the broker started."""

    requests: int = 0
    bytes_received: int = 0  # whole requests, framing included
    bytes_read: int = 0  # log bytes read to answer (pread)
    bytes_delivered: int = 0  # record bytes placed in responses
    records_delivered: int = 0  # records handed out (ShareFetch: acquired; Fetch: in the batches sent)
    bytes_sent: int = 0  # whole responses, framing included
    bytes_buffered: int = 0  # response bytes the socket did not take at once, copied to be sent later


class IoStats:
    """Per-api ``ApiIo``, created on first use."""

    __slots__ = ("by_api",)

    def __init__(self) -> None:
        self.by_api: dict[int, ApiIo] = {}

    def api(self, api_key: int) -> ApiIo:
        found = self.by_api.get(api_key)
        if found is None:
            found = self.by_api[api_key] = ApiIo()
        return found

    def snapshot(self) -> dict[int, dict[str, int]]:
        return {key: asdict(io) for key, io in sorted(self.by_api.items())}
