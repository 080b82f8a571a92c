"""The malloc tuning a concurrent pull applies (see ``_memory``) and its opt-out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = (
    "from affiliate_network.hooks._memory import pin_mmap_threshold; print(pin_mmap_threshold())"
)


def _probe(**env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_mmap_threshold_is_pinned_on_glibc():
    assert _probe() == "True"


def test_malloc_tuning_can_be_switched_off():
    assert _probe(AFFILIATE_NETWORK_MALLOC_TUNING="off") == "False"


_ARROW_PROBE = """
import sys
{preload}
from affiliate_network.hooks._memory import prefer_system_arrow_pool
how = prefer_system_arrow_pool()
import pyarrow as pa
print(how, pa.default_memory_pool().backend_name)
"""


def _arrow_probe(*, preload: bool = False, **env: str) -> str:
    code = _ARROW_PROBE.format(preload="import pyarrow" if preload else "")
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_arrow_uses_the_system_allocator_when_set_before_pyarrow_loads():
    assert _arrow_probe() == "env system"


def test_arrow_default_is_switched_when_pyarrow_is_already_loaded():
    assert _arrow_probe(preload=True) == "pyarrow system"


def test_arrow_allocator_is_left_alone_when_opted_out_or_chosen():
    assert _arrow_probe(AFFILIATE_NETWORK_MALLOC_TUNING="off").startswith("None ")
    assert _arrow_probe(ARROW_DEFAULT_MEMORY_POOL="jemalloc") == "None jemalloc"
