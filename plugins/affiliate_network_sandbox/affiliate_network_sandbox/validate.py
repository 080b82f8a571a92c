"""Small request-body validators; every failure is a 400 ``Invalid parameters.``."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from typing import Any, cast

from affiliate_network_sandbox.errors import invalid


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def obj(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid("the body must be a JSON object")
    return body


def req(body: dict[str, Any], name: str) -> Any:
    if name not in body or body[name] is None:
        raise invalid(f"{name} is required")
    return body[name]


def string(value: Any, name: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise invalid(
            f"{name} must be a non-empty string" if not empty else f"{name} must be a string"
        )
    return value


def boolean(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"{name} must be a boolean")
    return value


def integer(value: Any, name: str, *, minimum: int | None = None) -> int:
    if not is_int(value) or (minimum is not None and value < minimum):
        raise invalid(
            f"{name} must be an integer" + (f" >= {minimum}" if minimum is not None else "")
        )
    return cast(int, value)


def number(value: Any, name: str, *, lo: float | None = None, hi: float | None = None) -> float:
    if not is_num(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
        raise invalid(f"{name} must be a number" + (f" in {lo}..{hi}" if hi is not None else ""))
    return cast(float, value)


def enum(value: Any, name: str, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if value not in allowed:
        raise invalid(f"{name} must be one of {', '.join(allowed)}")
    return cast(str, value)


def int_list(value: Any, name: str) -> list[int]:
    if not isinstance(value, list) or not all(is_int(v) for v in value):
        raise invalid(f"{name} must be a list of integers")
    return value


def str_list(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"{name} must be a list of strings")
    return value


def date(value: Any, name: str) -> dt.date:
    if not isinstance(value, str) or len(value) != 10:
        raise invalid(f"{name} must be a YYYY-MM-DD date")
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise invalid(f"{name} must be a YYYY-MM-DD date") from None
