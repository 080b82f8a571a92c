"""A thin HTTP client over the real sandbox, for the sandbox contract tests (tests/sandbox/)."""

from __future__ import annotations

from typing import Any

import requests

CONVERSIONS = "/networks/reporting/conversions"


class Api:
    """Calls the sandbox's API with a given key (network key by default).

    :param sandbox: the running sandbox.
    """

    def __init__(self, sandbox: Any) -> None:
        self.sb = sandbox
        self.http = requests.Session()

    def call(
        self,
        method: str,
        path: str,
        *,
        key: str | None = "network",
        json: Any = None,
        params: dict | None = None,
        eu: bool = False,
        headers: dict | None = None,
        data: Any = None,
        timeout: float = 60,
    ) -> requests.Response:
        base = self.sb.eu_base_url if eu else self.sb.base_url
        hdrs = dict(headers or {})
        if key is not None:
            keys = self.sb.keys["eu"] if eu else self.sb.keys
            hdrs["X-Svc-Api-Key"] = keys.get(key, key) if isinstance(keys.get(key), str) else key
        return self.http.request(
            method, base + path, json=json, params=params, headers=hdrs, data=data, timeout=timeout
        )

    def conversions(self, body: dict, **params: Any) -> requests.Response:
        return self.call("POST", CONVERSIONS, json=body, params=params or None)

    def all_conversions(self, body: dict, page_size: int = 2000) -> list[dict]:
        out: list[dict] = []
        page = 1
        while True:
            resp = self.conversions(body, page=page, page_size=page_size)
            assert resp.status_code == 200, resp.text
            data = resp.json()
            out.extend(data["conversions"])
            if page * page_size >= data["paging"]["total_count"]:
                return out
            page += 1


def day_body(day: str, **extra: Any) -> dict:
    return {"from": day, "to": day, "timezone_id": 67, **extra}
