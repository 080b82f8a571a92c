"""The GC pause helper restores the collector as it found it, also when the block raises."""

from __future__ import annotations

import gc

import pytest

from affiliate_network.helpers.gcpause import paused_gc


def test_pause_nests_and_restores() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it as the outer one set it
    assert gc.isenabled()


def test_pause_restores_after_an_error_and_keeps_a_disabled_collector_off() -> None:
    with pytest.raises(ValueError, match="boom"), paused_gc():
        raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
