"""What a review or sync task run was, recorded beside its outputs (read by the network page).

One small JSON file per task attempt, written atomically (one object)::

    <base>/onhold_review/<dag id>/<run id>/outcome-<task id>-attempt-N.json   (the review)
    <base>/sync_runs/<dag id>/<run id>/outcome-<task id>-attempt-N.json       (the offer sync)

Fields: ``dag_id``, ``run_id``, ``task_id``, ``attempt``, ``conn_id``, ``outcome`` (one of
:data:`OUTCOMES`), ``detail`` (the guardrail's message, or the error's first line), ``at`` (UTC,
ISO 8601) and what the job returned (``summary``). The record names its DAG: a reader decides
who may see a run from the record, never from a folder's name.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from affiliate_network.helpers.tasklog import TaskLog

#: ``wrote``: the run changed the network (``summary`` says how much, maybe nothing);
#: ``dry_run``: it decided or planned only; ``stopped``: a guardrail stopped it before any write;
#: ``failed``: an error ended it.
OUTCOMES = ("wrote", "dry_run", "stopped", "failed")
RECORD_PREFIX = "outcome-"
RECORD_NAME = re.compile(r"^outcome-(?P<task>.+)-attempt-(?P<attempt>\d+)\.json$")


def safe_name(text: str) -> str:
    """A DAG or run id as one folder name (review audit folders, sync run folders)."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "run"


def record_name(task_id: str, attempt: int) -> str:
    return f"{RECORD_PREFIX}{safe_name(task_id)}-attempt-{attempt}.json"


def first_line(err: BaseException) -> str:
    """``Type: first line of the message`` (what the page shows of a failure)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def write_run_record(
    folder: Any,
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    attempt: int,
    conn_id: str | None,
    outcome: str,
    detail: str | None = None,
    summary: Mapping[str, Any] | None = None,
) -> Any:
    """Write the record into ``folder`` (an ``ObjectStoragePath`` or ``UPath``); its path."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r}: expected one of {OUTCOMES}")
    doc = {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "attempt": attempt,
        "conn_id": conn_id,
        "outcome": outcome,
        "detail": detail,
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "summary": dict(summary or {}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / record_name(task_id, attempt)
    path.fs.pipe_file(path.path, json.dumps(doc, sort_keys=True, default=str).encode())
    return path


@dataclass(frozen=True)
class RunIdentity:
    """Which task attempt a record is of (its DAG decides who may read it)."""

    dag_id: str
    run_id: str
    task_id: str
    attempt: int
    conn_id: str | None


def run_and_record(
    job: Callable[[], dict[str, Any]],
    identity: RunIdentity,
    *,
    folder: Any,
    outcome_of: Callable[[dict[str, Any]], tuple[str, str | None]],
    stops: tuple[type[BaseException], ...],
    log: TaskLog,
) -> dict[str, Any]:
    """Run ``job`` and record what the run was in ``folder``: ``outcome_of(summary)`` on
    success; ``stopped`` for one of ``stops`` (a guardrail: a stop before any write); ``failed``
    with the error's first line otherwise. A deferral records nothing (the task runs again); a
    record that cannot be written is logged, never raised over the job's own outcome.

    :param folder: where the record goes (an ``ObjectStoragePath`` or ``UPath``).
    :param stops: the errors that are a stop, not a failure.
    """

    def record(outcome: str, detail: str | None, summary: dict[str, Any] | None) -> None:
        try:
            write_run_record(
                folder,
                dag_id=identity.dag_id,
                run_id=identity.run_id,
                task_id=identity.task_id,
                attempt=identity.attempt,
                conn_id=identity.conn_id,
                outcome=outcome,
                detail=detail,
                summary=summary,
            )
        except Exception as err:  # the job's own outcome is what matters
            log.warning("Could not record the run's outcome: %s", first_line(err))

    try:
        summary = job()
    except stops as err:
        record("stopped", first_line(err).split(": ", 1)[-1], None)
        raise
    except Exception as err:
        if type(err).__name__ != "TaskDeferred":
            record("failed", first_line(err), None)
        raise
    outcome, detail = outcome_of(summary)
    record(outcome, detail, summary)
    return summary
