"""Start the sandbox as a subprocess for tests, benchmarks and demos.

>>> from affiliate_network_sandbox.testing import start_sandbox
>>> with start_sandbox(seed=42, conversions_per_day=1000) as sb:   # doctest: +SKIP
...     sb.base_url, sb.keys["network"]
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

_FLAG_NAMES = {
    "end_date": "--end-date",
    "days": "--days",
    "offers": "--offers",
    "affiliates": "--affiliates",
    "advertisers": "--advertisers",
    "conversions_per_day": "--conversions-per-day",
    "on_hold_share": "--on-hold-share",
    "event_share": "--event-share",
    "reporting_timezone_id": "--reporting-timezone-id",
    "world": "--world",
    "offer_currencies": "--offer-currencies",
    "late_share": "--late-share",
    "late_max_s": "--late-max-s",
    "deletion_share": "--deletion-share",
    "deletion_max_s": "--deletion-max-s",
    "reversal_share": "--reversal-share",
    "rate_limit": "--rate-limit",
    "write_delay_s": "--write-delay-s",
    "lost_write_share": "--lost-write-share",
    "clock": "--clock",
}


def _window_params(
    from_date: Any, to_date: Any, timezone_id: int | None, region: str
) -> dict[str, Any]:
    # No timezone_id: the network's default reporting timezone, as the API does.
    params: dict[str, Any] = {"from": str(from_date), "to": str(to_date), "region": region}
    if timezone_id is not None:
        params["timezone_id"] = timezone_id
    return params


def clock_after_data(end_date: dt.date | None = None) -> dt.datetime:
    """A clock instant after every record of a world ending ``end_date`` (default today, UTC).

    The last events come 5 minutes after the day's last conversions, so midnight after
    ``end_date`` plus 10 minutes: every day of the data is complete. For tests and benchmarks
    that want whole days; a test about a day still filling sets the clock itself.
    """
    end = end_date or dt.datetime.now(dt.UTC).date()
    return dt.datetime(end.year, end.month, end.day, tzinfo=dt.UTC) + dt.timedelta(
        days=1, minutes=10
    )


class SandboxAdminError(RuntimeError):
    """An admin call to the sandbox answered with an error status."""


class RunningSandbox:
    """A sandbox process on loopback and its admin API.

    :param process: the sandbox subprocess.
    :param url: root URL (``http://127.0.0.1:PORT``).
    :param workdir: temp folder holding the ready file and the process log.
    """

    def __init__(self, process: subprocess.Popen[bytes], url: str, workdir: Path) -> None:
        self.process = process
        self.url = url
        self.base_url = f"{url}/v1"
        self.eu_base_url = f"{url}/eu/v1"
        self.workdir = workdir
        self._http = requests.Session()
        self.keys: dict[str, Any] = self._admin_object("GET", "/_sandbox/keys")

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.workdir / "sandbox.log"

    def admin(
        self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        """Call an admin endpoint (``/_sandbox/...``) and return its parsed JSON."""
        resp = self._http.request(method, self.url + path, json=json, params=params, timeout=120)
        if resp.status_code >= 400:
            raise SandboxAdminError(f"{method} {path} -> {resp.status_code}: {resp.text[:500]}")
        return resp.json()

    def _admin_object(
        self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """:meth:`admin` for the endpoints that answer one JSON object (checked)."""
        doc = self.admin(method, path, json=json, params=params)
        if not isinstance(doc, dict):
            raise SandboxAdminError(f"{method} {path}: expected a JSON object, got {doc!r:.200}")
        return doc

    def reset(self, **data_config: Any) -> dict[str, Any]:
        """Fresh state: startup data config with ``data_config`` overrides, no faults, no logs."""
        cfg = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in data_config.items()}
        out = self._admin_object("POST", "/_sandbox/reset", json=cfg)
        self.keys = self._admin_object("GET", "/_sandbox/keys")
        return out

    def set_faults(self, **faults: Any) -> dict[str, Any]:
        return self._admin_object("PUT", "/_sandbox/faults", json=faults)

    def clear_faults(self) -> dict[str, Any]:
        return self._admin_object("PUT", "/_sandbox/faults", json={})

    def set_rate_limit(self, capacity: int, refill_per_second: float) -> dict[str, Any]:
        return self._admin_object(
            "PUT",
            "/_sandbox/rate_limit",
            json={"capacity": capacity, "refill_per_second": refill_per_second},
        )

    def set_late_writes(
        self, *, delay_s: float = 0.0, lost_share: float = 0.0, seed: int = 0
    ) -> dict[str, Any]:
        """Late/lost on-hold status updates (``PUT /_sandbox/late-writes``; a reset turns them
        back to the startup setting).

        :param delay_s: real seconds before an accepted update shows in reads.
        :param lost_share: share of accepted updates that never land (drawn per id and send).
        :param seed: seed of that draw.
        """
        return self._admin_object(
            "PUT",
            "/_sandbox/late-writes",
            json={"delay_s": delay_s, "lost_share": lost_share, "seed": seed},
        )

    def late_writes(self) -> dict[str, Any]:
        """The late-writes setting and its counters (``pending``, ``landed``, ``lost``)."""
        return self._admin_object("GET", "/_sandbox/late-writes")

    def clock(self) -> dict[str, Any]:
        """``GET /_sandbox/clock``: ``{"now": ISO 8601 UTC, "unix": seconds, "frozen": bool}``."""
        return self._admin_object("GET", "/_sandbox/clock")

    def set_clock(self, now: dt.datetime | str | None) -> dict[str, Any]:
        """Freeze the sandbox's clock at ``now`` (aware datetime or ISO 8601 with offset);
        None returns it to the wall clock."""
        value = now.isoformat() if isinstance(now, dt.datetime) else now
        return self._admin_object("PUT", "/_sandbox/clock", json={"now": value})

    def advance_clock(self, seconds: float) -> dict[str, Any]:
        """Move the frozen clock forward by ``seconds`` (records of that span appear)."""
        return self._admin_object("PUT", "/_sandbox/clock", json={"advance_s": seconds})

    def set_quota(self, **settings: Any) -> dict[str, Any]:
        """The documented quota with ``settings`` overriding its numbers (``window_s``,
        ``limits``, ``reporting_concurrency``, ``granular_per_window``, ``granular_window_s``)."""
        return self._admin_object(
            "PUT", "/_sandbox/rate_limit", json={"mode": "documented", **settings}
        )

    def requests_log(self) -> list[dict[str, Any]]:
        logged = self._admin_object("GET", "/_sandbox/requests")["requests"]
        if not isinstance(logged, list):
            raise SandboxAdminError(
                f"GET /_sandbox/requests: 'requests' is not a list: {logged!r:.200}"
            )
        return logged

    def request_counts(self) -> dict[str, Any]:
        return self._admin_object("GET", "/_sandbox/requests/counts")

    def clear_requests(self) -> dict[str, Any]:
        return self._admin_object("DELETE", "/_sandbox/requests")

    def catalog(self, region: str = "default") -> dict[str, Any]:
        return self._admin_object("GET", "/_sandbox/catalog", params={"region": region})

    def truth(
        self, from_date: Any, to_date: Any, timezone_id: int | None = None, region: str = "default"
    ) -> dict[str, Any]:
        """Exact counts of the window's records and patterns (``/_sandbox/truth/conversions``)."""
        return self._truth("conversions", from_date, to_date, timezone_id, region)

    def planted(
        self, from_date: Any, to_date: Any, timezone_id: int | None = None, region: str = "default"
    ) -> dict[str, Any]:
        """The window's planted fraud patterns with their ids (``/_sandbox/truth/planted``)."""
        return self._truth("planted", from_date, to_date, timezone_id, region)

    def _truth(
        self, what: str, from_date: Any, to_date: Any, timezone_id: int | None, region: str
    ) -> dict[str, Any]:
        params = _window_params(from_date, to_date, timezone_id, region)
        return self._admin_object("GET", f"/_sandbox/truth/{what}", params=params)

    def truth_money(
        self,
        from_date: Any,
        to_date: Any | None = None,
        timezone_id: int | None = None,
        region: str = "default",
        cells: bool = True,
    ) -> dict[str, Any]:
        """Exact money of a window (default: the day ``from_date``) at the sandbox's clock
        (``/_sandbox/truth/money``): per currency, the count and exact decimal-string payout and
        revenue of base conversions per status, of events, and what the network entity table
        serves in that currency; per (affiliate, offer) couple, the entity table's metrics in
        the offer's currency (``cells``).

        :param from_date: first local day.
        :param to_date: last local day (default ``from_date``).
        :param timezone_id: the API timezone id of the days (default: the network's).
        :param region: ``default`` or ``eu``.
        :param cells: include the per-couple list.
        """
        params = _window_params(
            from_date, from_date if to_date is None else to_date, timezone_id, region
        )
        params["cells"] = "true" if cells else "false"
        return self._admin_object("GET", "/_sandbox/truth/money", params=params)

    def objects(self, kind: str, region: str = "default") -> dict[str, Any]:
        return self._admin_object("GET", f"/_sandbox/objects/{kind}", params={"region": region})

    def stats(self) -> dict[str, Any]:
        return self._admin_object("GET", "/_sandbox/stats")

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 10 s). Safe to call twice."""
        self._http.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        with contextlib.suppress(ValueError):
            atexit.unregister(self.stop)

    def __enter__(self) -> RunningSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_sandbox(
    *, seed: int = 42, host: str = "127.0.0.1", timeout: float = 60.0, **data_config: Any
) -> RunningSandbox:
    """Start the sandbox on a free loopback port and wait until it is healthy.

    :param seed: data seed.
    :param host: loopback address to bind.
    :param timeout: seconds to wait for the process to become healthy.
    :param data_config: data config values (``end_date``, ``days``, ``offers``, ``affiliates``,
        ``advertisers``, ``conversions_per_day``, ``on_hold_share``, ``event_share``,
        ``reporting_timezone_id``, the world profile ``world`` (``"small"``, the default, or
        ``"large"``) and its fields ``offer_currencies``, ``late_share``, ``late_max_s``,
        ``deletion_share``, ``deletion_max_s``, ``reversal_share``), ``rate_limit``
        (``"sandbox"`` or ``"documented"``), the late-writes startup setting ``write_delay_s`` and
        ``lost_write_share``, and
        ``clock`` (an aware datetime or ISO 8601 instant to freeze the clock at; default the
        wall clock, see :func:`clock_after_data`).
    """
    unknown = set(data_config) - set(_FLAG_NAMES)
    if unknown:
        raise TypeError(f"unknown data config: {sorted(unknown)}")
    workdir = Path(tempfile.mkdtemp(prefix="afn-sandbox-"))
    ready = workdir / "ready"
    cmd = [
        sys.executable,
        "-m",
        "affiliate_network_sandbox",
        "--host",
        host,
        "--port",
        "0",
        "--seed",
        str(seed),
        "--ready-file",
        str(ready),
    ]
    for name, value in data_config.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            value = ",".join(value)
        cmd += [_FLAG_NAMES[name], value.isoformat() if hasattr(value, "isoformat") else str(value)]
    log = (workdir / "sandbox.log").open("wb")
    process = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log.close()
    deadline = time.monotonic() + timeout
    url = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"sandbox exited with {process.returncode}: "
                + (workdir / "sandbox.log").read_text()[-2000:]
            )
        if ready.exists():
            url = ready.read_text().strip()
            try:
                if requests.get(f"{url}/_sandbox/health", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
        time.sleep(0.05)
    else:
        process.kill()
        raise RuntimeError("sandbox did not become healthy in time")
    running = RunningSandbox(process, url, workdir)
    atexit.register(running.stop)
    return running
