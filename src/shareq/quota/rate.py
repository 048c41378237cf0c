"""A rate over sampled windows and the throttle time that brings it back under a quota (no I/O).

This is Kafka's ``Rate`` over a ``SampledStat`` as its client quotas use it: ``samples`` windows
of ``window_ms`` each (``quota.window.num`` = 11, ``quota.window.size.seconds`` = 1). A value is
added to the current window; a window older than ``samples * window_ms`` is forgotten. The rate
is the sum of the live windows divided by the time they span, counted as at least
``samples - 1`` whole windows so that a young client is not measured over a few milliseconds.

If the rate ``O`` exceeds the quota ``T`` over a window ``W``, a delay ``X`` with
``O * W / (W + X) = T`` brings it back: ``X = (O - T) / T * W`` (``QuotaUtils.throttleTime``).
Time is passed in (milliseconds); nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_SAMPLES = 11
DEFAULT_WINDOW_MS = 1_000


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


@dataclass(slots=True)
class WindowedRate:
    """Values recorded over time, measured per second."""

    samples: int = DEFAULT_SAMPLES
    window_ms: int = DEFAULT_WINDOW_MS
    _windows: list[_Sample] = field(default_factory=list)

    def record(self, value: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self._windows or now_ms - self._windows[-1].start_ms >= self.window_ms:
            self._windows.append(_Sample(now_ms))
            if len(self._windows) > self.samples:
                del self._windows[0]
        self._windows[-1].value += value

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate is measured over (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        oldest = self._windows[0].start_ms if self._windows else now_ms
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        self._purge(now_ms)
        total = sum(sample.value for sample in self._windows)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples * self.window_ms
        while self._windows and now_ms - self._windows[0].start_ms >= expire_ms:
            del self._windows[0]

    @property
    def idle(self) -> bool:
        return not self._windows


def throttle_ms(rate: WindowedRate, bound: float, now_ms: int) -> int:
    """How long the client must wait for ``rate`` to fall back to ``bound`` (0: within quota)."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    return int((observed - bound) / bound * rate.window_size_ms(now_ms) + 0.5)  # Java's Math.round
