"""Keep a concurrent paged pull's memory flat under glibc.

A conversion page is a ~7 MB body, read by a worker thread. glibc serves each thread from its own
malloc arena and, after the first multi-MB block is freed, raises its dynamic mmap threshold so
later page buffers come from those arenas. Freed buffers then stay in the arenas, so RSS grows
with workers x pages instead of staying at workers x page size (measured: 309 MB with 8
workers, against 217 MB with a fixed threshold; see ``bench/bench_pull.py``).

Pinning ``M_MMAP_THRESHOLD`` (what the ``MALLOC_MMAP_THRESHOLD_`` environment variable does)
makes every block of 1 MiB or more its own mapping, returned to the OS when freed. The setting
is per process: in Airflow 3 each task runs in its own process. It is applied once, when a
concurrent pull starts. Set ``AFFILIATE_NETWORK_MALLOC_TUNING=off`` to leave malloc alone. On a
libc without ``mallopt`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

#: glibc's ``M_MMAP_THRESHOLD`` parameter number (malloc.h).
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20
OPT_OUT_ENV = "AFFILIATE_NETWORK_MALLOC_TUNING"

_lock = threading.Lock()
_applied: bool | None = None


def pin_mmap_threshold() -> bool:
    """Pin glibc's mmap threshold once per process; returns whether it is in effect."""
    global _applied
    with _lock:
        if _applied is not None:
            return _applied
        _applied = False
        if os.environ.get(OPT_OUT_ENV, "").strip().lower() in ("off", "0", "false", "no"):
            return False
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            return False
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        _applied = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
        return _applied
