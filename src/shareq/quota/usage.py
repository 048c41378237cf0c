"""Usage measured against client quotas, and the connections muted while they are throttled.

Kafka counts usage per ``(user, client-id)`` *as the applying quota names them*: under a
default client-id quota each client id has its own rate, under a user quota all of that user's
clients share one (``DefaultQuotaCallback.quotaMetricTags``). A produce or fetch over its quota
is answered with the throttle time, and the connection is muted for that long: Kafka stops
reading its channel (KIP-219); shareq holds the connection's next produce or fetch request until
then. Time is passed in.
"""

from __future__ import annotations

from .entities import ClientQuotas
from .rate import DEFAULT_SAMPLES, DEFAULT_WINDOW_MS, WindowedRate, throttle_ms

_PRUNE_AT = 1024


class QuotaUsage:
    def __init__(
        self, quotas: ClientQuotas, *, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS
    ) -> None:
        self.quotas = quotas
        self.samples = samples
        self.window_ms = window_ms
        self._rates: dict[tuple[str, tuple[str, str]], WindowedRate] = {}
        self._muted_until: dict[int, int] = {}

    @property
    def idle(self) -> bool:
        """No quota configured and no connection muted: nothing to measure or wait for."""
        return not self.quotas.entries and not self._muted_until

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Count ``value`` (bytes) against quota ``key``; the throttle time in ms (0: within quota,
        or no quota applies)."""
        rate = self._rate(key, user, client_id)
        if rate is None:
            return 0
        rate[0].record(value, now_ms)
        return throttle_ms(rate[0], rate[1], now_ms)

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (Kafka does for a throttled fetch, which returns no data)."""
        rate = self._rate(key, user, client_id)
        if rate is not None:
            rate[0].record(-value, now_ms)

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """The most that can be counted at once without being throttled for sure (None: no
        quota applies): the quota over ``samples - 1`` windows (Kafka's
        ``maxValueInQuotaWindow``, which caps a fetch's size)."""
        resolved = self.quotas.resolve(key, user, client_id)
        if resolved is None:
            return None
        return resolved[0] * (self.samples - 1) * self.window_ms / 1000.0

    def _rate(self, key: str, user: str, client_id: str) -> tuple[WindowedRate, float] | None:
        resolved = self.quotas.resolve(key, user, client_id)
        if resolved is None:
            return None
        bound, tags = resolved
        rate = self._rates.get((key, tags))
        if rate is None:
            if len(self._rates) >= _PRUNE_AT:
                self._rates = {k: r for k, r in self._rates.items() if not r.idle}
            rate = self._rates[(key, tags)] = WindowedRate(self.samples, self.window_ms)
        return rate, bound

    # -- muted connections -------------------------------------------------------------------------

    def mute(self, connection_id: int, now_ms: int, duration_ms: int) -> None:
        if duration_ms <= 0:
            return
        if len(self._muted_until) >= _PRUNE_AT:
            self._muted_until = {c: t for c, t in self._muted_until.items() if t > now_ms}
        until = now_ms + duration_ms
        self._muted_until[connection_id] = max(until, self._muted_until.get(connection_id, until))

    def muted_for(self, connection_id: int, now_ms: int) -> int:
        """How much longer this connection stays muted (0: not muted)."""
        until = self._muted_until.get(connection_id)
        if until is None:
            return 0
        if until <= now_ms:
            del self._muted_until[connection_id]
            return 0
        return until - now_ms
