"""The request handlers and the modules that used to depend on import order (settings registered
on import, handler modules imported late to dodge a circle through the broker) each import first,
in a process where nothing of shareq was imported before."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import importlib, pkgutil, sys
import shareq
import shareq.server.handlers
names = sorted(
    m.name for m in pkgutil.walk_packages(shareq.server.handlers.__path__, "shareq.server.handlers.")
) + [
    "shareq.config", "shareq.topic_configs", "shareq.server.handlers", "shareq.server.quotas",
    "shareq.server.compaction", "shareq.server.internal_topics", "shareq.server.config_reference",
    "shareq.server.context", "shareq.server.deadline_timer",
]
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m == "shareq" or m.startswith("shareq.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 (the probe reports every failure)
        failed.append(f"{name}: {type(error).__name__}: {error}")
print(len(names))
print("\\n".join(failed))
"""


def test_every_broker_module_imports_first() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout
    count, *failed = out.strip().split("\n")
    assert int(count) > 20
    assert failed == [], failed
