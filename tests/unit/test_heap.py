"""retain_large_buffers: a freed 20 MB buffer is reused without faulting its pages in again.

Counted in minor page faults, not timed: each case runs in a fresh interpreter (the setting is
process-wide and once per process), allocates, fills and frees a 20 MB buffer several times, and
reports the faults of the rounds after the first.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)

_PROBE = """
import resource, sys
from shareq.heap import retain_large_buffers
applied = retain_large_buffers() if sys.argv[1] == "retain" else False
size, pages = 20 * 1024 * 1024, (20 * 1024 * 1024) // resource.getpagesize()
faults = []
for _ in range(5):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buf = bytearray(size)
    buf[::4096] = b"x" * len(range(0, size, 4096))  # touch every page
    copy = bytes(buf)
    del buf, copy
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(applied, pages, max(faults[1:]))
"""


def _run(mode: str, **env: str) -> tuple[bool, int, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    return out[0] == "True", int(out[1]), int(out[2])


def test_freed_large_buffers_are_reused_without_page_faults() -> None:
    applied, pages, retained = _run("retain")
    assert applied
    _, _, default = _run("default")
    # By default each round faults both 20 MB buffers in afresh (about two faults per page);
    # retained, the rounds after the first reuse the same pages.
    assert default > pages
    assert retained < pages // 20, (retained, default)


def test_the_operators_malloc_settings_win() -> None:
    applied, _, _ = _run("retain", MALLOC_TRIM_THRESHOLD_="131072")
    assert not applied


def test_a_worker_freezes_its_heap_once_per_process() -> None:
    """What a worker holds after its first task leaves the collector's sight once; a forked
    worker (Spark's daemon forks them) freezes its own heap after its own first task."""
    probe = """
import gc, os
from shareq.heap import freeze_once_per_process as _freeze_worker_heap
before = gc.get_freeze_count()
_freeze_worker_heap()
first = gc.get_freeze_count()
kept = [object() for _ in range(1000)]
_freeze_worker_heap()
again = gc.get_freeze_count()
pid = os.fork()
if pid == 0:
    gc.unfreeze()
    _freeze_worker_heap()
    os._exit(0 if gc.get_freeze_count() > 0 else 1)
_, status = os.waitpid(pid, 0)
print(before, first > before, again == first, os.waitstatus_to_exitcode(status))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out == ["0", "True", "True", "0"], out
