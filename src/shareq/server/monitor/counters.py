"""Broker-wide counters the hot paths bump: plain integers, bucketed histograms without locks.

Everything runs on the broker's one loop, so an ``+=`` is safe; the Prometheus collector turns
these into metric families at scrape time.
"""

from __future__ import annotations

from shareq.histogram import Histogram


class BrokerCounters:
    """Counters that belong to no single request or share-partition."""

    __slots__ = ("partition_load", "request_latency")

    def __init__(self) -> None:
        self.partition_load = Histogram()  # seconds to read a share-partition's state and start it
        self.request_latency: dict[int, Histogram] = {}  # by api key, seconds from frame to reply sent

    def request_done(self, api_key: int, seconds: float) -> None:
        histogram = self.request_latency.get(api_key)
        if histogram is None:
            histogram = self.request_latency[api_key] = Histogram()
        histogram.observe(seconds)
