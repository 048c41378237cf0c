"""Debian's headless Chromium driven by Selenium through Debian's chromedriver.

Both come from apt (``chromium``, ``chromium-driver``; ``make setup`` installs them as root). The
paths are given to Selenium explicitly, so it never tries to download a browser or a driver. Without
them a test skips locally, and fails in CI (``CI=true``), where the browser is part of the setup.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

import ci_support

BROWSER_NAMES = ("chromium", "chromium-browser")
DRIVER_NAMES = ("chromedriver",)


def _find(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
        if found:
            return found
    return None


def browser_paths() -> tuple[str, str]:
    """(chromium, chromedriver), or skip (locally) / fail (CI) saying what to install."""
    browser, driver = _find(BROWSER_NAMES), _find(DRIVER_NAMES)
    if browser and driver:
        return browser, driver
    missing = " and ".join(n for n, p in (("chromium", browser), ("chromium-driver", driver)) if not p)
    reason = f"the web view test needs Debian's {missing} (apt-get install chromium chromium-driver)"
    ci_support.missing(reason)


@contextmanager
def headless_chromium(width: int = 1400, height: int = 900) -> Iterator[webdriver.Chrome]:
    browser, driver_path = browser_paths()
    options = Options()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
