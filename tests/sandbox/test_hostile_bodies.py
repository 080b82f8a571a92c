"""Hostile request bodies: deep nesting, bodies above the limit, and the sandbox's memory bound."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import psutil
import pytest
import requests

from affiliate_network_sandbox.app import MAX_BODY_BYTES
from affiliate_network_sandbox.requestlog import BODY_MAX_BYTES, MAX_BYTES
from affiliate_network_sandbox.testing import start_sandbox
from tests.support.sandbox_api import CONVERSIONS, day_body

ONHOLD = "/networks/reporting/onhold"
MiB = 1024 * 1024


def _deep(levels: int) -> bytes:
    return b'{"from": "2026-01-01", "filters": ' + b"[" * levels + b"]" * levels + b"}"


def test_a_deeply_nested_body_is_400_and_the_request_log_still_answers(api, sandbox):
    resp = api.call("POST", CONVERSIONS, data=_deep(300), headers={"content-type": "x"})
    assert resp.status_code == 400
    resp = requests.get(sandbox.url + "/_sandbox/requests", timeout=60)
    assert resp.status_code == 200
    (entry,) = resp.json()["requests"]
    assert entry["status"] == 400
    assert entry["body"]["_sandbox_summary"] == "nested too deep"
    assert entry["body"]["bytes"] == len(_deep(300))
    # The log keeps answering for the requests that follow.
    api.call("POST", CONVERSIONS, json={"from": "x"})
    assert requests.get(sandbox.url + "/_sandbox/requests", timeout=60).status_code == 200


@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("from", {"from": "9999-12-30", "to": "9999-12-31", "timezone_id": 1}),
        ("to", {"from": "2026-01-01", "to": "9999-12-31", "timezone_id": 67}),
        ("from", {"from": "0001-01-01", "to": "2026-01-01", "timezone_id": 67}),
        ("from", {"from": "9999-12-31 23:59:59", "to": "9999-12-31 23:59:59", "timezone_id": 1}),
    ],
)
def test_a_date_the_data_cannot_hold_is_400_naming_the_field(api, sandbox, field, body):
    # Year 9999 with timezone id 1 (UTC+14) once overflowed the data generator: a 500.
    resp = api.call("POST", CONVERSIONS, json=body)
    assert resp.status_code == 400, resp.text
    assert f"Invalid parameters. {field}: " in resp.json()["error"]
    assert "outside the dates the data can hold" in resp.json()["error"]
    # The sandbox still answers an ordinary request after it.
    assert api.call("POST", CONVERSIONS, json=day_body("2026-01-01")).status_code == 200


def test_ordinary_bodies_are_logged_whole(api, sandbox, day):
    api.call("POST", CONVERSIONS, json=day_body(day))
    api.call("POST", CONVERSIONS, data=b"{not json", headers={"content-type": "x"})
    ok, bad = sandbox.requests_log()
    assert ok["body"] == day_body(day)
    assert bad["body"] == "{not json"


def test_a_body_above_the_limit_is_413_before_it_is_read(api, sandbox, day):
    body = orjson.dumps({**day_body(day), "pad": "x" * (MAX_BODY_BYTES + 1)})
    resp = api.call("POST", CONVERSIONS, data=body)
    assert resp.status_code == 413
    assert resp.json() == {"Error": f"Request body too large (limit {MAX_BODY_BYTES} bytes)"}
    # Authentication comes first: without a key the answer is 401, whatever the size.
    assert api.call("POST", CONVERSIONS, key=None, data=body).status_code == 401
    assert api.call("POST", CONVERSIONS, key="not-a-key", data=body).status_code == 401
    log = sandbox.requests_log()
    assert [e["status"] for e in log] == [413, 401, 401]
    assert [e["body"] for e in log] == [None, None, None]  # never read, so never kept
    # The connection stays usable and a body at the limit is still read.
    assert api.call("POST", CONVERSIONS, json=day_body(day)).status_code == 200


def test_a_chunked_body_above_the_limit_is_413(api, day):
    def chunks() -> Iterator[bytes]:
        yield b'{"pad": "'
        for _ in range(MAX_BODY_BYTES // MiB + 2):
            yield b"x" * MiB
        yield b'"}'

    resp = api.call("POST", CONVERSIONS, data=chunks())
    assert resp.status_code == 413
    assert api.call("POST", CONVERSIONS, json=day_body(day)).status_code == 200


def test_an_admin_body_above_its_limit_is_413(sandbox):
    resp = requests.put(
        sandbox.url + "/_sandbox/faults", data=b"{" + b" " * (2 * MiB) + b"}", timeout=60
    )
    assert resp.status_code == 413


def test_a_large_body_is_logged_as_a_bounded_summary(api, sandbox):
    ids = ["a" * 32] * (BODY_MAX_BYTES // 30)
    resp = api.call("PATCH", ONHOLD, json={"on_hold_conversion_ids": ids, "status": "held"})
    assert resp.status_code == 400
    (entry,) = sandbox.requests_log()
    assert entry["body"]["_sandbox_summary"] == "too large"
    assert entry["body"]["bytes"] > BODY_MAX_BYTES
    assert len(entry["body"]["head"]) <= 200


def test_random_paths_and_keys_do_not_grow_the_counters_without_bound(api, sandbox):
    for n in range(1100):
        api.call("GET", f"/networks/offerurls/{n}", key=f"random-{n}")
    counts = sandbox.request_counts()
    assert len(counts["by_route"]) <= 1000
    assert counts["total"] == 1100


def _rss(proc: psutil.Process) -> int:
    return proc.memory_info().rss


@pytest.mark.timeout(300)
def test_memory_stays_bounded_under_a_stream_of_large_and_deep_bodies():
    """Large bodies (with and without a key, declared and chunked), deep ones, and enough
    medium bodies to fill the log: the sandbox's resident memory stays near the log's figure.

    Before the limit, twenty such bodies kept every one of them (parsed) in the log.
    """
    with start_sandbox(seed=7, conversions_per_day=50, days=2) as sb:
        proc = psutil.Process(sb.admin("GET", "/_sandbox/health")["pid"])
        key = sb.keys["network"]
        url = sb.base_url + CONVERSIONS
        http = requests.Session()
        for _ in range(20):  # warm the allocator and the code paths first
            http.post(url, json={"from": "x"}, headers={"X-Svc-Api-Key": key}, timeout=60)
        base = _rss(proc)

        big = orjson.dumps({"from": "2026-01-01", "pad": "x" * (20 * MiB)})
        for n in range(10):
            headers = {"X-Svc-Api-Key": key} if n % 2 else {}
            assert http.post(url, data=big, headers=headers, timeout=120).status_code < 500

        def chunked() -> Iterator[bytes]:
            yield b'{"pad": "'
            for _ in range(20):
                yield b"x" * MiB
            yield b'"}'

        for n in range(4):
            headers = {"X-Svc-Api-Key": key} if n % 2 else {}
            resp = http.post(url, data=chunked(), headers=headers, timeout=120)
            assert resp.status_code < 500
        deep = _deep(300)
        for _ in range(50):
            resp = http.post(url, data=deep, headers={"X-Svc-Api-Key": key}, timeout=60)
            assert resp.status_code == 400
        # Medium bodies (just under the size kept whole): together above the log's byte budget.
        medium = orjson.dumps({"from": "2026-01-01", "pad": "y" * (BODY_MAX_BYTES - 100)})
        for _ in range(MAX_BYTES // len(medium) + 40):
            resp = http.post(url, data=medium, headers={"X-Svc-Api-Key": key}, timeout=60)
            assert resp.status_code == 400
        grown = _rss(proc) - base

        # The log's budget plus the transient parse of one body at the limit, with headroom for
        # the allocator; before the fix this stream kept over 200 MB.
        assert grown < MAX_BYTES + 64 * MiB, f"RSS grew by {grown / MiB:.0f} MiB"
        # And the log of all that is still served, within its byte budget.
        resp = http.get(sb.url + "/_sandbox/requests", timeout=120)
        assert resp.status_code == 200
        assert len(resp.content) <= MAX_BYTES + 64 * 1024
