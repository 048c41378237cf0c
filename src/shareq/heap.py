"""Keep freed large buffers in the process, so the next one of the same size costs no page faults.

glibc's malloc serves a block above ``M_MMAP_THRESHOLD`` with a fresh ``mmap`` and unmaps it when
freed, and gives the top of its heap back to the kernel above ``M_TRIM_THRESHOLD``. Both adapt
from 128 KiB upwards, but not fast enough for a process that receives or reads megabytes per
request: every ShareFetch or Fetch response of 20 MB was then faulted in page by page, once for
the receive buffer and again for each copy, 10-15 ms of CPU per 20 MB, several times the cost of
moving the bytes. With both thresholds raised the freed blocks stay in the heap and are reused.

A process that holds a few such buffers keeps up to ``trim_bytes`` of freed memory in its heap
instead of returning it: its resident size stays at its peak rather than falling back between
requests. Nothing is changed when glibc's own ``MALLOC_MMAP_THRESHOLD_`` /
``MALLOC_TRIM_THRESHOLD_`` environment variables are set (the operator's choice wins), nor on
another C library.
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MIB = 1 << 20

_applied: bool | None = None
_frozen_in: int | None = None  # the process whose heap was frozen


def retain_large_buffers(mmap_bytes: int = 64 * _MIB, trim_bytes: int = 256 * _MIB) -> bool:
    """Raise glibc's mmap and trim thresholds once per process; whether they are raised now."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success; the trim threshold first, so the heap is never trimmed below
    # what the larger mmap threshold now keeps in it.
    _applied = bool(mallopt(_M_TRIM_THRESHOLD, trim_bytes)) and bool(mallopt(_M_MMAP_THRESHOLD, mmap_bytes))
    return _applied


def freeze_once_per_process() -> None:
    """Move what the process holds now out of the cyclic collector's sight, once per process.

    For Spark's Python workers, called after a worker's first task: Spark's daemon runs a full
    ``gc.collect()`` after every task of a reused worker, and a full collection walks every object
    the process holds (pyarrow, numpy, kio's schemas, this package, pyspark itself). On a share
    micro-batch that walk was about 60% of the workers' CPU, tens of milliseconds per task against
    15 ms for reading its 50,000 records. What is alive after the first task is modules, classes
    and caches that live as long as the worker; garbage made later is collected as before. A
    forked child (Spark's daemon forks its workers) freezes its own heap on its own first call.
    """
    global _frozen_in
    pid = os.getpid()
    if pid != _frozen_in:
        _frozen_in = pid
        gc.freeze()
