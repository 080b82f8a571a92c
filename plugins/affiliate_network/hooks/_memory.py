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

Arrow's allocator, for the same reason: a report landing frees multi-MB Arrow buffers with
every page. Arrow's default pool (mimalloc in the wheels) keeps freed memory for reuse and
commits its arenas eagerly; glibc with the pinned threshold gives large blocks back at once
(measured: about 35 MB of peak RSS on a day landed as Parquet, ``bench/bench_report.py``).
The landing passes the system pool where pyarrow takes one, but Parquet's column writers
always allocate from Arrow's process default, which is chosen once, from
``ARROW_DEFAULT_MEMORY_POOL``, when pyarrow loads. :func:`prefer_system_arrow_pool` sets that
variable while pyarrow is not loaded yet (a landing task calls it before anything loads
pyarrow); if pyarrow is already loaded it switches pyarrow's own default instead, which
covers every allocation but the column writers'. The same opt-out applies, and a value the
deployment set for ``ARROW_DEFAULT_MEMORY_POOL`` is left as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading

#: glibc's ``M_MMAP_THRESHOLD`` parameter number (malloc.h).
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20
OPT_OUT_ENV = "AFFILIATE_NETWORK_MALLOC_TUNING"
#: Arrow reads its default pool's backend from this variable when it loads.
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"

_lock = threading.Lock()
_applied: bool | None = None


def _opted_out() -> bool:
    return os.environ.get(OPT_OUT_ENV, "").strip().lower() in ("off", "0", "false", "no")


def pin_mmap_threshold() -> bool:
    """Pin glibc's mmap threshold once per process; returns whether it is in effect."""
    global _applied
    with _lock:
        if _applied is not None:
            return _applied
        _applied = False
        if _opted_out():
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


def prefer_system_arrow_pool() -> str | None:
    """Make the system allocator Arrow's default in this process (see the module docstring).

    :returns: ``"env"`` (set before pyarrow loads: every Arrow allocation), ``"pyarrow"``
        (pyarrow already loaded: pyarrow's default only), or ``None`` (opted out, or the
        deployment chose a pool itself).
    """
    if _opted_out() or os.environ.get(ARROW_POOL_ENV):
        return None
    if "pyarrow" not in sys.modules:
        os.environ[ARROW_POOL_ENV] = "system"
        return "env"
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return "pyarrow"
