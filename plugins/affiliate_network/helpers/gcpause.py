"""Pausing Python's cyclic garbage collector around allocation-heavy work."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic GC for the block, then restore its previous state.

    For work that allocates hundreds of thousands of containers without reference cycles
    (parsed JSON pages, column lists): with the collector on, each allocation burst triggers
    collections that traverse every live young object again. Nests: an inner block leaves the
    collector as the outer one set it. Cycles made meanwhile are collected once it is back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
