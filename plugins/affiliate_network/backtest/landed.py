"""The landed days a backtest reads: complete ``date=YYYY-MM-DD`` partitions of a dataset folder.

Read through :mod:`affiliate_network.partitions` (complete partitions only, exactly the files a
manifest names). Memory: a day is yielded as an iterator of record batches (one Parquet row
group at a time, only the columns asked for); nothing of a day is held once consumed.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import StorageError
from affiliate_network.partitions.manifest import complete_manifest

if TYPE_CHECKING:
    import pyarrow as pa

_DAY_FOLDER = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class LandedDay:
    """One complete landed partition.

    :param day: the partition's ``date=`` key (a local day of ``timezone_id``).
    :param folder: the partition folder.
    :param timezone_id: the timezone of the pull that landed it (manifest ``request``), if known.
    :param rows: the manifest's row count.
    :param partial: why the partition is not the whole traffic of its day that the review
        pulls (landed without conversions, or with filters or search terms: its manifest
        ``request``), empty when it is.
    """

    day: dt.date
    folder: Path
    timezone_id: int | None
    rows: int
    partial: str = ""

    def batches(self, columns: Iterable[str] | None = None) -> Iterator[pa.RecordBatch]:
        """The partition's rows as record batches (only ``columns`` that exist, if given).

        :raises StorageError: a file that is not what the manifest says.
        """
        from affiliate_network.partitions.read import iter_partition_batches

        return iter_partition_batches(self.folder, columns)


def _landed_day(folder: Path, day: dt.date) -> LandedDay | None:
    """The partition when complete (manifest, files with their sizes), else ``None``."""
    manifest = complete_manifest(folder)
    if manifest is None:
        return None
    request = manifest.request if isinstance(manifest.request, dict) else {}
    tz = request.get("timezone_id")
    return LandedDay(
        day=day,
        folder=folder,
        timezone_id=int(tz) if isinstance(tz, int | str) and str(tz).isdigit() else None,
        rows=int(manifest.row_count or 0),
        partial=_partial(request),
    )


def _partial(request: dict[str, Any]) -> str:
    """Why a landing's request is not the review's pull (every conversion of the day), or "".

    The review pulls conversions without filters or search terms; a partition landed another
    way holds part of a day's traffic (or none of it), and aggregates over it would count less
    than the review's.
    """
    if request.get("show_conversions") is False:
        return "landed without conversions (show_conversions false)"
    query = request.get("query")
    nested = query if isinstance(query, dict) else {}
    for key in ("filters", "search_terms"):
        if request.get(key) or nested.get(key):
            return f"landed with {key.replace('_', ' ')}"
    return ""


def landed_days(records: str | Path, first: dt.date, last: dt.date) -> list[LandedDay]:
    """The complete partitions of ``first``..``last`` (inclusive) under ``records``, by day.

    :param records: the dataset folder (``data/conversions``) holding ``date=YYYY-MM-DD``
        folders, or one partition folder.
    :raises StorageError: ``records`` is not a folder, or holds no ``date=`` partition at all.
    """
    root = Path(records)
    if not root.is_dir():
        raise StorageError(
            f"{root}: no such folder (expected the landed dataset, e.g. data/conversions)"
        )
    single = _DAY_FOLDER.match(root.name)
    folders = [root] if single else sorted(p for p in root.iterdir() if p.is_dir())
    found: list[LandedDay] = []
    seen_any = False
    for folder in folders:
        match = _DAY_FOLDER.match(folder.name)
        if match is None:
            continue  # _staging, _trash, .locks, anything else
        seen_any = True
        try:
            day = dt.date.fromisoformat(match.group(1))
        except ValueError:
            continue
        if first <= day <= last:
            part = _landed_day(folder, day)
            if part is not None:
                found.append(part)
    if not seen_any:
        raise StorageError(f"{root}: no date=YYYY-MM-DD partition in this folder")
    return found
