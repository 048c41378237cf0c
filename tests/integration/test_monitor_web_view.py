"""The live web view in a real headless Chromium: it loads, draws a share-partition's strip, and the
strip changes (pushed by the server, no reload) when a consumer acknowledges."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from browser import headless_chromium
from confluent_kafka import AcknowledgeType
from selenium.webdriver.support.ui import WebDriverWait
from share_consumers import SHARE_BROKER, create_topic, poll_values, produce, share_consumer

from shareq.client import Admin, ConfigResource, ResourceType
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# The committed screenshot (docs/web-view.png) is refreshed by running this module with this set.
SCREENSHOT_ENV = "SHAREQ_WEB_VIEW_SCREENSHOT"


# The page redraws on every push, so elements are read in one script call (never held across one).
_STRIP = 'document.querySelector(`.strip[data-group="${arguments[0]}"][data-topic="${arguments[1]}"]' + (
    '[data-partition="${arguments[2]}"]`)'
)


def _strip_states(driver: Any, group: str, topic: str, partition: int) -> list[str]:
    script = f"const s = {_STRIP}; return s ? [...s.children].map((c) => c.dataset.state) : [];"
    states: list[str] = driver.execute_script(script, group, topic, partition)
    return states


def _strip_attr(driver: Any, group: str, topic: str, partition: int, name: str) -> str | None:
    script = f"const s = {_STRIP}; return s ? s.getAttribute(arguments[3]) : null;"
    found: str | None = driver.execute_script(script, group, topic, partition, name)
    return found


def _strips(driver: Any, group: str) -> int:
    count: int = driver.execute_script(
        'return document.querySelectorAll(`.strip[data-group="${arguments[0]}"]`).length;', group
    )
    return count


def test_the_strip_follows_acknowledgements(tmp_path: Path) -> None:
    config = {**SHARE_BROKER, "http.port": 0, "http.push.interval.ms": 200}
    with EmbeddedBroker(tmp_path / "d", config=config) as broker, headless_chromium() as driver:
        create_topic(broker.bootstrap, "web", 1)
        produce(broker.bootstrap, "web", [b"w%d" % i for i in range(40)], 1, per_batch=10)
        consumer = share_consumer(
            broker.bootstrap, "g", ["web"], **{"share.acknowledgement.mode": "explicit"}
        )
        try:
            got = poll_values(consumer, lambda out: len(out) >= 40)
            assert len(got) == 40
            driver.get(broker.http_url + "/")
            wait = WebDriverWait(driver, 20, poll_frequency=0.1)
            wait.until(lambda d: "ACQUIRED" in _strip_states(d, "g", "web", 0))
            assert _strip_attr(driver, "g", "web", 0, "data-spso") == "0"
            assert _strip_attr(driver, "g", "web", 0, "data-speo") == "40"
            assert set(_strip_states(driver, "g", "web", 0)) == {"ACQUIRED"}
            driver.execute_script("window.__sameDocument = true;")

            for m in got:
                if m.offset() < 20:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                elif m.offset() < 25:
                    consumer.acknowledge(m, AcknowledgeType.RELEASE)
            assert all(v is None for v in consumer.commit_sync().values())

            # The accepted half leaves the strip (the SPSO moves to 20); the released records
            # show as available ahead of the still-acquired rest.
            wait.until(lambda d: _strip_attr(d, "g", "web", 0, "data-spso") == "20")
            wait.until(lambda d: _strip_states(d, "g", "web", 0) == ["AVAILABLE", "ACQUIRED"])
            assert driver.execute_script("return window.__sameDocument === true;")  # pushed, not reloaded
            assert driver.execute_script("return document.getElementById('status').textContent;") == "live"
            text = driver.execute_script(
                "return [document.getElementById('topics').innerText,"
                " document.querySelector('.group[data-group=\"g\"]').innerText];"
            )
            assert "web" in text[0] and "40" in text[0]
            assert "web [0]" in text[1]  # the member's assignment
        finally:
            consumer.close()


def test_a_busy_group_is_readable(tmp_path: Path) -> None:
    """Four partitions in every state at once, two consumers, a dead-letter topic: each strip is
    drawn with several states; the screenshot in docs/ comes from here."""
    config = {
        **SHARE_BROKER,
        "http.port": 0,
        "http.push.interval.ms": 200,
        "errors.deadletterqueue.auto.create.topics.enable": "true",
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.record.lock.duration.ms": "5000",
    }
    with EmbeddedBroker(tmp_path / "d", config=config) as broker, headless_chromium(1400, 1000) as driver:
        create_topic(broker.bootstrap, "orders", 4)
        with Admin(broker.bootstrap) as admin:
            admin.alter_configs(
                ConfigResource(ResourceType.GROUP, "workers"),
                {"errors.deadletterqueue.topic.name": "dlq.orders"},
            )
        produce(broker.bootstrap, "orders", [b"o%d" % i for i in range(400)], 4, per_batch=25)
        explicit = {"share.acknowledgement.mode": "explicit"}
        consumers = [share_consumer(broker.bootstrap, "workers", ["orders"], **explicit) for _ in range(2)]
        try:
            kinds = [AcknowledgeType.ACCEPT] * 6 + [AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
            for consumer in consumers:
                # explicit mode: one poll, then acknowledge two thirds of it; the rest stays acquired
                got = poll_values(consumer, lambda out: len(out) > 0, timeout=20)
                for i, m in enumerate(got[: len(got) * 2 // 3]):
                    consumer.acknowledge(m, kinds[i % len(kinds)])
                consumer.commit_sync()
            driver.get(broker.http_url + "/")
            wait = WebDriverWait(driver, 20, poll_frequency=0.1)
            wait.until(lambda d: _strips(d, "workers") == 4)
            wait.until(
                lambda d: (
                    len({s for p in range(4) for s in _strip_states(d, "workers", "orders", p)} - {"UNKNOWN"})
                    >= 3
                )
            )
            # the records left unacknowledged come close to their lock's end (the last quarter)
            wait.until(
                lambda d: d.execute_script("return document.querySelectorAll('.seg.expiring').length;")
            )
            target = os.environ.get(SCREENSHOT_ENV)
            shot = Path(target) if target else tmp_path / "web-view.png"
            assert driver.save_screenshot(str(shot))
            assert shot.stat().st_size > 10_000
        finally:
            for consumer in consumers:
                consumer.close()
