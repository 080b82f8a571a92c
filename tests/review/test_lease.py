"""The on-hold write lease: exactly one holder per network, whoever races for it.

Local data bases use a kernel lock (``flock``); object storage a record checked by
write-then-read-back. The race tests start contenders together behind a barrier.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import ObjectStoragePath
from airflow.sdk.io import attach
from fsspec.implementations.memory import MemoryFileSystem

from affiliate_network.exceptions import LeaseBusyError, LeaseLostError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.human_apply import apply_human_choices
from affiliate_network.review.human_requests import OPTION_APPROVE, build_review_requests
from affiliate_network.review.identity import RunIdentity
from affiliate_network.review.job import ReviewOptions, ReviewRun, run_review
from affiliate_network.review.lease import WriteLease, lease_path
from affiliate_network.review.window import review_window
from affiliate_network.rules.engine import RuleSet
from tests.support.onhold_support import after_the_data, patches
from tests.support.s3 import S3_BASE


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
from affiliate_network.review.human_requests import OPTION_APPROVE, build_review_requests
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


class FakeClock:
    """One host's clock that moves only when a lease sleeps on it."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_object_storage_lease_lapses_for_everyone_alike(object_store) -> None:
    """A holder that stopped renewing (it died on another host): another run and the same run's
    retry alike wait until they have seen its record unchanged for its ttl, then take it."""
    path = lease_path(str(object_store), "c")
    clock = FakeClock()
    crashed = WriteLease(path, "dag/crashed", ttl_s=60, clock=clock, sleep=clock.sleep)
    crashed.acquire(wait_s=0)
    crashed.held = False  # the holder died on another host: nobody releases it
    for owner, who in (("dag/next", "another run"), ("dag/crashed", "an earlier attempt")):
        busy = WriteLease(path, owner, ttl_s=60, clock=clock, sleep=clock.sleep)
        with pytest.raises(LeaseBusyError, match=f"{who}.*dag/crashed"):
            busy.acquire(wait_s=59, poll_s=5)
    retry = WriteLease(path, "dag/crashed", ttl_s=60, clock=clock, sleep=clock.sleep)
    started = clock.now
    retry.acquire(wait_s=120, poll_s=5)
    assert clock.now - started >= 60
    assert retry.read()["token"] == retry._token
    retry.release()
    assert not path.exists()


def test_object_storage_lease_of_a_holder_long_dead_is_taken_at_once(object_store) -> None:
    # A record whose expiry passed more than a ttl ago by this host's wall clock.
    path = lease_path(str(object_store), "stale")
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"owner": "dag/gone", "token": "x", "expires": time.time() - 700, "ttl_s": 600}
    path.write_text(json.dumps(record | {"host": "another-host", "pid": 1}))
    lease = WriteLease(path, "dag/next", sleep=lambda s: None)
    lease.acquire(wait_s=0)
    assert lease.read()["owner"] == "dag/next"
    lease.release()


def test_object_storage_lease_of_a_dead_process_of_this_host_is_taken_at_once(
    object_store,
) -> None:
    path = lease_path(str(object_store), "dead")
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"owner": "dag/run", "token": "x", "expires": time.time() + 600, "ttl_s": 600}
    path.write_text(json.dumps(record | {"host": socket.gethostname(), "pid": _dead_pid()}))
    retry = WriteLease(path, "dag/run", sleep=lambda s: None)
    retry.acquire(wait_s=0)  # its killed earlier attempt on this worker: no wait
    assert retry.read()["token"] == retry._token
    retry.release()


def test_object_storage_racing_takers_settle_on_one_holder(object_store) -> None:
    path = lease_path(str(object_store), "race")
    holders = _race(path, [f"dag/run-{i}" for i in range(4)], settle_s=0.2)
    assert len(holders) == 1


def test_object_storage_holder_that_lost_its_lease_stops_and_leaves_the_new_record(
    object_store,
) -> None:
    # A's lease expires during a slow chunk; B takes it over. A must neither renew over B's
    # record nor delete it, so a third run keeps waiting while B writes.
    path = lease_path(str(object_store), "lost")
    clock = FakeClock()
    a = WriteLease(path, "dag/a", ttl_s=60, clock=clock, sleep=lambda s: None)
    a.acquire(wait_s=0)
    a.renew()  # ours: pushed forward
    # The slow chunk: B watches A's record unchanged for its ttl, then takes over.
    b = WriteLease(path, "dag/b", ttl_s=60, clock=clock, sleep=clock.sleep)
    b.acquire(wait_s=120, poll_s=10)
    b_record = b.read()
    with pytest.raises(LeaseLostError, match="now held by dag/b"):
        a.renew()
    with pytest.raises(LeaseLostError):
        a.check()
    a.release()
    assert b.read() == b_record
    third = WriteLease(path, "dag/third", ttl_s=60, clock=clock, sleep=lambda s: None)
    with pytest.raises(LeaseBusyError, match="dag/b"):
        third.acquire(wait_s=0)
    b.check()
    b.release()
    assert not path.exists()


def test_object_storage_holder_stops_once_its_lease_expired(object_store) -> None:
    # Past its expiry anyone may take the lease over at any moment: the holder stops even
    # before someone does, and leaves the record for the next taker.
    path = lease_path(str(object_store), "expired")
    now = [0.0]
    lease = WriteLease(path, "dag/a", ttl_s=60, clock=lambda: now[0], sleep=lambda s: None)
    lease.acquire(wait_s=0)
    now[0] = 59.0
    lease.renew()  # in time: pushed to 119
    now[0] = 120.0
    with pytest.raises(LeaseLostError, match="it expired"):
        lease.renew()
    lease.release()
    assert lease.read()["owner"] == "dag/a"


def test_object_storage_retry_never_overlaps_its_earlier_attempt(object_store) -> None:
    """The same run's retry waits while its earlier attempt (alive on another worker) renews;
    once that attempt stops renewing it takes over, and the attempt stops before its next
    chunk rather than write beside it."""
    path = lease_path(str(object_store), "retry")
    clock = FakeClock()
    first = WriteLease(path, "dag/run", ttl_s=60, clock=clock, sleep=lambda s: None)
    first.acquire(wait_s=0)
    retry = WriteLease(path, "dag/run", ttl_s=60, clock=clock, sleep=clock.sleep)
    for _ in range(5):  # 5 x 50 s: the earlier attempt renews after every chunk
        with pytest.raises(LeaseBusyError, match="an earlier attempt of this run"):
            retry.acquire(wait_s=50, poll_s=10)
        first.check()
        first.renew()
    retry.acquire(wait_s=120, poll_s=10)  # the attempt hangs: 60 s without a renewal
    with pytest.raises(LeaseLostError):
        first.check()
    first.release()
    assert retry.read()["token"] == retry._token
    retry.release()


def test_on_s3_a_retry_never_overlaps_its_earlier_attempt(s3) -> None:
    """On a real S3 endpoint (moto's server mode on loopback: the ``s3`` fixture of
    tests/support/s3.py), in real time with a 3-s ttl: an earlier attempt renews after every
    "chunk" in a thread for 4 s, then hangs; the same run's retry, asking all along, holds the
    lease only once the attempt's last renewal is a ttl old, and the attempt's next check stops
    it."""
    path = lease_path(S3_BASE, "affiliate_network_default")
    # A process's first write to S3 sets up the client (seconds on a loaded machine), and the
    # holder's ttl counts from the start of its write: done beforehand, so the 3-s ttl times
    # the lease and not the client's start-up.
    warm_up = WriteLease(lease_path(S3_BASE, "warm-up"), "warm/up", ttl_s=3.0, settle_s=0.0)
    warm_up.acquire(wait_s=0)
    warm_up.release()
    first = WriteLease(path, "dag/run", ttl_s=3.0, settle_s=0.2)
    first.acquire(wait_s=0)
    renewals: list[float] = []  # when each renewal began
    stop = threading.Event()

    def keep_renewing() -> None:
        end = time.monotonic() + 4.0
        while time.monotonic() < end and not stop.is_set():
            first.check()
            began = time.monotonic()
            first.renew()
            renewals.append(began)
            time.sleep(0.2)

    worker = threading.Thread(target=keep_renewing)
    worker.start()
    retry = WriteLease(path, "dag/run", ttl_s=3.0, settle_s=0.2)
    try:
        retry.acquire(wait_s=30, poll_s=0.2)
        took = time.monotonic()
    finally:
        stop.set()
        worker.join()
    assert len(renewals) >= 2
    assert took >= renewals[-1] + 3.0  # never while the earlier attempt could still write
    with pytest.raises(LeaseLostError):
        first.check()
    first.release()
    assert retry.read()["token"] == retry._token
    retry.release()
    assert not path.exists()


def _review_window(rules_file: Path, window: tuple[str, str]) -> tuple[RuleSet, Any]:
    ruleset = RuleSet.from_file(rules_file)
    review = review_window(
        timezone_id=None,
        lookback_days=14,
        to_date=window[1],
        as_of=after_the_data(window),
        horizon_hours=ruleset.horizon_hours,
    )
    return ruleset, review


@contextlib.contextmanager
def _taken_over_during_the_first_patch(
    sandbox: Any, path: ObjectStoragePath
) -> Iterator[WriteLease]:
    """Another run takes the lease over while the first PATCH is slow (answered 1 s after it is
    applied): on its clock it has watched the writer's record unchanged for the lease's ttl (the
    writer's chunk took too long)."""
    clock = FakeClock()  # the other run's clock; it watches the writer's record for the ttl
    other = WriteLease(path, "dag/other", clock=clock, sleep=clock.sleep, settle_s=0)
    sandbox.set_faults(
        apply_then_delay_paths=["/networks/reporting/onhold"], apply_then_delay_s=1.0
    )
    took: list[BaseException | None] = []

    def take_over() -> None:
        deadline = time.monotonic() + 60
        try:
            while not patches(sandbox) and time.monotonic() < deadline:
                time.sleep(0.02)
            other.acquire(wait_s=700, poll_s=100)
            took.append(None)
        except BaseException as err:
            took.append(err)

    thread = threading.Thread(target=take_over)
    thread.start()
    try:
        yield other
    finally:
        thread.join()
        sandbox.clear_faults()
    assert took == [None]
    # One chunk went out before the takeover, nothing after it; the other run keeps its record.
    assert len(patches(sandbox)) == 1
    assert other.held
    assert other.read()["owner"] == "dag/other"
    other.release()


def test_a_review_that_loses_its_lease_mid_run_stops_before_its_next_chunk(
    sandbox, network_conn, rules_file, window, truth, object_store
) -> None:
    """On object storage: the review sends no second chunk, records the rest as not applied,
    and leaves the other run's record in place."""
    base = str(object_store / "review")
    ruleset, review = _review_window(rules_file, window)
    assert len(truth["ip_mismatch"] | truth["blocklisted_sub"] | truth["duplicate_ip"]) > 5
    hook = AffiliateNetworkHook(network_conn)
    try:
        with (
            _taken_over_during_the_first_patch(
                sandbox, lease_path(base, AffiliateNetworkHook(network_conn).network.slug)
            ),
            pytest.raises(LeaseLostError, match="dag/other"),
        ):
            run_review(
                hook,
                ruleset,
                review,
                options=ReviewOptions(chunk_size=5, lease_wait_minutes=0),
                run=ReviewRun(base=base, conn_id=network_conn, dag_id="script", run_id="slow"),
                dry_run=False,
            )
    finally:
        hook.close()
    sent = [i for e in patches(sandbox) for i in e["body"]["on_hold_conversion_ids"]]
    assert len(sent) == 5
    # The audit says what did not go out, and why.
    audit = ObjectStoragePath(f"{base}/onhold_review/script/slow/decisions-attempt-1.jsonl")
    unsent = [
        r for r in read_jsonl(audit) if r["action"] in ("approve", "reject") and not r["applied"]
    ]
    assert unsent
    assert {r["reason"] for r in unsent} == {"not applied: failed (LeaseLostError)"}


def test_a_human_apply_that_loses_its_lease_stops_before_its_next_chunk(
    sandbox, network_conn, rules_file, window, truth, object_store
) -> None:
    """The reviewers' "Approve all" goes through the same lease: the same stop, and nothing of
    the answers is remembered by a writer that lost it."""
    base = str(object_store / "human")
    ruleset, review = _review_window(rules_file, window)
    hook = AffiliateNetworkHook(network_conn)
    try:
        run = ReviewRun(base=base, conn_id=network_conn, dag_id="script", run_id="human")
        summary = run_review(
            hook, ruleset, review, options=ReviewOptions(), run=run, dry_run=False
        ).summary()
        requests = build_review_requests(summary)
        assert requests
        sandbox.clear_requests()
        assert len(truth["outlier_sale_amount"]) > 2
        approve = {"chosen_options": [OPTION_APPROVE], "responded_by_user": {"name": "ana"}}
        with (
            _taken_over_during_the_first_patch(
                sandbox, lease_path(base, AffiliateNetworkHook(network_conn).network.slug)
            ),
            pytest.raises(LeaseLostError, match="dag/other"),
        ):
            apply_human_choices(
                hook,
                RunIdentity.from_dict(summary["run"]),
                requests,
                [approve] * len(requests),
                reject_status="rejected",
                chunk_size=2,
                lease_wait_minutes=0,
            )
    finally:
        hook.close()
    assert not (ObjectStoragePath(str(summary["state_dir"])) / "human_decisions.jsonl").exists()


def test_a_review_that_lost_its_lease_then_retried_ends_where_one_clean_run_ends(
    sandbox, network_conn, rules_file, window, object_store
) -> None:
    """On object storage: the lease is lost during the first PATCH; the retry (after the other
    run let go) waits for nothing, re-checks and sends only what is still on hold; the network
    ends in the clean run's state and no id went out twice."""
    from tests.support.sandbox_reads import onhold_states

    base = str(object_store / "retried")
    ruleset, review = _review_window(rules_file, window)
    options = ReviewOptions(chunk_size=5, lease_wait_minutes=0)
    hook = AffiliateNetworkHook(network_conn)
    try:

        def run(name: str, attempt: int = 1, where: str = base) -> None:
            run_review(
                hook,
                ruleset,
                review,
                options=options,
                run=ReviewRun(where, network_conn, "script", name, attempt=attempt),
                dry_run=False,
            )

        run("clean", where=str(object_store / "clean"))
        clean = onhold_states(network_conn, *window)
        assert sum(1 for s in clean.values() if s != "on_hold") > 10
        sandbox.reset()
        with (
            _taken_over_during_the_first_patch(
                sandbox, lease_path(base, AffiliateNetworkHook(network_conn).network.slug)
            ),
            pytest.raises(LeaseLostError),
        ):
            run("slow")
        run("slow", attempt=2)  # on-call's retry of the same task, once the other run let go
    finally:
        hook.close()
    assert onhold_states(network_conn, *window) == clean
    sent = [i for e in patches(sandbox) for i in e["body"]["on_hold_conversion_ids"]]
    assert len(sent) == len(set(sent))
