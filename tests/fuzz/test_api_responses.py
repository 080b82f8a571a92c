"""The hook against a server that answers junk: every answer is records or a clear error.

A real HTTP server on loopback answers each request with the body a Hypothesis example gives it
(truncated JSON, wrong types, missing fields, absurd paging numbers, a page that repeats). The
hook must yield records or raise an ``AffiliateNetworkError`` naming what was wrong; never a
``KeyError``/``TypeError``/``ValueError`` from deep inside, never a hang, never the key.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affiliate_network.exceptions import AffiliateNetworkError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from tests.support.connections import conn_env_name

KEY = "fuzz-key-0123456789abcdef"
CONN = "afn_fuzz_junk"


class _Junk:
    body: bytes = b"{}"
    status: int = 200
    hits: int = 0
    #: Requests being answered now (a stopped pull's worker threads may still be sending).
    in_flight: int = 0


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        _Junk.in_flight += 1
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            _Junk.hits += 1
            self.send_response(_Junk.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(_Junk.body)))
            self.end_headers()
            self.wfile.write(_Junk.body)
        finally:
            _Junk.in_flight -= 1

    do_GET = do_POST = do_PATCH = _answer  # noqa: N815 (http.server's method names)

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def junk_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    name = conn_env_name(CONN)
    old = os.environ.get(name)
    os.environ[name] = json.dumps(
        {"conn_type": "affiliate_network", "host": url, "password": KEY,
         "extra": {"portal": "network", "timeout": 5}}
    )  # fmt: skip
    try:
        yield url
    finally:
        server.shutdown()
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**18), max_value=10**18),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
paging_numbers = st.one_of(
    json_scalars,
    st.just(10**15),  # "there are 10^15 rows": must not start 10^12 page requests
    st.sampled_from([0, 1, 2, 50, 2000, -1, -50]),
)
record = st.one_of(
    st.fixed_dictionaries({"conversion_id": st.text(min_size=1, max_size=12)}),
    json_values,
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "conversions": st.one_of(st.lists(record, max_size=5), json_values),
        "paging": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "page": paging_numbers,
                    "page_size": paging_numbers,
                    "total_count": paging_numbers,
                },
            ),
            json_values,
        ),
    },
)


def _serve(body: bytes) -> None:
    """Answer ``body`` from now on, once the requests still in flight (worker threads of a
    pull that was stopped) have been answered, so the hit count is this pull's alone."""
    import time

    # Quiet: nothing being answered and no new request for 0.5 s (under load a stopped pull's
    # last request can take longer than a few milliseconds to arrive).
    last = -1
    deadline = time.monotonic() + 10
    while (last != _Junk.hits or _Junk.in_flight) and time.monotonic() < deadline:
        last = _Junk.hits
        time.sleep(0.5)
    _Junk.body, _Junk.hits = body, 0


def _pull(raw_pages: bool = False) -> int:
    hook = AffiliateNetworkHook(CONN, max_attempts=1, base_delay=0.0, jitter=0.0)
    try:
        rows = 0
        for _ in hook.iter_conversions(
            from_date="2026-01-01",
            to_date="2026-01-01",
            timezone_id=67,
            page_size=2,
            raw_pages=raw_pages,
        ):
            rows += 1
            assert rows < 10_000, "a finite junk answer produced an endless pull"
        return rows
    finally:
        hook.close()


def _check(body: bytes, raw_pages: bool) -> None:
    _Junk.body, _Junk.hits = body, 0  # (hypothesis examples: an exact count is not asserted)
    message = ""
    try:
        _pull(raw_pages)
    except AffiliateNetworkError as err:
        message = str(err)
    assert KEY not in message
    # A junk answer costs a bounded number of requests (no runaway paging).
    assert _Junk.hits <= 5_000


@given(doc=envelopes, raw_pages=st.booleans())
def test_junk_envelopes_give_records_or_a_clear_error(junk_server, doc, raw_pages) -> None:
    _check(json.dumps(doc).encode(), raw_pages)


@given(doc=envelopes, cut=st.integers(min_value=0, max_value=200), raw_pages=st.booleans())
def test_truncated_json_is_a_clear_error(junk_server, doc, cut, raw_pages) -> None:
    text = json.dumps(doc).encode()
    _check(text[: min(cut, max(len(text) - 1, 0))], raw_pages)


@given(body=st.binary(max_size=200), raw_pages=st.booleans())
def test_arbitrary_bytes_are_a_clear_error(junk_server, body, raw_pages) -> None:
    _check(body, raw_pages)


def test_a_repeating_page_stops_the_pull(junk_server) -> None:
    # The server answers page 1's content for every request (it ignores ``page`` and the
    # slice's ``from``/``to``, or a proxy cached it): landing the same rows over and over is
    # refused. The conversion report reads time slices: the window's answer (6 rows, 2 a page)
    # is split into 4 parts, each again claiming all 6, which together is more than the window
    # held; the pull stops there. Without that check every part would be split again (4 more
    # at each level) down to single seconds.
    doc = {
        "conversions": [{"conversion_id": "a"}, {"conversion_id": "b"}],
        "paging": {"page": 1, "page_size": 2, "total_count": 6},
    }
    _serve(json.dumps(doc).encode())
    with pytest.raises(
        AffiliateNetworkError,
        match=r"page 2 is identical to page 1|does not narrow the answer to the slice's from/to",
    ):
        _pull()
    # The window's answer, then its parts requested at once (concurrency 4): the first split
    # is as far as a network that ignores the slice goes.
    assert _Junk.hits <= 5


def test_absurd_paging_numbers_are_refused_before_paging(junk_server) -> None:
    doc = {"conversions": [{"conversion_id": "a"}], "paging": {"total_count": 10**15}}
    _serve(json.dumps(doc).encode())
    with pytest.raises(AffiliateNetworkError, match="not a plausible answer"):
        _pull()
    assert _Junk.hits == 1
    for bad in ("12", -3, 2.5, True):
        _Junk.body = json.dumps({"conversions": [], "paging": {"total_count": bad}}).encode()
        with pytest.raises(AffiliateNetworkError, match=r"paging\.total_count"):
            _pull()


def test_a_record_that_is_not_an_object_is_refused(junk_server) -> None:
    doc = {"conversions": [{"conversion_id": "a"}, 7], "paging": {"total_count": 2}}
    _Junk.body = json.dumps(doc).encode()
    with pytest.raises(AffiliateNetworkError, match=r"conversions\[1\] is a int"):
        _pull()
