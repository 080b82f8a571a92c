"""Read landed conversion partitions day by day, as record batches, for the rules backtest.

The report DAG lands ``<dataset>/date=YYYY-MM-DD/`` partitions whose ``_manifest.json`` names
their files (:mod:`affiliate_network.reports.storage`). The backtest reads them here with
pyarrow alone, not through ``reports.storage``: the rules language imports no job library and
no Airflow (``tests/test_architecture.py``; the CLI runs in CI with nothing else installed), and
a backtest reads a local folder. It follows the storage's reader rules: only complete
partitions (a manifest whose files exist with their listed sizes), exactly the files the
manifest names (never a ``part-*`` glob), ``_``/``.`` folders skipped. Older schema versions
need no conversion here: :func:`~affiliate_network.rules.cli.as_record` turns typed and older
values alike into what the API sends.

Memory: a day is yielded as an iterator of record batches (one Parquet row group at a time,
only the columns asked for); nothing of a day is held once the caller has consumed it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import StorageError

if TYPE_CHECKING:
    import pyarrow as pa

MANIFEST_NAME = "_manifest.json"
_DAY_FOLDER = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
#: Rows per batch read from a Parquet file (bounded by the file's row groups too).
BATCH_ROWS = 10_000


@dataclass(frozen=True)
class LandedDay:
    """One complete landed partition.

    :param day: the partition's ``date=`` key (a local day of ``timezone_id``).
    :param folder: the partition folder.
    :param files: the data files its manifest names, in order.
    :param format: ``parquet`` or ``jsonl``.
    :param timezone_id: the timezone of the pull that landed it (manifest ``request``), if known.
    :param rows: the manifest's row count.
    :param partial: why the partition is not the whole traffic of its day that the review
        pulls (landed without conversions, or with filters or search terms: its manifest
        ``request``), empty when it is.
    """

    day: dt.date
    folder: Path
    files: tuple[Path, ...]
    format: str
    timezone_id: int | None
    rows: int
    partial: str = ""

    def batches(self, columns: Iterable[str] | None = None) -> Iterator[pa.RecordBatch]:
        """The partition's rows as record batches (only ``columns`` that exist, if given).

        :raises StorageError: a file that is not what the manifest says.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        wanted = None if columns is None else list(dict.fromkeys(columns))
        for file in self.files:
            try:
                if self.format == "parquet":
                    with pq.ParquetFile(file) as pf:
                        names = set(pf.schema_arrow.names)
                        cols = None if wanted is None else [c for c in wanted if c in names]
                        yield from pf.iter_batches(batch_size=BATCH_ROWS, columns=cols)
                else:
                    from affiliate_network.rules.records import read_json_rows

                    rows: list[dict[str, Any]] = []
                    for row in read_json_rows(file):
                        rows.append(row)
                        if len(rows) == BATCH_ROWS:
                            yield pa.RecordBatch.from_pylist(rows)
                            rows = []
                    if rows:
                        yield pa.RecordBatch.from_pylist(rows)
            except (OSError, ValueError, pa.ArrowException) as err:
                raise StorageError(f"{file}: cannot be read as {self.format} ({err})") from None


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads((folder / MANIFEST_NAME).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise StorageError(f"{folder / MANIFEST_NAME}: unreadable manifest ({err})") from None
    return raw if isinstance(raw, dict) else None


def _complete(folder: Path, day: dt.date) -> LandedDay | None:
    """The partition when complete (manifest, files with their sizes), else ``None``."""
    manifest = _manifest(folder)
    if manifest is None:
        return None
    files = []
    try:
        for entry in manifest["files"]:
            path = folder / str(entry["name"])
            if not path.is_file() or path.stat().st_size != int(entry["bytes"]):
                return None
            files.append(path)
    except (KeyError, TypeError, ValueError):
        return None
    request = manifest.get("request") or {}
    if not isinstance(request, dict):
        request = {}
    tz = request.get("timezone_id")
    return LandedDay(
        day=day,
        folder=folder,
        files=tuple(files),
        format=str(manifest.get("format", "parquet")),
        timezone_id=int(tz) if isinstance(tz, int | str) and str(tz).isdigit() else None,
        rows=int(manifest.get("row_count") or 0),
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
            part = _complete(folder, day)
            if part is not None:
                found.append(part)
    if not seen_any:
        raise StorageError(f"{root}: no date=YYYY-MM-DD partition in this folder")
    return found
