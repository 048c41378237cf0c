"""The one rule for what CI requires: ``CI=true`` (as ``.ci/run`` sets it, and the Makefile checks it).

In CI a test's missing dependency (a Python package, Kafka's jars, a browser) is an error; elsewhere the
test is skipped, saying what is missing.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn


def in_ci() -> bool:
    """Exactly ``CI=true``, the Makefile's test (``[ "$CI" = "true" ]``)."""
    return os.environ.get("CI") == "true"


def missing(reason: str) -> NoReturn:
    """Skip the test (or the module, at import time) for a missing dependency; in CI, fail it."""
    import pytest  # here: kafka_harness, which bench scripts import too, uses in_ci

    if in_ci():
        pytest.fail(f"required in CI: {reason}", pytrace=False)
    raise pytest.skip.Exception(reason, allow_module_level=True)


def require(module: str) -> ModuleType:
    """``pytest.importorskip`` that fails in CI: the module, or a skip (locally) / failure (CI)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        missing(f"could not import {module!r}: {error}")
