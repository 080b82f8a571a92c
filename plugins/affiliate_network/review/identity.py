"""Who a review run is and what it looked at: one object, written once, read back whole.

The review writes its :class:`RunIdentity` into its summary (the task's XCom, key ``run``, one
JSON object); the human step reads it back from there and needs nothing else about the run: not
the audit file's folder (its base), not the window texts, not a chain of places for the timezone.

A light module (the operators' constructors and the human step load it without the review run).
"""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.review.audit import audit_dir
from affiliate_network.review.human_decisions import state_dir

if TYPE_CHECKING:
    from affiliate_network.review.window import ReviewWindow

__all__ = ["IDENTITY_VERSION", "ReviewRun", "RunIdentity"]

#: Format version of :meth:`RunIdentity.to_json`; another version is refused.
IDENTITY_VERSION = 1


@dataclass(frozen=True)
class ReviewRun:
    """Where a run keeps its audit and state, and who it is to the write lease.

    :param base: data base (local path or URL): ``<base>/onhold_review/...``.
    :param conn_id: the network's connection id (one state folder and write lease per network).
    :param dag_id: the audit folder's first level (a script: any name).
    :param run_id: the audit folder of this run.
    :param attempt: the audit file of this attempt (``decisions-attempt-N.jsonl``).
    """

    base: str
    conn_id: str
    dag_id: str
    run_id: str
    attempt: int = 1

    @property
    def audit_path(self) -> ObjectStoragePath:
        return audit_dir(self.base, self.dag_id, self.run_id) / (
            f"decisions-attempt-{self.attempt}.jsonl"
        )

    @property
    def state_dir(self) -> ObjectStoragePath:
        return state_dir(self.base, self.conn_id)

    @property
    def owner(self) -> str:
        """The write lease's owner (a retry of the same run waits for its earlier attempt)."""
        return f"{self.dag_id}/{self.run_id}"


@dataclass(frozen=True)
class RunIdentity:
    """A review run's identity: where it keeps its files, who it is to the write lease, the
    window it decided (days and timezone) and its "now".

    :param run: the run's places and lease owner (this attempt's audit file).
    :param timezone_id: the API's timezone id of the window.
    :param timezone: its IANA name.
    :param as_of: the review's "now" (aware, in ``timezone``).
    :param decide_from: first local day decided.
    :param to_date: last local day decided.
    :param rules_file: the rules file the run decided with (``None``: not recorded).
    """

    run: ReviewRun
    timezone_id: int
    timezone: str
    as_of: dt.datetime
    decide_from: dt.date
    to_date: dt.date
    rules_file: str | None = None

    @classmethod
    def of(cls, run: ReviewRun, window: ReviewWindow, rules_file: str | None) -> RunIdentity:
        """The identity of ``run`` deciding ``window`` with ``rules_file``: every field the
        window has (its timezone, "now" and decided days) is the window's."""
        from_window = {
            f.name: getattr(window, f.name) for f in fields(cls) if hasattr(window, f.name)
        }
        return cls(run=run, rules_file=rules_file, **from_window)

    @property
    def audit_path(self) -> ObjectStoragePath:
        """The run's audit file (its ``review`` rows wait for the human step)."""
        return self.run.audit_path

    @property
    def state_dir(self) -> ObjectStoragePath:
        return self.run.state_dir

    @property
    def owner(self) -> str:
        return self.run.owner

    def to_dict(self) -> dict[str, Any]:
        """The identity as one JSON object (what the review's summary carries as ``run``)."""
        run = self.run
        return {
            "version": IDENTITY_VERSION,
            "base": run.base,
            "conn_id": run.conn_id,
            "dag_id": run.dag_id,
            "run_id": run.run_id,
            "attempt": run.attempt,
            "timezone_id": self.timezone_id,
            "timezone": self.timezone,
            "as_of": self.as_of.isoformat(),
            "decide_from": self.decide_from.isoformat(),
            "to_date": self.to_date.isoformat(),
            "rules_file": self.rules_file,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as text (keys sorted): :meth:`from_json` gives back an equal
        identity."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunIdentity:
        """The identity :meth:`to_json` wrote.

        :raises ConfigValidationError: not such an object, or of another format version.
        """
        try:
            data = json.loads(text)
        except ValueError as err:
            raise ConfigValidationError(f"unreadable review run identity: {err}") from err
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunIdentity:
        """The identity :meth:`to_dict` gave.

        :raises ConfigValidationError: not such an object, or of another format version.
        """
        try:
            if not isinstance(data, Mapping) or data.get("version") != IDENTITY_VERSION:
                raise ValueError(f"not a run identity of version {IDENTITY_VERSION}")
            tz = zoneinfo.ZoneInfo(data["timezone"])
            return cls(
                run=ReviewRun(
                    base=str(data["base"]),
                    conn_id=str(data["conn_id"]),
                    dag_id=str(data["dag_id"]),
                    run_id=str(data["run_id"]),
                    attempt=int(data["attempt"]),
                ),
                timezone_id=int(data["timezone_id"]),
                timezone=str(data["timezone"]),
                as_of=dt.datetime.fromisoformat(data["as_of"]).astimezone(tz),
                decide_from=dt.date.fromisoformat(data["decide_from"]),
                to_date=dt.date.fromisoformat(data["to_date"]),
                rules_file=data["rules_file"],
            )
        except (KeyError, TypeError, ValueError, zoneinfo.ZoneInfoNotFoundError) as err:
            raise ConfigValidationError(f"unreadable review run identity: {err}") from err

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> RunIdentity:
        """The identity in a review's summary (its ``run``).

        :param summary: the review's summary.
        :raises ConfigValidationError: the summary holds no readable identity.
        """
        return cls.from_dict(summary.get("run") or {})
