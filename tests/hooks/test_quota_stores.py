"""The shared quota's stores where production lives: answers that trickle, a Redis that stops
and restarts, hosts whose clocks disagree, a quota folder on a network filesystem.

Redis is a redis-server of the test's own on a loopback port (stopped and restarted by PID);
the network is a tiny trickling HTTP server or the sandbox; the workers are separate processes
running the transport and the stores unmocked (tests/support/quota_support.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest

from affiliate_network.exceptions import ConnectionConfigError, QuotaStoreError
from affiliate_network.hooks._budget import (
    FallbackStore,
    FileStore,
    QuotaSettings,
    RedisStore,
    filesystem_type,
    is_network_filesystem,
)
from tests.support.quota_support import Workers, redis_server, trickle_server

pytest.importorskip("redis")


# --- answers that trickle ----------------------------------------------------------------------


@pytest.mark.parametrize("store", ["file", "redis"])
def test_a_trickling_answer_never_lets_a_second_request_past_a_cap_of_1(tmp_path, store):
    """Each answer trickles for 4 s, a byte every 0.2 s, under a 1-s read timeout; a lease
    nobody renewed would expire after 1.2 s and let the second process in."""
    with trickle_server(trickle_s=4.0) as server:
        cfg = {
            "base_url": server.base_url,
            "scope": uuid.uuid4().hex,
            "quota_dir": str(tmp_path / "quota"),
            "redis_url": "redis://127.0.0.1:6379/0" if store == "redis" else None,
            "grace_s": 0.0,
            "slot_ttl_s": 1.2,
            "timeout_s": 1.0,
            "count": 1,
        }
        workers = Workers(tmp_path, 2, **cfg)
        try:
            outs = workers.finish(stop=False)
        finally:
            workers.kill()
    assert [out[:-1] for out in outs] == [[{"status": 200}], [{"status": 200}]]
    assert len(server.served) == 2
    assert server.max_in_flight == 1


# --- Redis stopped mid-pull, and restarted ------------------------------------------------------


@pytest.mark.parametrize("unavailable", ["fail", "local"])
def test_redis_stopped_mid_pull_ends_with_every_row_or_one_typed_error(
    sandbox, make_connection, make_hook, tmp_path, caplog, unavailable
):
    day = sandbox.catalog()["last_date"]
    total = sandbox.truth(day, day)["conversions"]
    sandbox.set_faults(latency_ms=40)
    with redis_server(tmp_path) as redis:
        conn = make_connection(
            "affiliate_network_redis_stops",
            host=sandbox.base_url,
            key=sandbox.keys["network"],
            quota_redis_url=redis.url,
            quota_redis_unavailable=unavailable,
            quota_dir=str(tmp_path / "quota"),
            quota_network=uuid.uuid4().hex,
        )
        hook = make_hook(conn, page_size=max(1, total // 30))
        rows, error = 0, None
        caplog.set_level(logging.WARNING, logger="affiliate_network.hooks._budget")
        try:
            for _ in hook.iter_conversions(from_date=day, to_date=day, timezone_id=67):
                rows += 1
                if rows == total // 5:
                    redis.stop()
        except Exception as exc:  # the one error the pull ends with, if any
            error = exc
    sandbox.clear_faults()
    assert 0 < total // 5 < total
    warnings = [r for r in caplog.records if "does not answer" in r.getMessage()]
    if unavailable == "fail":
        assert isinstance(error, QuotaStoreError), repr(error)
        assert f"Redis at redis://127.0.0.1:{redis.port}/0" in str(error)
        assert "quota_redis_unavailable" in str(error)
        assert rows < total
        assert warnings == []
    else:
        assert error is None, repr(error)
        assert rows == total
        assert len(warnings) == 1  # one warning, however many requests met the outage


def _renewed(redis_url: str, key: str, timeout: float = 10.0) -> None:
    """Return right after the lease in ``key`` is renewed (its score moves)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + timeout
        first = client.zrange(key, 0, -1, withscores=True)
        while client.zrange(key, 0, -1, withscores=True) == first:
            assert time.monotonic() < deadline, "the lease in flight was never renewed"
            time.sleep(0.005)
    finally:
        client.close()


def test_after_a_redis_restart_the_cap_of_1_still_holds(tmp_path):
    """Three processes take turns on one reporting slot (answers trickle for 4.5 s). Redis is
    killed right after the holder renewed its lease and restarted empty 0.3 s later: the others
    ask at once, the holder re-asserts its lease only on its next heartbeat (2 s), and nobody
    gets a new lease until the restart grace (4 s) has passed."""
    scope = uuid.uuid4().hex
    with redis_server(tmp_path) as redis, trickle_server(trickle_s=4.5, step_s=0.1) as server:
        cfg = {
            "base_url": server.base_url,
            "scope": scope,
            "redis_url": redis.url,
            "grace_s": 4.0,
            "slot_ttl_s": 8.0,  # renewed every 2 s
            "timeout_s": 1.0,
            "count": 1000,
        }
        workers = Workers(tmp_path, 3, **cfg)  # they wait out the grace of Redis's own start
        try:
            deadline = time.monotonic() + 30
            while server.started < 1:
                assert time.monotonic() < deadline, "no answer was started"
                time.sleep(0.01)
            _renewed(redis.url, f"affiliate_network:quota:{scope}:slots")
            redis.stop()
            time.sleep(0.3)
            redis.start()
            restarted = time.monotonic()
            while not [s for s, _ in server.served if s > restarted]:
                assert time.monotonic() < restarted + 40, "no answer after the restart"
                time.sleep(0.05)
            outs = workers.finish()
        finally:
            workers.kill()
    assert server.max_in_flight == 1, server.served
    outcomes = [line for out in outs for line in out]
    assert {"error": "QuotaStoreError"} in outcomes  # the outage was met (and retried)
    assert all(line.get("status", 200) == 200 for line in outcomes)


# --- hosts whose clocks disagree ----------------------------------------------------------------


def test_two_hosts_120_s_apart_share_redis_without_waiting_or_taking_a_live_slot(tmp_path):
    """Each host's clock goes into its stores (the fallback's schedule, its local file store);
    the shared budget is timed by the Redis server alone."""
    scope = uuid.uuid4().hex
    with redis_server(tmp_path) as redis:
        time.sleep(0.1)

        def host(skew_s: float, name: str) -> FallbackStore:
            def clock() -> float:
                return time.monotonic() + skew_s

            local = FileStore(tmp_path / name, scope, clock=clock)
            return FallbackStore(
                RedisStore(redis.url, scope, restart_grace_s=0), local, clock=clock
            )

        ahead, behind = host(+120.0, "ahead"), host(-120.0, "behind")
        # The pacer: 10 requests/s, one at a time. A host 120 s behind another does not wait
        # 120 s; it waits one interval at most.
        assert ahead.pace(0.1, 0.0) == 0.0
        assert 0.0 < behind.pace(0.1, 0.0) <= 0.1
        time.sleep(0.1)
        assert behind.pace(0.1, 0.0) == 0.0
        # A slot the host behind holds (30 s to live) is live for the host ahead as well.
        assert behind.enter("held-behind", 1, 30.0)
        assert not ahead.enter("taken-ahead", 1, 30.0)
        behind.leave("held-behind")
        assert ahead.enter("taken-ahead", 1, 30.0)
        assert not behind.enter("held-behind", 1, 30.0)


# --- the file store is one machine's ------------------------------------------------------------


def test_the_file_store_times_by_the_machines_monotonic_clock(tmp_path):
    """Its files hold the monotonic clock stamped with this boot; a file of another boot (or of
    the wall-clock format) starts afresh rather than holding a slot for a foreign clock."""
    scope = "s"
    store = FileStore(tmp_path, scope)
    assert store.enter("a", 1, 30.0)
    doc = (tmp_path / "s.slots.json").read_text()
    assert '"boot"' in doc
    assert not FileStore(tmp_path, scope).enter("b", 1, 30.0)  # live for another process
    # A file written under another boot's clock: its slot means nothing now.
    (tmp_path / "s.slots.json").write_text('{"boot": "another-boot", "state": {"a": 1e12}}')
    assert FileStore(tmp_path, scope).enter("b", 1, 30.0)


def test_the_filesystem_type_comes_from_the_real_mount_table(tmp_path):
    kind = filesystem_type(tmp_path)
    assert kind, "no mount table entry for the test's folder"
    assert not is_network_filesystem(kind)
    FileStore(tmp_path, "accepted")  # a local folder is fine
    root = filesystem_type("/")
    assert root == _mount_of("/")


def _mount_of(point: str) -> str | None:
    kind = None
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == point:
            kind = fields[2]  # the last mount on a point is the one seen
    return kind


def test_the_filesystem_type_is_the_longest_mount_holding_the_path(tmp_path):
    table = tmp_path / "mounts"
    table.write_text(
        "/dev/vda / ext4 rw 0 0\n"
        "server:/export /mnt/shared nfs4 rw 0 0\n"
        "//host/share /mnt/with\\040blank cifs rw 0 0\n"
        "user@host:/x /mnt/shared/inner fuse.sshfs rw 0 0\n"
        "tmpfs /mnt/shared/inner/tmp tmpfs rw 0 0\n"
    )
    assert filesystem_type("/mnt/shared/quota", str(table)) == "nfs4"
    assert filesystem_type("/mnt/shared", str(table)) == "nfs4"
    assert filesystem_type("/mnt/sharedX/quota", str(table)) == "ext4"
    assert filesystem_type("/mnt/with blank/q", str(table)) == "cifs"
    assert filesystem_type("/mnt/shared/inner/q", str(table)) == "fuse.sshfs"
    assert filesystem_type("/mnt/shared/inner/tmp/q", str(table)) == "tmpfs"
    assert filesystem_type("/x", str(tmp_path / "no-such-table")) is None


@pytest.mark.parametrize(
    ("fstype", "network"),
    [
        ("nfs", True),
        ("nfs4", True),
        ("cifs", True),
        ("smb3", True),
        ("fuse.sshfs", True),
        ("ceph", True),
        ("fuse.ceph", True),
        ("glusterfs", True),
        ("9p", True),
        ("NFS4", True),
        ("ext4", False),
        ("xfs", False),
        ("btrfs", False),
        ("tmpfs", False),
        ("overlay", False),
        ("fuse.gvfsd-fuse", False),
        ("", False),
        (None, False),
    ],
)
def test_network_filesystems_are_told_from_local_ones(fstype, network):
    assert is_network_filesystem(fstype) is network


def test_a_quota_dir_on_a_network_filesystem_is_refused(tmp_path):
    """The refusal itself, on a mount table naming the folder's mount point NFS (the kernel's
    table has no network mount on this machine)."""
    table = tmp_path / "mounts"
    table.write_text(f"/dev/vda / ext4 rw 0 0\nserver:/export {tmp_path} nfs4 rw 0 0\n")
    with pytest.raises(ConnectionConfigError, match=r"quota_dir .* network filesystem \(nfs4\)"):
        FileStore(tmp_path / "quota", "s", mounts=str(table))
    FileStore(tmp_path / "quota", "s")  # the kernel's table: a local disk


def test_quota_redis_unavailable_is_validated():
    assert QuotaSettings.from_extras({}, "c").redis_unavailable == "fail"
    assert QuotaSettings.from_extras(
        {"quota_redis_unavailable": "LOCAL"}, "c"
    ).redis_unavailable == ("local")
    with pytest.raises(ConnectionConfigError, match="quota_redis_unavailable must be"):
        QuotaSettings.from_extras({"quota_redis_unavailable": "retry"}, "c")
