"""A latency histogram for hot paths: one bisect and three additions per observation.

Bucket counts are kept per bucket (not cumulative) in plain integers; whoever exports them (the
Prometheus collector) makes them cumulative when asked. Used on one asyncio loop: no locks.
"""

from __future__ import annotations

from bisect import bisect_left

# Seconds; Prometheus' default latency buckets, which also suit request and fsync times.
LATENCY_BOUNDS_S: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class Histogram:
    """Cumulative-at-scrape histogram: ``observe`` is one bisect and three additions."""

    __slots__ = ("bounds", "buckets", "count", "total")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BOUNDS_S) -> None:
        self.bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.buckets[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, count)`` pairs as Prometheus wants them, ending with ``+Inf``."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip(self.bounds, self.buckets, strict=False):
            running += n
            out.append((_le(bound), running))
        out.append(("+Inf", self.count))
        return out


def _le(bound: float) -> str:
    return repr(float(bound))
