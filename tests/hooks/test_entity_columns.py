"""The entity tables' ``columns`` argument: a wrong shape is refused by the hook, naming it,
before anything is sent (the server would answer about a column named ``None``, or take a plain
string letter by letter)."""

from __future__ import annotations

import pytest

from affiliate_network.exceptions import InvalidRequestError

DAY = "2024-01-01"


@pytest.mark.parametrize(
    ("columns", "says"),
    [
        ("offer", "columns: 'offer' is not a list of columns"),
        (b"offer", "columns: b'offer' is not a list of columns"),
        (None, "columns: NoneType is not a list of columns"),
        ({"column": "offer"}, "columns: dict is not a list of columns"),
        (["offer", {"name": "date"}], "columns[1]: an object without a 'column' name"),
        ([{"column": None}], "columns[0]: an object without a 'column' name (it has 'column')"),
        ([{"column": ""}], "columns[0]: an object without a 'column' name"),
        (["offer", ""], "columns[1]: an empty name"),
        ([7], "columns[0]: a int"),
        ([None], "columns[0]: a NoneType"),
    ],
)
def test_a_column_of_the_wrong_shape_is_named_and_nothing_is_sent(
    columns, says, affiliate_conn, network_conn, make_hook, sandbox
) -> None:
    for hook, call in (
        (make_hook(affiliate_conn), "affiliate_entity_table"),
        (make_hook(network_conn), "network_entity_table"),
    ):
        with pytest.raises(InvalidRequestError) as info:
            getattr(hook, call)(from_date=DAY, to_date=DAY, columns=columns, timezone_id=67)
        assert says in str(info.value)
        assert "'None'" not in str(info.value)
    assert sandbox.requests_log() == []


def test_names_and_column_objects_still_reach_the_service(affiliate_conn, make_hook, sandbox):
    catalog = sandbox.catalog()
    rows = make_hook(affiliate_conn).affiliate_entity_table(
        from_date=catalog["first_date"],
        to_date=catalog["last_date"],
        columns=["offer", {"column": "date"}],
        timezone_id=67,
    )
    assert rows
    assert {c["column_type"] for c in rows[0]["columns"]} == {"offer", "date"}
