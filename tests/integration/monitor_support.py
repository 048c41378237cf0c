"""Reading the broker's HTTP port in tests: scrape ``/metrics`` into a dict, poll until a figure moves."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(base_url: str) -> Samples:
    """Every sample of ``/metrics`` keyed by (sample name, labels)."""
    status, text = get(base_url + "/metrics")
    assert status == 200, text
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample; 0 when absent (a counter nothing has bumped yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_for_metric(
    base_url: str, check: Callable[[Samples], bool], timeout: float = 20.0, what: str = ""
) -> Samples:
    """Scrape until ``check(samples)`` holds (the broker applies some changes after it answers)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(base_url)
        if check(samples):
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"metrics never showed {what or check}")
        time.sleep(0.05)
