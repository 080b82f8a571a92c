"""Reconcile a landed day with the network's own aggregated report (no Airflow here).

After a day lands (``<base>/<dataset>/date=YYYY-MM-DD/``), :func:`reconcile_day` asks the
network's aggregated report (``POST /networks/reporting/entity/table``, columns ``affiliate``
and ``offer``: neither is granular, so no query of the hourly granular quota is spent) for the
same day and timezone the partition was pulled with (its manifest's ``request``), and compares
per (affiliate, offer, currency) cell and in total per currency:

* ``cv``: the landed base conversions (``is_event`` false) whose status is ``approved``;
* ``payout`` and ``revenue``: the sums of the landed approved rows, conversions and events
  (the report counts event money in ``payout``/``revenue`` and events apart in ``event``).

That is a day pulled with conversions and events. A day pulled with one part only is compared
with the matching part of the report (:data:`PARTS`): a conversions-only day by ``cv``, an
events-only day by ``event`` (the approved landed events). The report does not split its money
by part (``payout`` and ``revenue`` hold both, and no documented column or filter tells them
apart), so such a day's money is **not comparable** and not compared: the comparison says so
(``not_compared``), and a day whose money alone "differs" neither fails nor asks for a re-pull
that could never make it match.

Money is compared per currency, never converted and never added across currencies. Raw
conversions carry their offer's own currency; the report converts to the request's
``currency_id``. So each landed currency ``C`` is asked for in ``currency_id=C``, restricted
(``offer`` filters) to the offers whose landed rows pay in ``C``: their amounts need no
conversion and compare exactly. One ``offer`` column request lists the offers with data that
day; the cells of an offer with nothing landed are asked for too (in the manifest's currency)
and differ unless the network counts nothing there. A capped answer (``incomplete_results``,
10,000 rows) is split by halving its offer set, then its affiliate set, until every answer is
whole (:class:`NetworkReport`).

The landed side reads only the columns it needs, batch by batch
(:func:`~affiliate_network.partitions.read.iter_partition_columns`), folding each batch into
running per-cell sums: memory holds one batch and the cells, whatever the day's size.

What the report counts is documented in ``docs/api-decisions.md`` ("Reconciliation"); the
statuses it counts are a reading of the public pages, not a stated rule, so they are one
constant here (:data:`COUNTED_STATUS`).

Money is exact on both sides (landed ``decimal128``; the report's JSON numbers read through
their text by the hook), so the default tolerance is zero. The comparison is written beside
the manifest as :data:`COMPARISON_NAME` (not a data file: manifests, ``is_complete`` and
``partition_files`` never list it; a republished partition drops it). Beyond the tolerance the
job raises :class:`~affiliate_network.exceptions.ReconciliationError` (``on_mismatch="fail"``)
or logs a warning and returns ``reconciled: false`` (``"warn"``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Literal

import orjson

from affiliate_network.exceptions import (
    AffiliateNetworkError,
    ConfigValidationError,
    ReconciliationError,
    ReportRowLimitError,
    StorageError,
)

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

    from affiliate_network.helpers.tasklog import TaskLog
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.reports.pull import ConversionPull

#: The comparison file beside ``_manifest.json`` (leading ``_``: no reader takes it for data).
COMPARISON_NAME = "_reconciliation.json"
#: The status the network's report counts in ``cv``/``payout``/``revenue`` (a choice from the
#: public pages; see the module docstring and docs/api-decisions.md).
COUNTED_STATUS = "approved"
#: Report columns of the comparison: one row per (affiliate, offer) couple, not granular.
REPORT_COLUMNS = ("affiliate", "offer")
#: Filter types a capped answer is split by, in this order (offers first: a currency's
#: request is already an offer set; affiliates when one offer alone has too many rows).
SPLIT_BY = ("offer", "affiliate")
#: Landed columns the comparison reads (nothing else of the partition is loaded).
LANDED_COLUMNS = (
    "rel_network_affiliate_id",
    "rel_network_offer_id",
    "currency_id",
    "status",
    "is_event",
    "payout",
    "revenue",
)
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
#: Count fields (compared with the count tolerance).
_COUNTS = ("cv", "event")
#: What a pull landed (its ``show_conversions``, ``show_events``) -> the part's name and the
#: report fields compared for it. The report's money holds conversions and events together.
PARTS: dict[tuple[bool, bool], tuple[str, tuple[str, ...]]] = {
    (True, True): ("conversions and events", _FIELDS),
    (True, False): ("conversions", ("cv",)),
    (False, True): ("events", ("event",)),
}
#: Why a one-part day's money is not compared (the comparison file and the log say it).
MONEY_NOT_COMPARABLE = (
    "the network's report sums conversions and events together in payout and revenue (no "
    "documented column or filter splits them), so the money of a day pulled with {part} only "
    "is not comparable with it"
)
#: Summed landed money: 38 digits, so no sum of ``decimal128(18, 6)`` amounts overflows.
_SUM_PRECISION = 38

#: One compared cell: (affiliate, offer, currency). The currency is ``None`` for an offer with
#: no landed currency (nothing of it landed, or its rows carry none).
CellKey = tuple[int | None, int | None, str | None]

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
        return magnitude <= (self.count if field in _COUNTS else self.money)


def check_on_mismatch(value: str) -> OnMismatch:
    """``value`` as an :data:`OnMismatch`.

    :raises ConfigValidationError: neither ``fail`` nor ``warn``.
    """
    if value not in ON_MISMATCH:
        raise ConfigValidationError(f"on_mismatch {value!r}: expected one of {list(ON_MISMATCH)}")
    return value  # type: ignore[return-value]


def _zero() -> dict[str, Any]:
    return {"cv": 0, "event": 0, "payout": Decimal(0), "revenue": Decimal(0)}


def _fold(batch: Any) -> Any:
    """A batch of :data:`LANDED_COLUMNS` as per-cell sums: ``cv``, ``event`` (approved events),
    approved ``payout`` and ``revenue`` per (affiliate, offer, currency). Every landed cell is
    kept (zeros included): its currency says which currency's request its offer belongs to."""
    import pyarrow as pa
    import pyarrow.compute as pc

    counted = pc.fill_null(pc.equal(batch["status"], COUNTED_STATUS), False)
    is_event = pc.fill_null(batch["is_event"], False)
    conversion = pc.and_(counted, pc.invert(is_event))
    columns = {
        "affiliate": batch["rel_network_affiliate_id"],
        "offer": batch["rel_network_offer_id"],
        "currency": batch["currency_id"],
        "cv": pc.cast(conversion, pa.int64()),
        "event": pc.cast(pc.and_(counted, is_event), pa.int64()),
    }
    for name in _MONEY:
        wide = pa.decimal128(_SUM_PRECISION, batch.schema.field(name).type.scale)
        amount = pc.fill_null(pc.cast(batch[name], wide), pa.scalar(Decimal(0), wide))
        columns[name] = pc.if_else(counted, amount, pa.scalar(Decimal(0), wide))
    return _sum_cells(pa.table(columns))


def _sum_cells(table: Any) -> Any:
    """Rows of (affiliate, offer, currency, cv, payout, revenue) summed per cell."""
    grouped = table.group_by(["affiliate", "offer", "currency"]).aggregate(
        [(f, "sum") for f in ("cv", "event", *_MONEY)]
    )
    return grouped.rename_columns([n.removesuffix("_sum") for n in grouped.column_names])


def landed_cells(
    partition: ObjectStoragePath | str, *, batch_rows: int | None = None
) -> dict[CellKey, dict[str, Any]]:
    """Per (affiliate, offer, currency): approved conversions (``cv``), approved events
    (``event``) and the approved rows' payout and revenue, in the rows' own ``currency_id``.

    Reads only :data:`LANDED_COLUMNS`, batch by batch, folding each into the running sums
    (memory: one batch and the cells). Every landed cell is there, zeros included, so each
    landed offer's currency is known.

    :param partition: a complete Parquet conversion partition.
    :param batch_rows: rows read and folded at a time (default
        :data:`~affiliate_network.partitions.read.COLUMN_BATCH_ROWS`).
    """
    import pyarrow as pa

    from affiliate_network.partitions.read import COLUMN_BATCH_ROWS, iter_partition_columns

    running: Any = None
    batches = iter_partition_columns(
        partition, LANDED_COLUMNS, batch_rows=batch_rows or COLUMN_BATCH_ROWS
    )
    for batch in batches:
        if batch.num_rows == 0:
            continue
        folded = _fold(batch)
        running = folded if running is None else _sum_cells(pa.concat_tables([running, folded]))
    cells: dict[CellKey, dict[str, Any]] = {}
    if running is None:
        return cells
    for row in running.to_pylist():
        key = (_id(row["affiliate"]), _id(row["offer"]), row["currency"] or None)
        cells[key] = {
            "cv": int(row["cv"] or 0),
            "event": int(row["event"] or 0),
            "payout": Decimal(row["payout"] or 0),
            "revenue": Decimal(row["revenue"] or 0),
        }
    return cells


def _id(value: Any) -> int | None:
    return None if value is None else int(value)


def _amount(value: Any, what: str) -> Decimal:
    """A report amount exactly as printed (the hook reads JSON numbers as ``Decimal``; a float
    from elsewhere is taken by its shortest text, the JSON number's up to 15 digits)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise AffiliateNetworkError(f"network entity table: {what} is not a number ({value!r})")
    try:
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise AffiliateNetworkError(f"network entity table: {what} is not a number") from None
    if not amount.is_finite():
        raise AffiliateNetworkError(f"network entity table: {what} is not finite")
    return amount


def network_cells(table: Iterable[Mapping[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """Per (affiliate, offer): the report's ``cv``, ``event``, ``payout`` and ``revenue``.

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
        for name in _COUNTS:
            cell[name] += int(metrics.get(name) or 0)
        for name in _MONEY:
            cell[name] += _amount(metrics.get(name, 0), f"row {n} {name}")
    return cells


@dataclass
class NetworkReport:
    """The network's ``affiliate``/``offer`` table of one day, asked for in whole answers.

    A capped answer (``ReportRowLimitError``: ``incomplete_results`` or 10,000 rows) is split:
    its offer set halved (a request without offer filter first learns its offers from an
    ``offer``-column table under the same filters), recursively until every answer is whole;
    when that offer list is itself capped, by the affiliate set the same way. One offer alone
    over the cap cannot be split (its affiliate list is as long as the capped table): that
    raises. Filter items are the documented ``{resource_type, filter_id_value}`` (one type ORs
    its values, two types AND).

    :param hook: a network-portal hook.
    :param day: the day (``YYYY-MM-DD``).
    :param timezone_id: the day's timezone.
    """

    hook: AffiliateNetworkHook
    day: str
    timezone_id: int
    #: Entity-table requests sent (whole and capped answers).
    requests: int = field(default=0, init=False)
    #: Capped answers split, per filter type halved (``{"offer": 3, "affiliate": 2}``).
    splits: dict[str, int] = field(default_factory=dict, init=False)
    _asked: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)

    def _table(
        self,
        columns: Sequence[str],
        currency: str | None,
        filters: Mapping[str, Sequence[int]],
    ) -> list[dict[str, Any]]:
        if any(len(ids) == 0 for ids in filters.values()):
            return []  # an empty id set selects nothing (no items would select everything)
        items = [
            {"resource_type": kind, "filter_id_value": str(i)}
            for kind, ids in filters.items()
            for i in ids
        ]
        self.requests += 1
        return self.hook.network_entity_table(
            from_date=self.day,
            to_date=self.day,
            columns=list(columns),
            timezone_id=self.timezone_id,
            currency_id=currency,
            filters=items,
        )

    def ids(
        self, kind: str, currency: str | None, filters: Mapping[str, Sequence[int]]
    ) -> tuple[int, ...] | None:
        """The ``kind`` ids (``offer``, ``affiliate``) with data under ``filters``, sorted;
        ``None`` when even that list is capped."""
        try:
            rows = self._table([kind], currency, filters)
        except ReportRowLimitError:
            return None
        found: set[int] = set()
        for n, row in enumerate(rows):
            ids = [c.get("id") for c in row.get("columns") or () if isinstance(c, Mapping)]
            try:
                found.add(int(str(ids[0])))
            except (IndexError, ValueError):
                raise AffiliateNetworkError(
                    f"network entity table row {n} has no {kind} id: {ids!r}"
                ) from None
        return tuple(sorted(found))

    def cells(
        self, currency: str | None, offers: Iterable[int] | None = None
    ) -> dict[tuple[int, int], dict[str, Any]]:
        """Per (affiliate, offer) in ``currency`` (``None``: the network's default), for
        ``offers`` only (``None``: every offer).

        :raises ReportRowLimitError: one affiliate and one offer still capped (cannot happen
            with one row per couple), or an unfiltered table whose offer and affiliate lists
            are both capped.
        """
        filters = {} if offers is None else {"offer": tuple(sorted(set(offers)))}
        rows = self._rows(currency, filters)
        self._asked.append(
            {"currency_id": currency, "offers": None if offers is None else len(filters["offer"])}
        )
        return network_cells(rows)

    def _rows(
        self, currency: str | None, filters: dict[str, tuple[int, ...]]
    ) -> list[dict[str, Any]]:
        try:
            return self._table(REPORT_COLUMNS, currency, filters)
        except ReportRowLimitError as capped:
            for kind in SPLIT_BY:
                ids = filters.get(kind)
                if ids is None:
                    # Under one id of the other type, this type's list is as long as the
                    # capped table itself: no use asking for it.
                    if any(len(v) == 1 for k, v in filters.items() if k != kind):
                        continue
                    ids = self.ids(kind, currency, filters)
                    if ids is None:
                        continue
                if len(ids) > 1:
                    self.splits[kind] = self.splits.get(kind, 0) + 1
                    half = len(ids) // 2
                    return self._rows(currency, {**filters, kind: ids[:half]}) + self._rows(
                        currency, {**filters, kind: ids[half:]}
                    )
                filters = {**filters, kind: ids}  # one id: nothing to halve in this type
            where = ", ".join(
                f"{kind} {v[0]}" if len(v) == 1 else f"{len(v)} {kind}s"
                for kind, v in filters.items()
            )
            raise ReportRowLimitError(
                f"the network entity table of {self.day} in {currency or 'the default currency'}"
                f" stays capped under {where or 'no filter'}: more (affiliate, offer) cells than"
                " one answer holds, and no smaller offer or affiliate list to split them by "
                "(one offer with more affiliates than the cap in a day)"
            ) from capped

    @property
    def asked(self) -> list[dict[str, Any]]:
        """What was asked: one entry per currency request (``currency_id``, offer count)."""
        return list(self._asked)


def _decimal_text(value: Decimal) -> str:
    """An amount as plain decimal text without trailing zeros (``13736.61``, ``-2``)."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _text(cell: Mapping[str, Any], fields: Sequence[str] = _FIELDS) -> dict[str, Any]:
    return {f: (_decimal_text(v) if isinstance(v := cell[f], Decimal) else v) for f in fields}


def _difference(
    landed: Mapping[str, Any], network: Mapping[str, Any], fields: Sequence[str] = _FIELDS
) -> dict[str, Any]:
    return {f: network[f] - landed[f] for f in fields}


def _order(key: CellKey) -> tuple[str, int, int]:
    affiliate, offer, currency = key
    return (currency or "", -1 if affiliate is None else affiliate, -1 if offer is None else offer)


@dataclass(frozen=True)
class Comparison:
    """Every compared cell, the differing ones and the totals per currency (amounts as text).

    :param cells: one row per (affiliate, offer, currency) cell.
    :param differing: the rows with a field beyond the tolerance.
    :param totals: per currency: ``landed``, ``network``, ``difference``, ``beyond_tolerance``.
    """

    cells: list[dict[str, Any]]
    differing: list[dict[str, Any]]
    totals: dict[str, dict[str, Any]]


def compare(
    landed: Mapping[CellKey, Mapping[str, Any]],
    network: Mapping[CellKey, Mapping[str, Any]],
    tolerance: Tolerance,
    fields: Sequence[str] = _FIELDS,
) -> Comparison:
    """The comparison document: every cell, the differing ones, and the totals per currency.

    A difference is ``network - landed`` (positive: the network reports more than landed).
    Cells without a currency (``None``) are compared but enter no currency's totals.

    :param landed: :func:`landed_cells` of the day.
    :param network: the network's cells (:func:`network_day`).
    :param tolerance: how far a field may differ.
    :param fields: the fields compared (the day's part: :data:`PARTS`); the others are
        neither shown nor judged.
    """
    rows: list[dict[str, Any]] = []
    differing: list[dict[str, Any]] = []
    sums: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for key in sorted(set(landed) | set(network), key=_order):
        affiliate, offer, currency = key
        mine, theirs = landed.get(key) or _zero(), network.get(key) or _zero()
        if currency is not None:
            total_landed, total_network = sums.setdefault(currency, (_zero(), _zero()))
            for f in fields:
                total_landed[f] += mine[f]
                total_network[f] += theirs[f]
        diff = _difference(mine, theirs, fields)
        beyond = [f for f in fields if not tolerance.allows(f, diff[f])]
        row = {
            "affiliate": affiliate,
            "offer": offer,
            "currency": currency,
            "landed": _text(mine, fields),
            "network": _text(theirs, fields),
            "difference": _text(diff, fields),
            "beyond_tolerance": beyond,
        }
        rows.append(row)
        if beyond:
            differing.append(row)
    totals: dict[str, dict[str, Any]] = {}
    for currency in sorted(sums):
        total_landed, total_network = sums[currency]
        total_diff = _difference(total_landed, total_network, fields)
        totals[currency] = {
            "landed": _text(total_landed, fields),
            "network": _text(total_network, fields),
            "difference": _text(total_diff, fields),
            "beyond_tolerance": [f for f in fields if not tolerance.allows(f, total_diff[f])],
        }
    return Comparison(rows, differing, totals)


def _write_atomically(path: ObjectStoragePath, data: bytes) -> None:
    """Write ``data`` so a reader sees the old file or the new one, never a part."""
    if (path.protocol or "") in ("", "file", "local"):
        folder = os.path.dirname(path.path)
        # Not mkstemp (always 0600): the comparison is read like the data beside it (umask).
        tmp = os.path.join(folder, f".reconciliation.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
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


def _cell_name(row: Mapping[str, Any]) -> str:
    where = f"in {row['currency']}" if row["currency"] else "(no currency landed)"
    return f"affiliate {row['affiliate']} offer {row['offer']} {where}"


def _cell_line(row: Mapping[str, Any]) -> str:
    parts = [
        f"{f} landed {row['landed'][f]} network {row['network'][f]} "
        f"(difference {row['difference'][f]})"
        for f in row["beyond_tolerance"]
    ]
    return f"{_cell_name(row)}: " + "; ".join(parts)


def network_day(
    report: NetworkReport,
    landed: Mapping[CellKey, Mapping[str, Any]],
    request_currency: str | None,
) -> dict[CellKey, dict[str, Any]]:
    """The network's cells for the landed ones: each landed currency in its own
    ``currency_id``, for the offers whose landed rows pay in it; then the offers with data on
    the network and no landed currency, in ``request_currency``, keyed with currency ``None``.

    :param report: the day's report.
    :param landed: :func:`landed_cells` of the day.
    :param request_currency: the currency the day was pulled with (the manifest's), for the
        offers with no landed currency; ``None``: the network's default.
    """
    offers_in: dict[str, set[int]] = {}
    for _affiliate, offer, currency in landed:
        if currency is not None and offer is not None:
            offers_in.setdefault(currency, set()).add(offer)
    network: dict[CellKey, dict[str, Any]] = {}
    for currency in sorted(offers_in):
        for (affiliate, offer), cell in report.cells(currency, offers_in[currency]).items():
            network[(affiliate, offer, currency)] = cell
    priced = set().union(*offers_in.values())
    # The offers the network has that day: one short table. Capped (more than 10,000 offers
    # with data in a day), the whole table is asked for, split, and the priced offers dropped.
    offers = report.ids("offer", request_currency, {})
    if offers is None:
        others = report.cells(request_currency)
    else:
        unpriced = [o for o in offers if o not in priced]
        others = report.cells(request_currency, unpriced) if unpriced else {}
    for (affiliate, offer), cell in others.items():
        if offer not in priced:
            network[(affiliate, offer, None)] = cell
    return network


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
    :param tolerance: allowed absolute differences (default: exact), in each currency's units.
    :param on_mismatch: ``fail`` (raise) or ``warn`` (log, return ``reconciled: false``).
    :param max_cells: differing cells named in the error and the log.
    :param log: where progress and warnings go.
    :returns: the day's summary for XCom (:func:`_summary`; ``totals`` per currency, amounts
        as text).
    :raises ReconciliationError: a difference beyond the tolerance and ``on_mismatch="fail"``.
    :raises StorageError: the day has no complete partition.
    :raises ConfigValidationError: a filtered pull, a pull of neither part, a JSON Lines
        partition, or a bad setting.

    A one-part day is compared with that part of the report (:data:`PARTS`); its money is
    recorded under ``not_compared`` (docs/daily-reports.md).
    """
    from affiliate_network.hooks._memory import prefer_system_arrow_pool

    prefer_system_arrow_pool()  # before pyarrow loads, as in the landing task
    from affiliate_network.reports.storage import partition_path

    mode = check_on_mismatch(on_mismatch)
    tolerance = tolerance or Tolerance()
    day_text = _day_text(day)
    part = partition_path(base, dataset, date=day_text)
    manifest, pull = _reconcilable_manifest(part)
    part_name, fields = PARTS[(pull.show_conversions, pull.show_events)]
    not_compared = {
        f: MONEY_NOT_COMPARABLE.format(part=part_name) for f in _MONEY if f not in fields
    }
    request_currency = pull.currency_id or None
    landed = landed_cells(part)
    granular_before = hook.granular_budget().used
    report = NetworkReport(hook, day_text, pull.timezone_id)
    network = network_day(report, landed, request_currency)
    granular_spent = hook.granular_budget().used - granular_before
    result = compare(landed, network, tolerance, fields)
    if not_compared:
        _log_not_compared(log, day_text, part_name, fields, not_compared)
    differing, totals = result.differing, result.totals
    beyond_totals = [c for c, t in totals.items() if t["beyond_tolerance"]]
    reconciled = not differing and not beyond_totals
    comparison = part / COMPARISON_NAME
    doc = {
        "date": day_text,
        "dataset": dataset,
        "reconciled": reconciled,
        "compared_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "manifest_checksum": manifest.content_checksum,
        "request": _report_request(report, pull.timezone_id, request_currency),
        "counted_status": COUNTED_STATUS,
        "events_landed": pull.show_events,
        **{"part": part_name, "compared_fields": list(fields), "not_compared": not_compared},
        "tolerance": {"money": str(tolerance.money), "count": tolerance.count},
        "on_mismatch": mode,
        **{"cells": result.cells, "differing": differing, "totals": totals},
    }
    _write_atomically(comparison, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    summary = _summary(day_text, part, comparison, reconciled, result, granular_spent, report)
    summary["part"], summary["compared_fields"] = part_name, list(fields)
    if reconciled:
        landed_totals = {c: t["landed"] for c, t in totals.items()}
        args = (day_text, len(result.cells), report.requests, landed_totals)
        log.info("%s reconciles with the network's report: %d cells, %d requests, totals %s", *args)
        return summary
    named = differing[: max(0, max_cells)]
    found = (day_text, result, named, beyond_totals)
    message = _mismatch_message(*found, tolerance=tolerance, comparison=comparison, part=part_name)
    if mode == "warn":
        log.warning("%s", message)
        return summary
    raise ReconciliationError(
        message,
        day=day_text,
        cells=[_cell_line(r) for r in named],
        differences=len(differing),
        totals=summary["totals"],
        comparison_path=str(comparison),
    )


def _log_not_compared(
    log: TaskLog, day: str, part: str, fields: Sequence[str], not_compared: Mapping[str, str]
) -> None:
    """Say how a one-part day was compared and what was left out."""
    why = MONEY_NOT_COMPARABLE.format(part=part)
    log.info(
        "%s was pulled with %s only: compared by %s; %s not compared: %s",
        *(day, part, ", ".join(fields), " and ".join(not_compared), why),
    )


def _day_text(day: dt.date | str) -> str:
    """The day as ``YYYY-MM-DD`` (a string is checked to be one)."""
    return day.isoformat() if isinstance(day, dt.date) else dt.date.fromisoformat(day).isoformat()


def _summary(
    day_text: str,
    part: Any,
    comparison: Any,
    reconciled: bool,
    result: Comparison,
    granular_spent: int,
    report: NetworkReport,
) -> dict[str, Any]:
    """The small XCom summary of one day's comparison (totals per currency, as text)."""
    totals = result.totals
    summary_totals: dict[str, object] = {
        currency: {k: t[k] for k in ("landed", "network", "difference")}
        for currency, t in totals.items()
    }
    return {
        "date": day_text,
        "path": str(part),
        "comparison": str(comparison),
        "reconciled": reconciled,
        "cells": len(result.cells),
        "differences": len(result.differing),
        "totals": summary_totals,
        "granular_queries": granular_spent,
        "currencies": sorted(totals),
        "report_requests": report.requests,
    }


def _reconcilable_manifest(part: Any) -> tuple[Any, ConversionPull]:
    """The partition's manifest and the pull it records, checked for comparison."""
    from affiliate_network.partitions.manifest import MANIFEST_NAME, read_manifest
    from affiliate_network.reports.pull import ConversionPull

    manifest = read_manifest(part)
    if manifest is None:
        raise StorageError(f"{part}: no complete partition to reconcile (no manifest)")
    if manifest.format != "parquet":
        raise ConfigValidationError(f"{part} is {manifest.format}: only Parquet days reconcile")
    pull = ConversionPull.from_record(manifest.request, f"{part}/{MANIFEST_NAME}")
    if pull.filters or pull.search_terms:
        raise ConfigValidationError(
            f"{part} was pulled with filters or search terms: it cannot be compared with the "
            "network's whole report"
        )
    if (pull.show_conversions, pull.show_events) not in PARTS:
        raise ConfigValidationError(
            f"{part} was pulled with neither conversions nor events: no part of the network's "
            "report to compare it with"
        )
    return manifest, pull


def _report_request(report: NetworkReport, timezone_id: int, currency_id: Any) -> dict[str, Any]:
    """The comparison record's account of the report requests made."""
    return {
        "endpoint": "POST /networks/reporting/entity/table",
        "columns": list(REPORT_COLUMNS),
        "timezone_id": timezone_id,
        "currency_id": currency_id,
        "by_currency": report.asked,
        "requests": report.requests,
        "split_answers": dict(report.splits),
    }


def _mismatch_message(
    day_text: str,
    result: Comparison,
    named: list[Any],
    beyond_totals: list[str],
    *,
    tolerance: Tolerance,
    comparison: Any,
    part: str = PARTS[(True, True)][0],
) -> str:
    """The error (or warning) naming the first differing cells and the totals beyond tolerance.

    Only fields the day's part can be compared by are ever judged, so a difference here is one
    a re-pull can settle (a lost page, a status changed since landing) or the network's: the
    advice says both."""
    differing, totals = result.differing, result.totals
    lines = [_cell_line(r) for r in named]
    lines += [
        f"totals in {c} beyond tolerance: {totals[c]['difference']}"
        for c in beyond_totals
        if not differing
    ]
    more = len(differing) - len(named)
    compared = "" if part == PARTS[(True, True)][0] else f" (pulled with {part} only)"
    return (
        f"{day_text}{compared} does not reconcile with the network's report: {len(differing)} of "
        f"{len(result.cells)} (affiliate, offer, currency) cells differ beyond the tolerance "
        f"(money {tolerance.money}, count {tolerance.count}); "
        + "; ".join(lines)
        + (f"; and {more} more" if more > 0 else "")
        + f". Comparison: {comparison}. A lost page or a late status change: re-pull the day "
        "and reconcile again; a difference that persists: ask the network."
    )
