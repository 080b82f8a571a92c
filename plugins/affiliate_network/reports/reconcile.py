"""Reconcile a landed day with the network's own aggregated report (no Airflow here).

After a day lands (``<base>/<dataset>/date=YYYY-MM-DD/``), :func:`reconcile_day` asks the
network's aggregated report (``POST /networks/reporting/entity/table``, columns ``affiliate``
and ``offer``: neither is granular, so no query of the hourly granular quota is spent) for the
same day, timezone and currency the partition was pulled with (its manifest's ``request``), and
compares per (affiliate, offer) cell and in total:

* ``cv``: the landed base conversions (``is_event`` false) whose status is ``approved``;
* ``payout`` and ``revenue``: the sums of the landed approved rows, conversions and events
  (the report counts event money in ``payout``/``revenue`` and events apart in ``event``).

What the report counts is documented in ``docs/api-decisions.md`` ("Reconciliation"); the
statuses it counts are a reading of the public pages, not a stated rule, so they are one
constant here (:data:`COUNTED_STATUS`).

Money is exact on both sides (landed ``decimal128``; the report's JSON numbers read through
their text), so the default tolerance is zero. The comparison is written beside the manifest
as :data:`COMPARISON_NAME` (not a data file: manifests, ``is_complete`` and ``partition_files``
never list it; a republished partition drops it). Beyond the tolerance the job raises
:class:`~affiliate_network.exceptions.ReconciliationError` (``on_mismatch="fail"``) or logs a
warning and returns ``reconciled: false`` (``"warn"``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Literal

import orjson

from affiliate_network.exceptions import (
    AffiliateNetworkError,
    ConfigValidationError,
    ReconciliationError,
    StorageError,
)

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.tasklog import TaskLog

#: The comparison file beside ``_manifest.json`` (leading ``_``: no reader takes it for data).
COMPARISON_NAME = "_reconciliation.json"
#: The status the network's report counts in ``cv``/``payout``/``revenue`` (a choice from the
#: public pages; see the module docstring and docs/api-decisions.md).
COUNTED_STATUS = "approved"
#: Report columns of the comparison: one row per (affiliate, offer) couple, not granular.
REPORT_COLUMNS = ("affiliate", "offer")
#: Differing cells named in the error and the log (the comparison file has them all).
DEFAULT_MAX_CELLS = 20
#: Default tolerances: exact. Money is exact decimal on both sides and a count is a count.
DEFAULT_MONEY_TOLERANCE = Decimal(0)
DEFAULT_COUNT_TOLERANCE = 0
#: What a difference beyond the tolerance does.
OnMismatch = Literal["fail", "warn"]
ON_MISMATCH: tuple[str, ...] = ("fail", "warn")
_MONEY = ("payout", "revenue")
_FIELDS = ("cv", *_MONEY)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tolerance:
    """How far a cell (and the total) may differ and still reconcile.

    :param money: absolute difference allowed in ``payout`` and in ``revenue`` (currency units).
    :param count: absolute difference allowed in ``cv``.
    """

    money: Decimal = DEFAULT_MONEY_TOLERANCE
    count: int = DEFAULT_COUNT_TOLERANCE

    @classmethod
    def of(cls, money: Any = None, count: Any = None) -> Tolerance:
        """From arguments as a DAG param or a template gives them (``"0.01"``, ``1``).

        :raises ConfigValidationError: a negative or non-numeric value.
        """
        try:
            m = DEFAULT_MONEY_TOLERANCE if money in (None, "") else Decimal(str(money))
            c = DEFAULT_COUNT_TOLERANCE if count in (None, "") else int(str(count))
        except (InvalidOperation, ValueError):
            raise ConfigValidationError(
                f"reconciliation tolerance: money {money!r} and count {count!r} must be numbers"
            ) from None
        if not m.is_finite() or m < 0 or c < 0:
            raise ConfigValidationError("reconciliation tolerances must be >= 0")
        return cls(m, c)

    def allows(self, field: str, difference: Decimal | int) -> bool:
        """Whether ``difference`` of ``field`` is within the tolerance."""
        magnitude = Decimal(difference).copy_abs()
        return magnitude <= (self.count if field == "cv" else self.money)


def _check_on_mismatch(value: str) -> OnMismatch:
    if value not in ON_MISMATCH:
        raise ConfigValidationError(f"on_mismatch {value!r}: expected one of {list(ON_MISMATCH)}")
    return value  # type: ignore[return-value]


def _zero() -> dict[str, Any]:
    return {"cv": 0, "payout": Decimal(0), "revenue": Decimal(0)}


def landed_cells(partition: ObjectStoragePath | str) -> dict[tuple[int, int], dict[str, Any]]:
    """Per (affiliate, offer): approved conversions and the approved rows' payout and revenue.

    :param partition: a complete Parquet conversion partition.
    """
    import pyarrow.compute as pc

    from affiliate_network.reports.storage import read_partition

    table = read_partition(partition)
    table = table.filter(pc.equal(table["status"], COUNTED_STATUS))
    cells: dict[tuple[int, int], dict[str, Any]] = {}
    if table.num_rows == 0:
        return cells
    conversion = pc.invert(pc.fill_null(table["is_event"], False))
    table = table.append_column("cv", pc.cast(conversion, "int64"))
    grouped = table.group_by(["rel_network_affiliate_id", "rel_network_offer_id"]).aggregate(
        [("cv", "sum"), ("payout", "sum"), ("revenue", "sum")]
    )
    for row in grouped.to_pylist():
        key = (int(row["rel_network_affiliate_id"]), int(row["rel_network_offer_id"]))
        cells[key] = {
            "cv": int(row["cv_sum"] or 0),
            "payout": Decimal(row["payout_sum"] or 0),
            "revenue": Decimal(row["revenue_sum"] or 0),
        }
    return cells


def _amount(value: Any, what: str) -> Decimal:
    """A report amount exactly as printed (a float's shortest text is the JSON number's)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise AffiliateNetworkError(f"network entity table: {what} is not a number ({value!r})")
    try:
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise AffiliateNetworkError(f"network entity table: {what} is not a number") from None
    if not amount.is_finite():
        raise AffiliateNetworkError(f"network entity table: {what} is not finite")
    return amount


def network_cells(table: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """Per (affiliate, offer): the report's ``cv``, ``payout`` and ``revenue``.

    :param table: the ``table`` rows of an ``affiliate``/``offer`` entity-table answer.
    :raises AffiliateNetworkError: a row without both ids or without the metrics.
    """
    cells: dict[tuple[int, int], dict[str, Any]] = {}
    for n, row in enumerate(table):
        ids = {
            c.get("column_type"): c.get("id")
            for c in row.get("columns") or ()
            if isinstance(c, Mapping)
        }
        metrics = row.get("reporting")
        try:
            key = (int(str(ids["affiliate"])), int(str(ids["offer"])))
        except (KeyError, ValueError):
            raise AffiliateNetworkError(
                f"network entity table row {n} has no affiliate and offer ids: {ids!r}"
            ) from None
        if not isinstance(metrics, Mapping):
            raise AffiliateNetworkError(f"network entity table row {n} has no 'reporting'")
        cell = cells.setdefault(key, _zero())
        cell["cv"] += int(metrics.get("cv") or 0)
        for name in _MONEY:
            cell[name] += _amount(metrics.get(name, 0), f"row {n} {name}")
    return cells


def _decimal_text(value: Decimal) -> str:
    """An amount as plain decimal text without trailing zeros (``13736.61``, ``-2``)."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _text(cell: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (_decimal_text(v) if isinstance(v, Decimal) else v) for k, v in cell.items()}


def _difference(landed: Mapping[str, Any], network: Mapping[str, Any]) -> dict[str, Any]:
    return {f: network[f] - landed[f] for f in _FIELDS}


def compare(
    landed: Mapping[tuple[int, int], Mapping[str, Any]],
    network: Mapping[tuple[int, int], Mapping[str, Any]],
    tolerance: Tolerance,
) -> dict[str, Any]:
    """The comparison document: every cell, the differing ones, and the totals.

    A difference is ``network - landed`` (positive: the network reports more than landed).
    """
    rows: list[dict[str, Any]] = []
    differing: list[dict[str, Any]] = []
    total_landed, total_network = _zero(), _zero()
    for key in sorted(set(landed) | set(network)):
        mine, theirs = landed.get(key) or _zero(), network.get(key) or _zero()
        for f in _FIELDS:
            total_landed[f] += mine[f]
            total_network[f] += theirs[f]
        diff = _difference(mine, theirs)
        beyond = [f for f in _FIELDS if not tolerance.allows(f, diff[f])]
        row = {
            "affiliate": key[0],
            "offer": key[1],
            "landed": _text(mine),
            "network": _text(theirs),
            "difference": _text(diff),
            "beyond_tolerance": beyond,
        }
        rows.append(row)
        if beyond:
            differing.append(row)
    total_diff = _difference(total_landed, total_network)
    total_beyond = [f for f in _FIELDS if not tolerance.allows(f, total_diff[f])]
    return {
        "cells": rows,
        "differing": differing,
        "totals": {
            "landed": _text(total_landed),
            "network": _text(total_network),
            "difference": _text(total_diff),
            "beyond_tolerance": total_beyond,
        },
    }


def _write_atomically(path: ObjectStoragePath, data: bytes) -> None:
    """Write ``data`` so a reader sees the old file or the new one, never a part."""
    if (path.protocol or "") in ("", "file", "local"):
        folder = os.path.dirname(path.path)
        fd, tmp = tempfile.mkstemp(prefix=".reconciliation.", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return
    # An object store's PUT is atomic: the object appears whole or not at all.
    path.fs.pipe_file(path.path, data)


def _cell_line(row: Mapping[str, Any]) -> str:
    parts = [
        f"{f} landed {row['landed'][f]} network {row['network'][f]} "
        f"(difference {row['difference'][f]})"
        for f in row["beyond_tolerance"]
    ]
    return f"affiliate {row['affiliate']} offer {row['offer']}: " + "; ".join(parts)


def reconcile_day(
    hook: AffiliateNetworkHook,
    base: str | os.PathLike[str] | ObjectStoragePath,
    day: dt.date | str,
    *,
    dataset: str = "conversions",
    tolerance: Tolerance | None = None,
    on_mismatch: str = "fail",
    max_cells: int = DEFAULT_MAX_CELLS,
    log: TaskLog = log,
) -> dict[str, Any]:
    """Compare one landed day with the network's aggregated report; write the comparison.

    :param hook: a network-portal hook.
    :param base: the output base the day was landed under.
    :param day: the day (``YYYY-MM-DD``) in the timezone it was pulled in.
    :param dataset: the dataset folder (``conversions``).
    :param tolerance: allowed absolute differences (default: exact).
    :param on_mismatch: ``fail`` (raise) or ``warn`` (log, return ``reconciled: false``).
    :param max_cells: differing cells named in the error and the log.
    :param log: where progress and warnings go.
    :returns: ``{date, path, comparison, reconciled, cells, differences, totals,
        granular_queries}``, small enough for XCom.
    :raises ReconciliationError: a difference beyond the tolerance and ``on_mismatch="fail"``.
    :raises StorageError: the day has no complete partition.
    :raises ConfigValidationError: a filtered pull or a JSON Lines partition (nothing to
        compare with the whole network), or a bad setting.
    """
    from affiliate_network.reports.storage import partition_path, read_manifest

    mode = _check_on_mismatch(on_mismatch)
    tolerance = tolerance or Tolerance()
    day_text = (
        day.isoformat() if isinstance(day, dt.date) else dt.date.fromisoformat(day).isoformat()
    )
    part = partition_path(base, dataset, date=day_text)
    manifest = read_manifest(part)
    if manifest is None:
        raise StorageError(f"{part}: no complete partition to reconcile (no manifest)")
    if manifest.format != "parquet":
        raise ConfigValidationError(f"{part} is {manifest.format}: only Parquet days reconcile")
    request = manifest.request or {}
    if request.get("filters") or request.get("search_terms"):
        raise ConfigValidationError(
            f"{part} was pulled with filters or search terms: it cannot be compared with the "
            "network's whole report"
        )
    timezone_id = request.get("timezone_id")
    if timezone_id is None:
        raise ConfigValidationError(f"{part}: its manifest names no timezone_id")
    landed = landed_cells(part)
    granular_before = hook.granular_budget().used
    table = hook.network_entity_table(
        from_date=day_text,
        to_date=day_text,
        columns=list(REPORT_COLUMNS),
        timezone_id=int(timezone_id),
        currency_id=request.get("currency_id") or None,
    )
    granular_spent = hook.granular_budget().used - granular_before
    network = network_cells(table)
    result = compare(landed, network, tolerance)
    events_landed = bool(request.get("show_events", False))
    if not events_landed:
        # Event money is in the report's payout/revenue but not in this partition.
        log.warning("%s was pulled without events: its money cannot match the report", part)
    differing = result["differing"]
    reconciled = not differing and not result["totals"]["beyond_tolerance"]
    comparison = part / COMPARISON_NAME
    doc = {
        "date": day_text,
        "dataset": dataset,
        "reconciled": reconciled,
        "compared_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "manifest_checksum": manifest.content_checksum,
        "request": {
            "endpoint": "POST /networks/reporting/entity/table",
            "columns": list(REPORT_COLUMNS),
            "timezone_id": int(timezone_id),
            "currency_id": request.get("currency_id") or None,
        },
        "counted_status": COUNTED_STATUS,
        "events_landed": events_landed,
        "tolerance": {"money": str(tolerance.money), "count": tolerance.count},
        "on_mismatch": mode,
        **result,
    }
    _write_atomically(comparison, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    summary = {
        "date": day_text,
        "path": str(part),
        "comparison": str(comparison),
        "reconciled": reconciled,
        "cells": len(result["cells"]),
        "differences": len(differing),
        "totals": {k: result["totals"][k] for k in ("landed", "network", "difference")},
        "granular_queries": granular_spent,
    }
    if reconciled:
        log.info(
            "%s reconciles with the network's report: %d cells, totals %s",
            day_text,
            len(result["cells"]),
            result["totals"]["landed"],
        )
        return summary
    named = differing[: max(0, max_cells)]
    lines = [_cell_line(r) for r in named]
    if not differing:
        lines.append(f"totals beyond tolerance: {result['totals']['difference']}")
    more = len(differing) - len(named)
    message = (
        f"{day_text} does not reconcile with the network's report: {len(differing)} of "
        f"{len(result['cells'])} (affiliate, offer) cells differ beyond the tolerance "
        f"(money {tolerance.money}, count {tolerance.count}); "
        + "; ".join(lines)
        + (f"; and {more} more" if more > 0 else "")
        + f". Comparison: {comparison}. A lost page or a late status change: re-pull the day "
        "and reconcile again; a difference that persists: ask the network."
    )
    if mode == "warn":
        log.warning("%s", message)
        return summary
    raise ReconciliationError(
        message,
        day=day_text,
        cells=[_cell_line(r) for r in named],
        differences=len(differing),
        totals={k: result["totals"][k] for k in ("landed", "network", "difference")},
        comparison_path=str(comparison),
    )
