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
