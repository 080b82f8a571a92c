"""The on-hold write lease: exactly one holder per network, whoever races for it.

Local data bases use a kernel lock (``flock``); object storage a record checked by
write-then-read-back. The race tests start contenders together behind a barrier.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from airflow.sdk import ObjectStoragePath
from airflow.sdk.io import attach
from fsspec.implementations.memory import MemoryFileSystem

from affiliate_network.exceptions import LeaseBusyError
from affiliate_network.review.lease import WriteLease, lease_path


def _race(path: ObjectStoragePath, owners: list[str], **kw: float) -> list[WriteLease]:
    """Every owner tries once, all at the same moment; the leases that hold."""
    barrier = threading.Barrier(len(owners))
    leases = [WriteLease(path, o, **kw) for o in owners]  # type: ignore[arg-type]
    errors: list[BaseException] = []

    def go(lease: WriteLease) -> None:
        barrier.wait()
        try:
            lease.acquire(wait_s=0)
        except LeaseBusyError:
            pass
        except BaseException as err:  # a crash must fail the test, not pass as "busy"
            errors.append(err)

    threads = [threading.Thread(target=go, args=(x,)) for x in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return [x for x in leases if x.held]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_racing_takers_of_a_dead_holders_lease_end_with_one_holder(tmp_path) -> None:
    # What a killed review leaves: its record, its pid gone. Eight runs race for the network
    # (the stepped-runs test met this: two overlapping runs both "took over" and both wrote).
    path = lease_path(str(tmp_path), "afn")
    for attempt in range(20):
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"owner": "dag/killed", "token": "x", "expires": time.time() + 600}
        record |= {"host": socket.gethostname(), "pid": _dead_pid()}
        path.write_text(json.dumps(record))
        holders = _race(path, [f"dag/run-{i}" for i in range(8)])
        assert len(holders) == 1, f"attempt {attempt}: {[h.owner for h in holders]}"
        assert holders[0].read()["owner"] == holders[0].owner
        holders[0].release()


def test_a_holder_keeps_everyone_out_until_it_releases(tmp_path) -> None:
    path = lease_path(str(tmp_path), "affiliate_network_default")
    first = WriteLease(path, "dag/run-1")
    first.acquire(wait_s=0)
    # Another run, and the same run again while its earlier attempt still writes: both wait,
    # then give up without writing, naming the holder.
    now = [1000.0]
    for owner in ("dag/run-2", "dag/run-1"):
        other = WriteLease(
            path, owner, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
        )
        with pytest.raises(LeaseBusyError, match="dag/run-1"):
            other.acquire(wait_s=30, poll_s=5)
        assert not other.held
    assert first.held
    assert first.read()["owner"] == "dag/run-1"
    first.release()
    second = WriteLease(path, "dag/run-2")
    second.acquire(wait_s=0)
    assert second.read()["owner"] == "dag/run-2"
    second.release()
    assert not path.exists()


_HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from affiliate_network.review.lease import WriteLease, lease_path
WriteLease(lease_path({base!r}, "afn"), "dag/killed").acquire(wait_s=0)
print("held", flush=True)
time.sleep(600)
"""


def test_a_killed_holder_lets_go_at_once(tmp_path) -> None:
    root = str(Path(__file__).resolve().parents[2] / "plugins")
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD.format(root=root, base=str(tmp_path))],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # warnings of the import may come first
            if line.strip() == "held":
                break
        assert proc.poll() is None, "the holder process ended before holding the lease"
        path = lease_path(str(tmp_path), "afn")
        waiting = WriteLease(path, "dag/next")
        with pytest.raises(LeaseBusyError, match="dag/killed"):
            waiting.acquire(wait_s=0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        # The same run's retry and any other run alike: no expiry to wait for.
        waiting.acquire(wait_s=0)
        assert waiting.read()["owner"] == "dag/next"
        waiting.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def object_store() -> ObjectStoragePath:
    attach(protocol="memory", fs=MemoryFileSystem())
    return ObjectStoragePath("memory://afn-lease-bucket/data")


def test_object_storage_lease_expires_and_serves_its_owner_again(object_store) -> None:
    path = lease_path(str(object_store), "c")
    now = [0.0]
    sleep = lambda s: None  # noqa: E731 - the settle wait, not under test here
    crashed = WriteLease(path, "dag/crashed", ttl_s=60, clock=lambda: now[0], sleep=sleep)
    crashed.acquire(wait_s=0)
    crashed.held = False  # the holder died on another host: nobody releases it
    busy = WriteLease(path, "dag/next", clock=lambda: now[0], sleep=sleep)
    with pytest.raises(LeaseBusyError, match="dag/crashed"):
        busy.acquire(wait_s=0)
    again = WriteLease(path, "dag/crashed", clock=lambda: now[0], sleep=sleep)
    again.acquire(wait_s=0)  # its own retry: at once
    again.held = False
    now[0] = 661.0
    nxt = WriteLease(path, "dag/next", clock=lambda: now[0], sleep=sleep)
    nxt.acquire(wait_s=0)
    assert nxt.read()["owner"] == "dag/next"
    nxt.release()
    assert not path.exists()


def test_object_storage_racing_takers_settle_on_one_holder(object_store) -> None:
    path = lease_path(str(object_store), "race")
    holders = _race(path, [f"dag/run-{i}" for i in range(4)], settle_s=0.2)
    assert len(holders) == 1
