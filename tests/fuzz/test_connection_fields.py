"""Connection fields fuzzed: any value in any field builds a hook or a ConnectionConfigError
that names the field and never echoes the value (a key pasted into the wrong field)."""

from __future__ import annotations

import json
import os

from hypothesis import given
from hypothesis import strategies as st

from affiliate_network.exceptions import AffiliateNetworkError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from tests.support.connections import conn_env_name

CONN = "afn_fuzz_fields"
#: A marker that cannot occur in our own messages: if it shows up, a value was echoed.
SECRET = "zq7SECRETx91"

field_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20).map(lambda t: t + SECRET),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
extras = st.dictionaries(
    st.sampled_from(
        [
            "portal",
            "region",
            "timeout",
            "page_size",
            "concurrency",
            "eu_base_url",
            "verify",
            "key_header",
        ]
    ),
    field_values,
    max_size=4,
)
hosts = st.one_of(
    st.just("http://127.0.0.1:1/v1"),
    st.text(max_size=30).map(lambda t: f"http://127.0.0.1:1/{t}{SECRET}"),
    st.text(max_size=30).map(lambda t: t + SECRET),
    st.none(),
)


@given(extra=extras, host=hosts)
def test_any_connection_gives_a_hook_or_a_clear_error(extra, host) -> None:
    name = conn_env_name(CONN)
    os.environ[name] = json.dumps(
        {"conn_type": "affiliate_network", "host": host, "password": "pw-" + SECRET,
         "extra": extra}
    )  # fmt: skip
    message = ""
    try:
        hook = AffiliateNetworkHook(CONN, max_attempts=1)
        try:
            # Reading the settings is where connection fields are checked (no request needed).
            _ = hook.base_url, hook.portal, hook.concurrency
        finally:
            hook.close()
    except AffiliateNetworkError as err:
        message = f"{err}\n{err!r}\n{err.args!r}"
    finally:
        os.environ.pop(name, None)
    assert SECRET not in message, message
