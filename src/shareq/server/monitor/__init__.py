"""Seeing inside the broker: Prometheus metrics, a live web view and health endpoints on one
HTTP port (``http.port``; off unless set).

Hot paths only bump plain integers (``counters``, ``server/io_stats.py``, the engine's
``SharePartitionStats``); everything else is computed when ``/metrics`` is scraped or the web view
asks, on the broker's own loop, so nothing needs a lock.
"""

from shareq.histogram import Histogram

from .counters import BrokerCounters

# ``server`` (aiohttp, prometheus_client) is imported only when a broker turns the port on.
__all__ = ["BrokerCounters", "Histogram"]
