"""Warnings about misbehaving clients, rate-limited: a flood of malformed frames must not become a
flood of log lines. Within each window the first ``burst`` lines are written; the rest are
counted and reported in one line when the next window opens."""

from __future__ import annotations

import logging
import time


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, *, burst: int = 20, window_s: float = 10.0) -> None:
        self._logger = logger
        self._burst = burst
        self._window_s = window_s
        self._window_start = float("-inf")
        self._written = 0
        self.suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        self.log(logging.WARNING, message, *args)

    def info(self, message: str, *args: object) -> None:
        self.log(logging.INFO, message, *args)

    def log(self, level: int, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._window_start >= self._window_s:
            if self.suppressed:
                self._logger.warning(
                    "%d more warnings about misbehaving clients in the last %.0f s were not logged",
                    self.suppressed,
                    self._window_s,
                )
            self._window_start, self._written, self.suppressed = now, 0, 0
        if self._written < self._burst:
            self._written += 1
            self._logger.log(level, message, *args)
        else:
            self.suppressed += 1
