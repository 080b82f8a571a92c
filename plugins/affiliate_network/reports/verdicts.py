"""Reconcile every day a run landed, and say per partition what was found (no Airflow here).

A run lands its day and re-lands the trailing days; each of them gets a verdict in the same run,
with the same settings (:func:`reconcile_days`, one call of
:func:`~affiliate_network.reports.reconcile.reconcile_day` per day compared):

* ``reconciled``: the partition's content equals the network's report within the tolerance;
* ``differs``: it does not (under ``on_mismatch="fail"`` the task fails after every day was
  compared, naming each differing day);
* ``not_compared``: no comparison could be made (no complete partition, a filtered pull or a
  JSON Lines partition), with the reason.

A day the run has just re-pulled and found unchanged (same content checksum: the network still
serves exactly the records landed) keeps a verdict that still holds: its comparison file names
that checksum, it reconciled, and it was made with the same tolerance. It is not compared
again: the report it matched aggregates the same records. Any other day is compared again, a
``differs`` verdict included (the network's report may have caught up), and so is a day that
was not re-pulled just before (its landed records may be stale while the network moved on). A
comparison file names the checksum it was made for, and a comparison of other content is never
taken for the partition's (:func:`stored_verdict`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Literal

import orjson

from affiliate_network.exceptions import ConfigValidationError, ReconciliationError
from affiliate_network.partitions.manifest import read_manifest
from affiliate_network.reports.reconcile import (
    COMPARISON_NAME,
    DEFAULT_MAX_CELLS,
    Tolerance,
    reconcile_day,
)
from affiliate_network.reports.storage import as_storage_path, partition_path

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

    from affiliate_network.helpers.tasklog import TaskLog
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

__all__ = ["DayVerdict", "VerdictName", "reconcile_days", "stored_verdict"]

#: What a partition's comparison found.
VerdictName = Literal["reconciled", "differs", "not_compared"]

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class DayVerdict:
    """One partition's verdict (small: for XCom and the asset event).

    :param date: the day (``YYYY-MM-DD``).
    :param verdict: ``reconciled``, ``differs`` or ``not_compared``.
    :param reason: why, in a sentence (what was compared, or why nothing was).
    :param checksum: the content checksum the verdict is about (``None``: no partition).
    :param comparison: the comparison file (``None``: not compared).
    :param compared_at: when the comparison was made (ISO 8601 UTC).
    :param kept: the day's content was unchanged and its earlier verdict still holds: not
        compared again in this run.
    :param differences: cells beyond the tolerance.
    """

    date: str
    verdict: VerdictName
    reason: str
    checksum: str | None = None
    comparison: str | None = None
    compared_at: str | None = None
    kept: bool = False
    differences: int | None = None

    @property
    def reconciled(self) -> bool | None:
        """``True``/``False`` when compared, ``None`` when not."""
        return None if self.verdict == "not_compared" else self.verdict == "reconciled"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``reconciled`` (true, false or null)."""
        return {**asdict(self), "reconciled": self.reconciled}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> DayVerdict:
        """From :meth:`to_dict` (an XCom value)."""
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in doc.items() if k in fields})

    @classmethod
    def not_compared(cls, date: str, reason: str, checksum: str | None = None) -> DayVerdict:
        """A day nothing was compared for."""
        return cls(date=date, verdict="not_compared", reason=reason, checksum=checksum)


def _comparison_doc(partition: ObjectStoragePath) -> dict[str, Any] | None:
    path = partition / COMPARISON_NAME
    try:
        doc = orjson.loads(path.fs.cat_file(path.path))
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def stored_verdict(
    partition: ObjectStoragePath | str, checksum: str, tolerance: Tolerance | None = None
) -> DayVerdict | None:
    """The verdict of the partition's comparison file, if it was made for ``checksum``.

    :param partition: the partition folder.
    :param checksum: the content checksum the partition has now.
    :param tolerance: when given, a comparison made with another tolerance does not count.
    :returns: ``None`` when there is no comparison of that content.
    """
    part = as_storage_path(partition)
    doc = _comparison_doc(part)
    if doc is None or doc.get("manifest_checksum") != checksum:
        return None
    if tolerance is not None and not _same_tolerance(doc.get("tolerance"), tolerance):
        return None
    reconciled = doc.get("reconciled")
    if not isinstance(reconciled, bool):
        return None
    differing = doc.get("differing")
    return DayVerdict(
        date=str(doc.get("date") or part.name.partition("=")[2]),
        verdict="reconciled" if reconciled else "differs",
        reason=f"compared with the network's report at {doc.get('compared_at')}",
        checksum=checksum,
        comparison=str(part / COMPARISON_NAME),
        compared_at=doc.get("compared_at"),
        differences=len(differing) if isinstance(differing, list) else None,
    )


def _same_tolerance(recorded: Any, tolerance: Tolerance) -> bool:
    if not isinstance(recorded, Mapping):
        return False
    try:
        money = Decimal(str(recorded.get("money")))
        count = int(str(recorded.get("count")))
    except (InvalidOperation, ValueError):
        return False
    return money == tolerance.money and count == tolerance.count


def reconcile_days(
    hook: AffiliateNetworkHook,
    base: str | os.PathLike[str] | ObjectStoragePath,
    days: Iterable[dt.date | str],
    *,
    dataset: str = "conversions",
    tolerance: Tolerance | None = None,
    on_mismatch: str = "fail",
    max_cells: int = DEFAULT_MAX_CELLS,
    repulled_unchanged: Collection[str] = (),
    settle: Callable[[str], object] | None = None,
    log: TaskLog = _LOG,
) -> list[DayVerdict]:
    """Reconcile each of ``days`` with the network's report; one verdict per day, oldest first.

    Every day is compared (or keeps its still-valid verdict) before a difference fails the
    call, so each day's comparison file is written whatever another day found.

    :param hook: a network-portal hook.
    :param base: the output base.
    :param days: the days landed or re-landed (duplicates are compared once).
    :param dataset: the dataset folder.
    :param tolerance: allowed absolute differences (default: exact).
    :param on_mismatch: ``fail`` (raise after every day was compared) or ``warn``.
    :param max_cells: differing cells named per day in the error.
    :param repulled_unchanged: days (``YYYY-MM-DD``) the caller has just re-pulled and found
        unchanged: each keeps a verdict that still holds (see the module doc); every other
        day is compared.
    :param settle: re-lands a day (``YYYY-MM-DD``) that differs, once, before its verdict: a
        status the network changed after the day was landed (another run's approvals) is a
        change to land, not a lost row; a difference that stays after the re-pull is one.
        ``None``: the first comparison is the verdict.
    :param log: where progress goes.
    :raises ReconciliationError: a day differs and ``on_mismatch="fail"``; the message names
        every differing day, ``day`` is the first of them.
    :raises ConfigValidationError: a bad ``on_mismatch`` or tolerance.
    """
    from affiliate_network.reports.reconcile import check_on_mismatch

    check_on_mismatch(on_mismatch)
    tolerance = tolerance or Tolerance()
    texts = sorted(
        {d.isoformat() if isinstance(d, dt.date) else dt.date.fromisoformat(d).isoformat()
         for d in days}
    )  # fmt: skip
    if not texts:
        return []
    verdicts: list[DayVerdict] = []
    failures: list[ReconciliationError] = []
    for day in texts:
        keep = day in repulled_unchanged
        verdict, failure = _reconcile_one(
            hook, base, day, dataset, tolerance, on_mismatch, max_cells, keep, log
        )
        if failure is not None and settle is not None:
            log.warning(
                "%s differs from the network's report: re-pulling it once (a status the "
                "network changed after the day was landed settles; a lost row does not)",
                day,
            )
            settle(day)
            verdict, failure = _reconcile_one(
                hook, base, day, dataset, tolerance, on_mismatch, max_cells, False, log
            )
        verdicts.append(verdict)
        if failure is not None:
            failures.append(failure)
    counts = {n: sum(v.verdict == n for v in verdicts) for n in ("reconciled", "differs")}
    log.info(
        "Reconciled %d day(s) of %s: %d reconcile (%d kept from an earlier run), %d differ, "
        "%d not compared",
        len(verdicts),
        dataset,
        counts["reconciled"],
        sum(v.kept for v in verdicts),
        counts["differs"],
        len(verdicts) - counts["reconciled"] - counts["differs"],
    )
    if failures:
        raise _combined(failures)
    return verdicts


def _reconcile_one(
    hook: AffiliateNetworkHook,
    base: str | os.PathLike[str] | ObjectStoragePath,
    day: str,
    dataset: str,
    tolerance: Tolerance,
    on_mismatch: str,
    max_cells: int,
    keep: bool,
    log: TaskLog,
) -> tuple[DayVerdict, ReconciliationError | None]:
    part = partition_path(base, dataset, date=day)
    manifest = read_manifest(part)
    if manifest is None:
        return DayVerdict.not_compared(day, f"{part} has no complete partition"), None
    checksum = manifest.content_checksum
    if keep:
        kept = stored_verdict(part, checksum, tolerance)
        if kept is not None and kept.verdict == "reconciled":
            log.info("%s unchanged since its comparison at %s: kept", day, kept.compared_at)
            reason = f"unchanged since it reconciled at {kept.compared_at}"
            return DayVerdict(**{**asdict(kept), "kept": True, "reason": reason}), None
    try:
        summary = reconcile_day(
            hook,
            base,
            day,
            dataset=dataset,
            tolerance=tolerance,
            on_mismatch=on_mismatch,
            max_cells=max_cells,
            log=log,
        )
    except ReconciliationError as err:
        return _compared(part, day, checksum, False, err.differences, err.comparison_path), err
    except ConfigValidationError as err:
        # A filtered pull or a JSON Lines partition: nothing of the network's whole report
        # to compare with. Said per partition, not a failure of the other days.
        log.warning("%s not compared: %s", day, err)
        return DayVerdict.not_compared(day, str(err), checksum), None
    reconciled = bool(summary.get("reconciled"))
    return _compared(
        part, day, checksum, reconciled, summary.get("differences"), summary.get("comparison")
    ), None


def _compared(
    part: ObjectStoragePath,
    day: str,
    checksum: str,
    reconciled: bool,
    differences: Any,
    comparison: Any,
) -> DayVerdict:
    doc = _comparison_doc(part) or {}
    when = doc.get("compared_at")
    return DayVerdict(
        date=day,
        verdict="reconciled" if reconciled else "differs",
        reason=(
            "equal to the network's report within the tolerance"
            if reconciled
            else f"{differences} cell(s) differ from the network's report beyond the tolerance"
        ),
        checksum=checksum,
        comparison=None if comparison is None else str(comparison),
        compared_at=when if isinstance(when, str) else None,
        differences=differences if isinstance(differences, int) else None,
    )


def _combined(failures: list[ReconciliationError]) -> ReconciliationError:
    """One error for every differing day (the first day's fields, every day's message)."""
    first = failures[0]
    if len(failures) == 1:
        return first
    days = ", ".join(str(f.day) for f in failures)
    message = f"{len(failures)} days do not reconcile ({days}): " + " | ".join(
        str(f) for f in failures
    )
    return ReconciliationError(
        message,
        day=first.day,
        cells=[c for f in failures for c in f.cells],
        differences=sum(f.differences or 0 for f in failures),
        totals=first.totals,
        comparison_path=first.comparison_path,
    )
