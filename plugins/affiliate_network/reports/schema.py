"""Explicit storage schemas of the landed reports, and their on-disk formats.

Two record kinds are landed:

* the **conversion record** of ``POST /networks/reporting/conversions`` (spec section
  "Conversion record"): every documented top-level field gets a typed Parquet column (strings,
  ``int64`` for the integer fields and Unix timestamps, ``decimal128(18, 6)`` for money
  (:func:`money_type`, parsed from the number's text, never through a binary float), ``bool``
  for the flags). ``relationship`` is kept as a **JSON string column** (minified), not a struct: the
  spec leaves ``usm_data``, ``query_parameters`` and several nested members "not shown", and
  the members that are shown are lists of variable length (``snapshots``,
  ``on_hold_snapshots``, ``order_line_items``). A struct would need a fixed shape and would
  drop or reject whatever the network adds; a JSON column keeps every byte and is queried
  with ``json_extract`` (DuckDB), ``get_json_object`` (Spark) or ``JSON_VALUE`` (BigQuery).
  The few relationship members analysts filter on all the time are also flattened into
  ``rel_*`` columns. Top-level fields the spec does not list land in ``extra_fields`` (JSON),
  so nothing is ever dropped silently.
* the **aggregated reporting row** of the affiliate entity table (spec section "Aggregated
  reporting row"): one ``<column>`` / ``<column>_label`` pair per requested group column, then
  the reporting numbers (money as :func:`money_type`, ratios and percentages ``float64``).

The second format, gzip JSON Lines, stores each API record as received, one per line: lossless,
no schema needed to read it back.

Content checksum: both formats share one definition, based on a canonical byte form of each API
record (:meth:`RecordSchema.prepare`). For conversions it is the record's JSON text as the API
sent it, on one line (:class:`ConversionSchema`): landing a pulled page never builds Python
objects (:meth:`ConversionSchema.encode_page`), and records given as dicts give the same bytes
when the server prints JSON as orjson does. Aggregated rows use their sorted-key JSON. The same API
data gives the same checksum whatever the format, the page order or the time of the pull (see
:mod:`affiliate_network.partitions`).
"""

from __future__ import annotations

import decimal
import functools
import hashlib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from affiliate_network.api.record_fields import (
    BOOLEAN_FIELDS,
    INTEGER_FIELDS,
    NUMBER_FIELDS,
    STRING_FIELDS,
)
from affiliate_network.api.report_columns import validate_report_columns
from affiliate_network.exceptions import (
    SchemaMismatchError,
)
from affiliate_network.reports.arrow_values import (
    bool_array,
    empty_string_scalar,
    int_scalar,
    null_scalar,
    string_array,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from affiliate_network.helpers.seen_keys import SeenKeys

# pyarrow is imported inside functions: importing this module must not load a data library
# (the operators import the report modules; DAG files import the operators at parse time).

#: File name suffix per format (:data:`~affiliate_network.api.report_columns.FORMATS`).
FORMAT_SUFFIX: dict[str, str] = {"parquet": ".parquet", "jsonl": ".jsonl.gz"}

_SORTED = orjson.OPT_SORT_KEYS


def landing_memory_pool() -> pa.MemoryPool:
    """Arrow pool of the landing's page tables and Parquet writer: the system allocator.

    mimalloc and jemalloc keep freed pages for reuse; a landing frees a multi-MB page table
    every page, so they held ~30 MB more RSS than glibc, which returns blocks of 1 MiB or more
    to the OS once the pull pins its mmap threshold (``hooks/_memory.py``). Parquet's column
    writers take Arrow's process default whatever pool is given here: the operator makes that
    the system allocator too (``hooks._memory.prefer_system_arrow_pool``).
    """
    import pyarrow as pa

    return pa.system_memory_pool()


def canonical_json(record: dict[str, Any]) -> bytes:
    """Deterministic JSON bytes of one API record: keys sorted at every level, no whitespace."""
    return orjson.dumps(record, option=_SORTED)


# --------------------------------------------------------------------------------------------
# Conversion record
# --------------------------------------------------------------------------------------------


#: Columns flattened from ``relationship`` for convenience (the JSON column stays complete).
_REL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rel_network_offer_id", "int64"),
    ("rel_network_affiliate_id", "int64"),
    ("rel_network_advertiser_id", "int64"),
    ("rel_on_hold_conversion_id", "string"),
    ("rel_on_hold_status", "string"),
)

_KNOWN_CONVERSION_FIELDS = frozenset(
    (*STRING_FIELDS, *INTEGER_FIELDS, *NUMBER_FIELDS, *BOOLEAN_FIELDS)
) | {"relationship"}


#: Layout version of the conversion Parquet files (file metadata ``schema_version``, and the
#: manifest's ``schema.version``): Unix timestamps as UTC timestamps (whole seconds; Parquet
#: has no seconds unit, so the files hold ``timestamp[ms, UTC]``), empty strings as nulls, money
#: as :func:`money_type` (exact decimals).
CONVERSION_SCHEMA_VERSION = 4
#: Integer fields of the spec that hold Unix seconds: landed as ``timestamp[s, UTC]``.
TIMESTAMP_FIELDS: tuple[str, ...] = ("click_unix_timestamp", "conversion_unix_timestamp")
#: Money fields of the conversion record, in the record's ``currency_id``: :func:`money_type`.
MONEY_FIELDS: tuple[str, ...] = NUMBER_FIELDS
#: Digits of a landed amount in all, and after the decimal point (``docs/api-decisions.md``,
#: "Money"). 18 digits fit a 64-bit integer, which DuckDB and Parquet readers sum natively; 6
#: decimals hold every ISO 4217 minor unit (at most 4) and sub-cent amounts that percentage
#: payouts produce; 12 integer digits hold any single amount (10^12 of the smallest currency).
MONEY_PRECISION, MONEY_SCALE = 18, 6
#: The smallest step of a landed amount (``Decimal("0.000001")``).
_MONEY_STEP = Decimal(1).scaleb(-MONEY_SCALE)
#: Amounts are below this in absolute value (12 integer digits).
_MONEY_LIMIT = Decimal(10) ** (MONEY_PRECISION - MONEY_SCALE)


def money_type() -> pa.DataType:
    """``decimal128(MONEY_PRECISION, MONEY_SCALE)``: the Arrow type of every landed amount."""
    import pyarrow as pa

    return pa.decimal128(MONEY_PRECISION, MONEY_SCALE)


def exact_money(value: Any) -> Decimal:
    """One amount as the exact :class:`~decimal.Decimal` a money column stores.

    ``Decimal``, ``int`` and numeric text are taken as they are; a ``float`` (a record that was
    parsed as Python objects) by its shortest text, which is the JSON number as it was printed
    (for the up to 15 significant digits a float keeps). Never rounded: a value with more than
    :data:`MONEY_SCALE` decimals, or 10^12 or more, is refused.

    :raises ValueError: not a finite number, too many decimals, or too large.
    :raises TypeError: a boolean or a value of another type.
    """
    if isinstance(value, bool):
        raise TypeError("boolean for a money column")
    if isinstance(value, float):
        value = repr(value)
    if isinstance(value, str):
        try:
            value = Decimal(value.strip())
        except decimal.InvalidOperation:
            raise ValueError("not a number") from None
    if isinstance(value, int):
        value = Decimal(value)
    if not isinstance(value, Decimal):
        raise TypeError("not a number")
    if not value.is_finite():
        raise ValueError("not a finite number")
    if abs(value) >= _MONEY_LIMIT:
        raise ValueError(
            f"{value} has more than {MONEY_PRECISION - MONEY_SCALE} integer digits "
            f"(money is decimal128({MONEY_PRECISION}, {MONEY_SCALE}))"
        )
    exact = value.quantize(_MONEY_STEP)  # adds zeros; below only compares (never rounds)
    if exact != value:
        raise ValueError(
            f"{value} has more than {MONEY_SCALE} decimals "
            f"(money is decimal128({MONEY_PRECISION}, {MONEY_SCALE})); not rounded"
        )
    return exact


def _conversion_arrow_schema() -> pa.Schema:
    """The one written-down layout of a landed conversion (every partition, every day).

    Strings are ``string`` (an empty string from the API lands as null), integers ``int64``,
    :data:`TIMESTAMP_FIELDS` ``timestamp[ms, UTC]`` (whole seconds; Parquet's coarsest unit),
    money :func:`money_type` (:data:`MONEY_FIELDS`), flags ``bool``; ``relationship`` and
    ``extra_fields`` are JSON text. A column absent from every record of a day is still there,
    typed, all null.
    """
    import pyarrow as pa

    ts = pa.timestamp("ms", tz="UTC")
    fields: list[pa.Field] = [pa.field("conversion_id", pa.string(), nullable=False)]
    fields += [pa.field(n, pa.string()) for n in STRING_FIELDS if n != "conversion_id"]
    fields += [
        pa.field(n, ts if n in TIMESTAMP_FIELDS else pa.int64(), metadata=_unit(n))
        for n in INTEGER_FIELDS
    ]
    fields += [pa.field(n, money_type(), metadata={"unit": "currency_id"}) for n in MONEY_FIELDS]
    fields += [pa.field(n, pa.bool_()) for n in BOOLEAN_FIELDS]
    fields.append(
        pa.field("relationship", pa.string(), metadata={"encoding": "json", "keys": "as received"})
    )
    fields += [pa.field(n, pa.type_for_alias(t)) for n, t in _REL_COLUMNS]
    fields.append(pa.field("extra_fields", pa.string(), metadata={"encoding": "json"}))
    return pa.schema(
        fields,
        metadata={"record": "conversion", "schema_version": str(CONVERSION_SCHEMA_VERSION)},
    )


def _unit(name: str) -> dict[str, str] | None:
    return {"unit": "unix seconds, UTC"} if name in TIMESTAMP_FIELDS else None


def _seconds_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the timestamp columns as ``timestamp[s, UTC]``: how Unix seconds enter."""
    import pyarrow as pa

    ts = pa.timestamp("s", tz="UTC")
    return pa.schema(
        [f.with_type(ts) if f.name in TIMESTAMP_FIELDS else f for f in schema],
        metadata=schema.metadata,
    )


def _to_landed(table: pa.Table, target: pa.Schema) -> pa.Table:
    """A table of :func:`_seconds_schema` layout in the landed one: seconds widened to the
    file's unit, ``""`` -> null in every nullable string column (the API's "no value")."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for field, column in zip(target, table.columns, strict=True):
        if pa.types.is_timestamp(field.type):
            try:
                column = column.cast(field.type)
            except pa.ArrowInvalid as err:  # beyond what milliseconds hold (year 292,278,994)
                raise SchemaMismatchError(f"{field.name} out of range: {err}") from err
        elif pa.types.is_string(field.type) and field.nullable and column.null_count < len(column):
            empty = pc.equal(column, empty_string_scalar())
            column = pc.if_else(empty, null_scalar(pa.string()), column)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=target)


class RecordSchema:
    """How one record kind becomes Arrow rows; subclasses define :meth:`flatten`.

    :param name: record kind (``conversion``, ``affiliate_report``), written to the manifest.
    :param version: bumped whenever the column mapping changes.
    :param arrow_schema: the explicit Parquet schema.
    :param key_field: record field that identifies a record inside one pull (duplicates by this
        key are dropped), or ``None`` when records have no identity (aggregates).
    """

    def __init__(
        self, name: str, version: int, arrow_schema: pa.Schema, key_field: str | None
    ) -> None:
        self.name = name
        self.version = version
        self.arrow_schema = arrow_schema
        self.key_field = key_field
        #: The layout rows are built in (API values as they come); :meth:`to_table` subclasses
        #: convert it to ``arrow_schema``.
        self.input_schema = arrow_schema
        self._types: dict[str, pa.DataType] = {f.name: f.type for f in arrow_schema}

    @property
    def fingerprint(self) -> str:
        """Short hash of the Arrow schema, so a manifest says which layout its files use."""
        text = self.arrow_schema.to_string(show_field_metadata=False, show_schema_metadata=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        """Manifest entry describing this schema."""
        return {"name": self.name, "version": self.version, "fingerprint": self.fingerprint}

    def flatten(self, record: dict[str, Any]) -> dict[str, Any]:
        """One API record as a dict of column values (before type coercion)."""
        raise NotImplementedError

    def prepare(self, record: dict[str, Any]) -> tuple[dict[str, Any], bytes, bytes]:
        """``(row, canonical, line)`` of one API record, in one pass.

        ``row`` holds the column values for Arrow; ``canonical`` is the deterministic byte form
        the content checksum hashes; ``line`` is the JSON Lines form (the record as received,
        keys sorted). By default both byte forms are the sorted-key JSON of the record.
        """
        canonical = canonical_json(record)
        return self.flatten(record), canonical, canonical

    def encode(self, records: Iterable[dict[str, Any]], format: str) -> tuple[Any, list[bytes]]:
        """``(payload, canonicals)`` of a batch of API records, on the caller's thread.

        ``canonicals`` are the byte forms the content checksum hashes, one per record. For
        ``jsonl`` the payload is the list of JSON Lines; for ``parquet`` it is whatever
        :meth:`to_arrow` turns into a table (here: the prepared rows).
        """
        payload: list[Any] = []
        canonicals: list[bytes] = []
        parquet = format == "parquet"
        for record in records:
            row, canonical, line = self.prepare(record)
            canonicals.append(canonical)
            payload.append(row if parquet else line)
        return payload, canonicals

    def to_arrow(self, payload: Any) -> pa.Table:
        """Arrow table of an :meth:`encode` payload (may run on a writer thread)."""
        return self.to_table(payload)

    def to_table(self, rows: Sequence[dict[str, Any]]) -> pa.Table:
        """Arrow table of prepared ``rows`` (from :meth:`prepare`) under the explicit schema.

        The fast path hands the dicts to Arrow's C++ converter. When a value has the wrong JSON
        type (``"12"`` for an integer), each value is coerced in Python where that is lossless,
        and otherwise :class:`SchemaMismatchError` names the field and the record.
        """
        import pyarrow as pa

        try:
            return pa.Table.from_pylist(rows, schema=self.input_schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            coerced = [self._coerce_row(row) for row in rows]
            return pa.Table.from_pylist(coerced, schema=self.input_schema)

    def _coerce_row(self, row: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in row.items():
            typ = self._types.get(name)
            if typ is None or value is None:
                out[name] = value
                continue
            try:
                out[name] = _coerce(value, typ)
            except (TypeError, ValueError) as err:
                ident = row.get(self.key_field) if self.key_field else None
                where = f" of record {self.key_field}={ident!r}" if ident is not None else ""
                raise SchemaMismatchError(
                    f"{self.name} field {name!r}{where}: value {value!r} "
                    f"({type(value).__name__}) does not fit column type {typ}: {err}"
                ) from err
        return out


def _coerce(value: Any, typ: pa.DataType) -> Any:
    """Lossless conversion of one JSON value to the Python type Arrow expects for ``typ``."""
    import pyarrow as pa

    if pa.types.is_string(typ):
        if isinstance(value, bytes):  # JSON columns are handed over as UTF-8 bytes
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float | str):
            return str(value)
        raise TypeError("not a scalar")
    if pa.types.is_integer(typ) or pa.types.is_timestamp(typ):
        if isinstance(value, bool):
            raise TypeError("boolean for an integer column")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError("fractional value for an integer column")
            return int(value)
        return int(value)  # int, or a numeric string such as "12"
    if pa.types.is_decimal(typ):
        return exact_money(value)
    if pa.types.is_floating(typ):
        if isinstance(value, bool):
            raise TypeError("boolean for a number column")
        return float(value)
    if pa.types.is_boolean(typ):
        if isinstance(value, bool):
            return value
        if value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("true", "false", "0", "1"):
            return value.lower() in ("true", "1")
        raise ValueError("not a boolean")
    return value


class ConversionSchema(RecordSchema):
    """Conversion report rows (conversions and events share the record shape).

    Canonical form (checksum input, and the JSON Lines line) of a conversion: the record's JSON
    text as the API sent it (key order, escapes and number spellings as sent), on one line: a
    page that spans lines is first compacted (whitespace between tokens removed). ``relationship``
    is stored the same way. Pages pulled with ``raw_pages`` are landed without building Python
    objects (:meth:`encode_page`); records given as dicts take the row path, serialised by
    ``orjson`` in their own key order, which is the same text for a server that prints JSON the
    way orjson does (the sandbox does; the tests compare the two paths).
    """

    def __init__(self) -> None:
        super().__init__(
            "conversion",
            CONVERSION_SCHEMA_VERSION,
            _conversion_arrow_schema(),
            key_field="conversion_id",
        )
        self.input_schema = _seconds_schema(self.arrow_schema)

    def flatten(self, record: dict[str, Any]) -> dict[str, Any]:
        return self.prepare(record)[0]

    def to_table(self, rows: Sequence[dict[str, Any]]) -> pa.Table:
        """As :meth:`RecordSchema.to_table`, then in the landed layout (as from a page)."""
        return _to_landed(super().to_table(rows), self.arrow_schema)

    def prepare(self, record: dict[str, Any]) -> tuple[dict[str, Any], bytes, bytes]:
        canonical = orjson.dumps(record)
        rel = record.get("relationship")
        return _conversion_row(record, _scalar_json(rel)), canonical, canonical

    def encode_page(
        self,
        content: bytes,
        key: str,
        seen: SeenKeys | None,
        format: str,
        records: Sequence[Any] | None = None,
    ) -> tuple[Any, list[Any], int]:
        """``(payload, canonicals, dropped)`` of one unparsed page, on the caller's thread.

        ``records`` are the page's record spans from the pull's envelope check (split here when
        not given). Per record, msgspec reads only the id and the span of ``relationship``
        (every other value is skipped, never a Python object); the canonicals are the record
        spans themselves (views of ``content``, no copies). The ids go to ``seen`` (the pull's
        exact key set, kept outside Python objects) in one call, which says which records are
        duplicates. For Parquet, :meth:`to_arrow` then parses the page with Arrow's JSON reader
        on the writer thread. A record with top-level fields the spec does not list sends the
        page to the row path (they land in ``extra_fields``).

        :raises SchemaMismatchError: a record that is not a JSON object.
        """
        if records is None or _spans_lines(content):
            content, records = _split_page(content, key)
        known, any_fields = _record_decoders()
        ids: list[Any] = []
        rels: list[bytes | None] = []
        regular = True
        for index, text in enumerate(records):
            try:
                rec = known.decode(text)
            except msgspec.ValidationError:
                try:
                    rec = any_fields.decode(text)  # fields outside the spec: row path
                except msgspec.ValidationError:
                    raise SchemaMismatchError(
                        f"conversion record {index} of the page is not an object: "
                        f"{bytes(text)[:200]!r}"
                    ) from None
                regular = False
            ids.append(rec.conversion_id)
            rel = None if rec.relationship is None else bytes(rec.relationship)
            rels.append(None if rel == _NULL else rel)
        mask = seen.add_many(ids) if seen is not None else [True] * len(ids)
        dropped = mask.count(False)
        canonicals = list(itertools.compress(records, mask)) if dropped else list(records)
        if dropped:
            rels = list(itertools.compress(rels, mask))
        if format != "parquet":
            return list(canonicals), canonicals, dropped
        return _PagePayload(content, key, mask, rels, regular), canonicals, dropped

    def to_arrow(self, payload: Any) -> pa.Table:
        if not isinstance(payload, _PagePayload):
            return super().to_arrow(payload)
        import pyarrow as pa

        if not any(payload.mask):
            return self.arrow_schema.empty_table()
        if payload.regular:
            try:
                return self.table_from_page(payload)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                pass  # a value of the wrong JSON type: the row path coerces or names it
        records = orjson.loads(payload.content)[payload.key]
        amounts = _page_amounts(payload.key).decode(payload.content)
        rels = iter(payload.rels)
        rows = [
            _conversion_row(r, next(rels), amounts=a)
            for r, a, keep in zip(records, getattr(amounts, payload.key), payload.mask, strict=True)
            if keep
        ]
        return self.to_table(rows)

    def table_from_page(self, payload: _PagePayload) -> pa.Table:
        """The Arrow table of a page by Arrow's JSON reader alone (no coercion, no extras).

        :raises pyarrow.ArrowInvalid: when a value does not have its column's JSON type.
        """
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj

        table = pj.read_json(
            pa.BufferReader(payload.content),
            read_options=pj.ReadOptions(
                block_size=max(1 << 20, len(payload.content) + 1), use_threads=False
            ),
            parse_options=pj.ParseOptions(
                explicit_schema=self._envelope(payload.key),
                unexpected_field_behavior="ignore",
                newlines_in_values=True,
            ),
            memory_pool=landing_memory_pool(),
        )
        records = table.column(payload.key).combine_chunks()
        if len(records) != 1:
            raise pa.ArrowInvalid("not one JSON object per page")
        structs = records.flatten()
        if len(structs) != len(payload.mask):
            raise pa.ArrowInvalid("record count differs from the page index")
        if not all(payload.mask):
            structs = structs.filter(bool_array(payload.mask))
        for name in MONEY_FIELDS:
            # The reader takes every digit of the number's text, refuses more decimals than the
            # scale, but does not check the precision: a value of 10^12 or more fails here, and
            # the row path names it with its conversion.
            structs.field(name).validate(full=True)
        rel = pc.struct_field(structs, "relationship")
        derived = {
            "relationship": string_array(payload.rels),
            "rel_network_offer_id": _struct_path(rel, "offer", "network_offer_id"),
            "rel_network_affiliate_id": _struct_path(rel, "affiliate", "network_affiliate_id"),
            "rel_network_advertiser_id": _struct_path(rel, "advertiser", "network_advertiser_id"),
            "extra_fields": pa.nulls(len(structs), pa.string()),
        }
        # The current on-hold state is the LAST snapshot's.
        snaps = pc.struct_field(rel, "on_hold_snapshots")
        lengths = pc.list_value_length(snaps)  # null where there are no snapshots
        ends = pc.subtract(snaps.offsets.slice(1), int_scalar(1, snaps.offsets.type))
        nonempty = pc.greater(lengths, int_scalar(0, lengths.type))  # a null takes a null
        last = snaps.values.take(pc.if_else(nonempty, ends, null_scalar(ends.type)))
        derived["rel_on_hold_conversion_id"] = pc.struct_field(last, "on_hold_conversion_id")
        derived["rel_on_hold_status"] = pc.struct_field(last, "status")
        seconds = self.input_schema
        columns = [
            derived[f.name] if f.name in derived else structs.field(f.name).cast(f.type)
            for f in seconds
        ]  # the casts: int64 Unix seconds -> timestamp[s] (zero-copy); the rest are no-ops
        return _to_landed(pa.Table.from_arrays(columns, schema=seconds), self.arrow_schema)

    @functools.cache  # noqa: B019 - one schema object per process (conversion_schema())
    def _envelope(self, key: str) -> pa.Schema:
        """Arrow schema of a page: ``key`` holds records; ``relationship`` only what rel_* need."""
        import pyarrow as pa

        derived = {n for n, _ in _REL_COLUMNS} | {"relationship", "extra_fields"}
        fields = [
            pa.field(f.name, pa.int64()) if f.name in TIMESTAMP_FIELDS else f.with_nullable(True)
            for f in self.arrow_schema
            if f.name not in derived
        ]  # Arrow's JSON reader takes numbers as int64; table_from_page casts them
        relationship = pa.struct(
            [
                pa.field("offer", pa.struct([pa.field("network_offer_id", pa.int64())])),
                pa.field("affiliate", pa.struct([pa.field("network_affiliate_id", pa.int64())])),
                pa.field("advertiser", pa.struct([pa.field("network_advertiser_id", pa.int64())])),
                pa.field(
                    "on_hold_snapshots",
                    pa.list_(
                        pa.struct(
                            [
                                pa.field("on_hold_conversion_id", pa.string()),
                                pa.field("status", pa.string()),
                            ]
                        )
                    ),
                ),
            ]
        )
        record = pa.struct([*fields, pa.field("relationship", relationship)])
        return pa.schema([pa.field(key, pa.list_(record))])


@dataclass
class _PagePayload:
    """What :meth:`ConversionSchema.encode_page` hands to the writer thread for Parquet."""

    content: bytes
    key: str
    mask: list[bool]  # per record of the page: kept (not a duplicate)
    rels: list[bytes | None]  # minified relationship of each kept record
    regular: bool  # no top-level field outside the spec: Arrow's reader can take the page


def _scalar_json(value: Any) -> bytes | None:
    return None if value is None else orjson.dumps(value)


_NULL = b"null"


def _spans_lines(content: bytes) -> bool:
    """Whether a page has line breaks or tabs: JSON strings cannot hold them unescaped, so
    they are whitespace between tokens (a pretty-printed answer), and the page is compacted.
    """
    return b"\n" in content or b"\r" in content or b"\t" in content


def _split_page(content: bytes, key: str) -> tuple[bytes, list[Any]]:
    """``(content, record spans)`` of a page, compacted first if it spans lines."""
    from affiliate_network.hooks._paging import page_decoder  # not at DAG parse time

    if _spans_lines(content):
        content = msgspec.json.format(content, indent=-1)  # whitespace only; values kept
    try:
        page = page_decoder(key).decode(content)
    except msgspec.DecodeError as err:
        raise SchemaMismatchError(f"not a page of '{key}' records: {err}") from None
    return content, getattr(page, key)


@functools.cache
def _page_amounts(key: str) -> msgspec.json.Decoder[Any]:
    """msgspec decoder of a page's money values, exactly: ``page.<key>[i].<field>`` is a
    :class:`~decimal.Decimal` of the number's text (an ``int`` for an integer, a ``str`` for
    text), every other value skipped. The row path's ``orjson`` parse gives binary floats."""
    amounts = msgspec.defstruct("Amounts", [(name, Any, None) for name in MONEY_FIELDS])
    page = msgspec.defstruct("AmountsPage", [(key, list[amounts])])  # type: ignore[valid-type]
    return msgspec.json.Decoder(page, float_hook=Decimal)


@functools.cache
def _record_decoders() -> tuple[Any, Any]:
    """msgspec decoders of one conversion record: ``(known, any_fields)``.

    Both read ``conversion_id`` and the span of ``relationship`` and skip every other value.
    ``known`` also refuses a top-level field the spec does not list (the page then takes the
    row path, which keeps it in ``extra_fields``); ``any_fields`` takes any object.
    """
    rest = sorted(_KNOWN_CONVERSION_FIELDS - {"conversion_id", "relationship"})
    head: list[Any] = [("conversion_id", Any, None), ("relationship", msgspec.Raw, None)]
    known = msgspec.defstruct(
        "KnownConversion",
        head + [(name, msgspec.Raw, None) for name in rest],
        forbid_unknown_fields=True,
    )
    any_fields = msgspec.defstruct("AnyConversion", head)
    return msgspec.json.Decoder(known), msgspec.json.Decoder(any_fields)


def _conversion_row(
    record: dict[str, Any], rel_json: bytes | None, amounts: Any = None
) -> dict[str, Any]:
    """Column values of one conversion record (before type coercion).

    ``amounts`` holds the record's money values parsed from their text (:func:`_page_amounts`);
    without it a ``float`` amount is taken by its shortest text (:func:`exact_money`). The
    checks (decimals, size) are Arrow's, then :func:`_coerce`'s, which names the record.
    """
    row = record.copy()
    for name in MONEY_FIELDS:
        exact = getattr(amounts, name, None)
        if exact is not None:
            row[name] = exact
        elif type(row.get(name)) is float:
            row[name] = Decimal(repr(row[name]))
    rel = row.pop("relationship", None)
    if not row.keys() <= _KNOWN_CONVERSION_FIELDS:
        extra = {k: row.pop(k) for k in row.keys() - _KNOWN_CONVERSION_FIELDS}
        row["extra_fields"] = orjson.dumps(extra, option=_SORTED)
    row["relationship"] = rel_json
    if isinstance(rel, dict):
        _rel_columns(rel, row)
    return row


def _struct_path(array: pa.Array, *names: str) -> pa.Array:
    import pyarrow.compute as pc

    for name in names:
        array = pc.struct_field(array, name)
    return array


def _rel_columns(rel: dict[str, Any], out: dict[str, Any]) -> None:
    """The ``rel_*`` convenience columns of one ``relationship`` object, into ``out``."""
    offer, aff, adv = rel.get("offer"), rel.get("affiliate"), rel.get("advertiser")
    if isinstance(offer, dict):
        out["rel_network_offer_id"] = offer.get("network_offer_id")
    if isinstance(aff, dict):
        out["rel_network_affiliate_id"] = aff.get("network_affiliate_id")
    if isinstance(adv, dict):
        out["rel_network_advertiser_id"] = adv.get("network_advertiser_id")
    # The current on-hold state is the LAST snapshot's.
    snaps = rel.get("on_hold_snapshots")
    if isinstance(snaps, list) and snaps and isinstance(snaps[-1], dict):
        out["rel_on_hold_conversion_id"] = snaps[-1].get("on_hold_conversion_id")
        out["rel_on_hold_status"] = snaps[-1].get("status")


@functools.cache
def conversion_schema() -> ConversionSchema:
    """The conversion schema (built once, on first use)."""
    return ConversionSchema()


# --------------------------------------------------------------------------------------------
# Aggregated reporting row (affiliate entity table)
# --------------------------------------------------------------------------------------------

_REPORT_COUNTS: tuple[str, ...] = (
    "imp",
    "total_click",
    "unique_click",
    "invalid_click",
    "duplicate_click",
    "cv",
    "view_through_cv",
    "event",
    "on_hold_conversion_count",
)
#: Ratios and percentages: ``float64`` (the network computes and rounds them; ``rpc`` and
#: ``rpm`` are revenue per click and per thousand impressions, not amounts anyone sums).
_REPORT_RATES: tuple[str, ...] = ("ctr", "cvr", "evr", "rpc", "rpm")
#: Amounts: :func:`money_type`, as the conversion record's money.
REPORT_MONEY_FIELDS: tuple[str, ...] = (
    "revenue",
    "redirect_traffic_revenue",
    "on_hold_potential_revenue",
)
#: Layout version of the affiliate report files. 2: :data:`REPORT_MONEY_FIELDS` as
#: :func:`money_type` (1: ``float64``).
AFFILIATE_REPORT_SCHEMA_VERSION = 2


class AffiliateReportSchema(RecordSchema):
    """Entity-table rows for a fixed list of group columns.

    ``report_from``/``report_to`` give the date range a row aggregates (set by the operator).
    Each group column ``c`` gives ``c`` (the API's ``id``) and ``c_label``; the reporting
    numbers follow (counts ``int64``, rates ``float64``, money :func:`money_type`). Reporting
    keys the spec does not list land in ``extra_reporting`` (JSON). The rows come parsed (the
    hook's JSON objects): an amount is taken by the float's shortest text, which is the number
    the API printed for up to 15 significant digits (:func:`exact_money`).

    :param columns: validated group column names, in request order.
    """

    def __init__(self, columns: Sequence[str]) -> None:
        import pyarrow as pa

        self.columns = validate_report_columns(columns)
        # The range a row aggregates (a capped window is split into sub-ranges).
        fields: list[pa.Field] = [
            pa.field("report_from", pa.string()),
            pa.field("report_to", pa.string()),
        ]
        for c in self.columns:
            fields += [pa.field(c, pa.string()), pa.field(f"{c}_label", pa.string())]
        fields += [pa.field(n, pa.int64()) for n in _REPORT_COUNTS]
        fields += [pa.field(n, pa.float64()) for n in _REPORT_RATES]
        fields += [
            pa.field(n, money_type(), metadata={"unit": "currency_id"}) for n in REPORT_MONEY_FIELDS
        ]
        fields.append(pa.field("extra_reporting", pa.string(), metadata={"encoding": "json"}))
        version = AFFILIATE_REPORT_SCHEMA_VERSION
        schema = pa.schema(
            fields, metadata={"record": "affiliate_report", "schema_version": str(version)}
        )
        super().__init__("affiliate_report", version, schema, key_field=None)
        self._known_reporting = frozenset((*_REPORT_COUNTS, *_REPORT_RATES, *REPORT_MONEY_FIELDS))

    def flatten(self, record: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "report_from": record.get("report_from"),
            "report_to": record.get("report_to"),
        }
        cols = record.get("columns") or []
        if len(cols) != len(self.columns):
            raise SchemaMismatchError(
                f"affiliate report row has {len(cols)} columns, {len(self.columns)} were "
                f"requested ({self.columns}): {record!r:.200}"
            )
        # Columns come back in request order; column_type names the group column.
        for name, col in zip(self.columns, cols, strict=True):
            row[name] = None if col.get("id") is None else str(col.get("id"))
            row[f"{name}_label"] = col.get("label")
        reporting = record.get("reporting") or {}
        for key, value in reporting.items():
            if key in self._known_reporting:
                # Checked by Arrow, then by _coerce (which names the field).
                is_float_money = key in REPORT_MONEY_FIELDS and type(value) is float
                row[key] = Decimal(repr(value)) if is_float_money else value
        extra = {k: v for k, v in reporting.items() if k not in self._known_reporting}
        row["extra_reporting"] = orjson.dumps(extra, option=_SORTED).decode() if extra else None
        return row
