"""Compile validated rules into column-wise closures and decide a batch of conversions.

Each condition compiles to ``fn(batch, idx) -> matching idx`` where ``idx`` is a list of record
positions still undecided. Values are read column-wise from a per-batch cache (the fields the
rules use in one pass over the records, then one pass per derived field or aggregate), so
deciding 100,000 conversions against 30 rules costs a few list comprehensions per rule instead
of 3 million closure calls.
"""

from __future__ import annotations

import functools
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import pyarrow as pa

from affiliate_network.helpers.gcpause import paused_gc
from affiliate_network.rules.aggregates import Codes, compute_aggregate, exact_numbers, factorize
from affiliate_network.rules.fields import (
    DERIVED_FIELDS,
    compile_getter,
    describe_path,
    parse_path,
    path_is_multi,
)
from affiliate_network.rules.loader import load_rules
from affiliate_network.rules.model import (
    AllOf,
    AnyOf,
    NotOf,
    Rule,
    RulesFile,
    Test,
    iter_tests,
)

Idx = list[int]
CompiledCondition = Callable[["Batch", Idx], Idx]


def _to_number(value: Any) -> float | None:
    kind = type(value)
    if type(value) is int or type(value) is float:
        return value
    if kind is str:
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _present(value: Any) -> bool:
    if value is None or value == "":
        return False
    if type(value) in (list, tuple, dict):
        return len(value) > 0
    return True


_NUMERIC_TYPES = frozenset((int, float, type(None)))
_CONTAINERS = frozenset((list, dict, tuple))


def _fetch(rows: Sequence[Any], keys: list[str], *, nested: bool) -> list[Sequence[Any]]:
    """Columns of ``keys`` read from ``rows`` (dicts, or anything for nested levels) in one pass."""
    if nested:
        # Nested levels may hold None or non-dicts: guard them with an empty dict.
        empty: dict[str, Any] = {}
        rows = [r if type(r) is dict else empty for r in rows]
    if len(keys) == 1:
        key = keys[0]
        return [[r.get(key) for r in rows]]
    try:
        # itemgetter is the fastest single pass; it needs every key present...
        table = list(map(itemgetter(*keys), rows))
    except KeyError:
        # ...otherwise dict.get per key, still one pass over the rows.
        table = [tuple(map(r.get, keys)) for r in rows]
    return list(zip(*table, strict=True))


def _path_tree(paths: Sequence[str]) -> dict[str, dict[str, None]]:
    """Parent path (``""`` for the record) -> its child keys, in first-seen order."""
    children: dict[str, dict[str, None]] = {}
    for path in paths:
        parent = ""
        for key in path.split("."):
            children.setdefault(parent, {})[key] = None
            parent = f"{parent}.{key}" if parent else key
    return children


Prefetcher = Callable[[Sequence[Any]], "dict[str, list[Any]] | None"]


@functools.lru_cache(maxsize=64)
def _prefetcher(paths: tuple[str, ...]) -> Prefetcher:
    """A generated function reading every prefetch path of every record in ONE pass.

    Reading 100,000 large records is dominated by memory access: walking each record (and its
    nested dicts) once beats one pass per level, and plain subscripts in generated straight-line
    code are the cheapest reads Python has. The function returns ``None`` when a record lacks a
    key or a nested level is not a dict; the caller then falls back to the guarded
    level-by-level fetch (which gives ``None`` there).
    """
    if not paths:
        return lambda records: {}
    children = _path_tree(paths)
    names: list[str] = []  # column n of the generated function is names[n]
    body: list[str] = []

    def emit(parent: str, var: str) -> None:
        for key in children.get(parent, ()):
            path = f"{parent}.{key}" if parent else key
            n = len(names)
            names.append(path)
            if path not in children:
                body.append(f"        a{n}({var}[{key!r}])")
                continue
            # A nested level: kept in a local for its children. Subclasses of dict or other
            # mappings read as absent in the guarded fetch: they make this one give up too.
            body.append(f"        v{n} = {var}[{key!r}]")
            body.append(f"        if type(v{n}) is not dict: raise TypeError")
            body.append(f"        a{n}(v{n})")
            emit(path, f"v{n}")

    emit("", "r")
    source = "\n".join(
        [
            "def prefetch(records):",
            *(f"    c{n} = []; a{n} = c{n}.append" for n in range(len(names))),
            "    for r in records:",
            *body,
            f"    return [{', '.join(f'c{n}' for n in range(len(names)))}]",
            "",
        ]
    )
    namespace: dict[str, Any] = {"dict": dict, "type": type}
    # Safe: the keys are validated path segments (identifiers), and written with repr().
    exec(compile(source, "<rules prefetch>", "exec"), namespace)  # noqa: S102
    generated = namespace["prefetch"]

    def prefetch(records: Sequence[Any]) -> dict[str, list[Any]] | None:
        try:
            columns = generated(records)
        except (KeyError, TypeError):
            return None
        return dict(zip(names, columns, strict=True))

    return prefetch


class Batch:
    """The records being decided, with a cache of columns computed on first use.

    Reading a field from 100,000 large record dicts is dominated by memory access, so every
    plain path the rules need, nested ones included, is fetched in ONE generated pass over the
    records (``prefetch``; level by level when records are irregular); other paths are walked
    from their parent column on first use, and every column is cached for the batch.

    :param records: conversion records (dicts in the spec's conversion record shape).
    :param now: evaluation time (unix seconds) for age-based derived fields.
    :param prefetch: plain dotted paths (no index) to fetch up front, all in one pass over
        the records (``relationship`` read once for all its members, and so on).
    """

    def __init__(
        self, records: Sequence[dict[str, Any]], now: float, prefetch: Sequence[str] = ()
    ) -> None:
        self.records = records
        self.now = now
        self._columns: dict[str, Sequence[Any]] = {}
        self._numeric: dict[str, Sequence[Any]] = {}
        self._aggregates: dict[str, Sequence[Any]] = {}
        self._codes: dict[str, Codes] = {}
        self._exact: dict[str, pa.Array | None] = {}
        if not records:
            return
        fast = _prefetcher(tuple(prefetch))(records)
        if fast is not None:
            self._columns.update(fast)
            return
        # Some record lacks a key or has a non-dict level: the guarded way, level by level.
        children = _path_tree(prefetch)
        # Breadth first: a parent's column exists before its children are read from it.
        queue = [""]
        while queue:
            parent = queue.pop(0)
            keys = list(children.get(parent, ()))
            if not keys:
                continue
            rows = self.records if not parent else self._columns[parent]
            prefix = f"{parent}." if parent else ""
            for key, column in zip(keys, _fetch(rows, keys, nested=bool(parent)), strict=True):
                self._columns[prefix + key] = column
                queue.append(prefix + key)

    def column(self, path: str) -> Sequence[Any]:
        """Raw values of a path (or derived field), one per record; tuples for multi paths."""
        col = self._columns.get(path)
        if col is None:
            derived = DERIVED_FIELDS.get(path)
            col = derived.compute(self) if derived is not None else self._extract(path)
            self._columns[path] = col
        return col

    def _extract(self, path: str) -> Sequence[Any]:
        segments = parse_path(path)
        if (
            len(segments) == 3
            and segments[2].index is None
            and segments[1].index is None
            and path_is_multi(path)
        ):
            # relationship.<list>.<key>: every element's key, from the cached list column.
            lists = self.column(path.rpartition(".")[0])
            key = segments[2].key
            try:
                # Fast path: lists of dicts that all carry the key. Most lists hold one
                # element (one on-hold snapshot): a literal 1-tuple halves the cost of map().
                pick = itemgetter(key)
                return [
                    (lst[0][key],) if len(lst) == 1 else tuple(map(pick, lst)) if lst else ()
                    for lst in lists
                ]
            except (TypeError, KeyError):
                return [
                    tuple([e.get(key) for e in lst if type(e) is dict]) if type(lst) is list else ()
                    for lst in lists
                ]
        if any(s.index is not None for s in segments) or path_is_multi(path):
            getter = compile_getter(path)
            return [getter(r) for r in self.records]
        if len(segments) == 1:
            key = segments[0].key
            return [r.get(key) for r in self.records]
        # a.b.c: walk one step from the cached column of a.b (shared by sibling paths).
        parent = self.column(path.rpartition(".")[0])
        key = segments[-1].key
        return [x.get(key) if type(x) is dict else None for x in parent]

    def numeric(self, path: str) -> Sequence[Any]:
        """Values of a path as numbers (``None`` where not numeric); tuples for multi paths."""
        col = self._numeric.get(path)
        if col is None:
            raw = self.column(path)
            if path_is_multi(path) and path not in DERIVED_FIELDS:
                col = [tuple(_to_number(v) for v in values) for values in raw]
            elif set(map(type, raw)) <= _NUMERIC_TYPES:
                col = raw  # already numbers (the common case): no copy
            else:
                col = [v if (type(v) is int or type(v) is float) else _to_number(v) for v in raw]
            self._numeric[path] = col
        return col

    def aggregate(self, test: Test) -> Sequence[Any]:
        """Values of an aggregate, computed once per batch per distinct aggregate."""
        agg = test.agg
        assert agg is not None
        key = agg.label()
        col = self._aggregates.get(key)
        if col is None:
            col = compute_aggregate(agg, self.codes, self.numeric, self.exact_numbers)
            self._aggregates[key] = col
        return col

    def exact_numbers(self, path: str) -> pa.Array | None:
        """:meth:`numeric` as an Arrow array, when Arrow holds it exactly (shared by aggregates)."""
        if path not in self._exact:
            self._exact[path] = exact_numbers(self.numeric(path))
        return self._exact[path]

    def codes(self, path: str) -> Codes:
        """The column factorised to integer codes (shared by every aggregate grouping on it)."""
        found = self._codes.get(path)
        if found is None:
            found = self._codes[path] = factorize(self.column(path))
        return found


# ---------------------------------------------------------------------------------------------
# Compilation
# ---------------------------------------------------------------------------------------------


def _predicate(op: str, value: Any) -> Callable[[Any], bool]:
    """Per-value test used for multi-valued paths and untyped fields (slow path)."""
    if op == "eq":
        return lambda x: x == value
    if op in ("in", "not_in"):
        items = list(value)
        return lambda x: not isinstance(x, list | dict) and x in items
    if op in ("gt", "ge", "lt", "le", "between"):
        cmp = _numeric_cmp(op, value)

        def numeric(x: Any) -> bool:
            n = _to_number(x)
            return n is not None and cmp(n)

        return numeric
    if op == "regex":
        search = re.compile(value).search
        return lambda x: isinstance(x, str) and search(x) is not None
    if op == "exists":
        return _present
    raise ValueError(op)  # pragma: no cover - validation keeps other ops out


def _numeric_cmp(op: str, value: Any) -> Callable[[float], bool]:
    if op == "gt":
        return lambda n: n > value
    if op == "ge":
        return lambda n: n >= value
    if op == "lt":
        return lambda n: n < value
    if op == "le":
        return lambda n: n <= value
    lo, hi = value
    return lambda n: lo <= n <= hi


#: Negative operators are evaluated as "not (positive)"; for multi paths this means "no element".
_NEGATIONS = {"ne": "eq", "not_in": "in", "missing": "exists"}


def _compile_test(test: Test, lists: dict[str, list[Any]]) -> CompiledCondition:
    op, value = test.op, test.value
    if op in ("in", "not_in") and isinstance(value, str) and value.startswith("$"):
        value = lists[value[1:]]
    is_agg = test.agg is not None
    path = test.field
    multi = (not is_agg) and path is not None and path_is_multi(path)
    # A test has exactly one of field and agg (Test._subject): no field means an aggregate.
    ftype = "number" if path is None else describe_path(path).type
    numbers, raw = _column_readers(test)

    positive = _NEGATIONS.get(op, op)
    negate = op in _NEGATIONS

    if multi and positive in ("eq", "in") and not isinstance(value, list | dict):
        # Membership in the tuple of element values runs in C.
        if positive == "eq":
            return _compile_multi_eq(value, negate, raw)
        return _compile_multi_in(frozenset(value), negate, raw)
    untyped = ftype in ("any", "object")
    if multi or (untyped and op in ("exists", "missing")):
        return _compile_general(positive, value, negate=negate, multi=multi, raw=raw)
    # Fast paths: one list comprehension over a typed column.
    if op in ("eq", "ne"):
        return _compile_equality(op, value, raw)
    if op in ("in", "not_in"):
        return _compile_membership(op, frozenset(value), untyped, raw)
    if op in ("gt", "ge", "lt", "le", "between"):
        return _compile_numeric(op, value, numbers)
    if op == "regex":
        return _compile_regex(value, raw)
    return _compile_presence(op, raw)


def _column_readers(
    test: Test,
) -> tuple[Callable[[Batch], Sequence[Any]], Callable[[Batch], Sequence[Any]]]:
    """The test's column as numbers and as raw values (an aggregate is numbers either way)."""
    path = test.field
    if path is None:  # an aggregate (a test has exactly one of field and agg)

        def numbers(batch: Batch) -> Sequence[Any]:
            return batch.aggregate(test)

        def raw(batch: Batch) -> Sequence[Any]:
            return batch.aggregate(test)
    else:

        def numbers(batch: Batch) -> Sequence[Any]:
            return batch.numeric(path)

        def raw(batch: Batch) -> Sequence[Any]:
            return batch.column(path)

    return numbers, raw


def _compile_general(
    positive: str, value: Any, *, negate: bool, multi: bool, raw: Callable[[Batch], Sequence[Any]]
) -> CompiledCondition:
    """Slow but general: any element (multi) must satisfy the test; for untyped values,
    presence also looks at empty lists/objects."""
    pred = _predicate(positive, value)
    hit: Callable[[Any], bool] = pred
    if multi:

        def any_hit(v: Any) -> bool:
            return any(pred(x) for x in v)

        hit = any_hit
    return _select(hit, negate, raw)


def _compile_equality(
    op: str, value: Any, raw: Callable[[Batch], Sequence[Any]]
) -> CompiledCondition:
    if op == "eq":

        def run_eq(batch: Batch, idx: Idx) -> Idx:
            col = raw(batch)
            return [i for i in idx if col[i] == value]

        return run_eq

    def run_ne(batch: Batch, idx: Idx) -> Idx:
        col = raw(batch)
        return [i for i in idx if col[i] != value]

    return run_ne


def _compile_membership(
    op: str, items: frozenset[Any], untyped: bool, raw: Callable[[Batch], Sequence[Any]]
) -> CompiledCondition:
    if untyped:
        # Untyped values may be lists/objects (unhashable): never "in" a list of scalars.
        if op == "in":

            def run_in_untyped(batch: Batch, idx: Idx) -> Idx:
                col = raw(batch)
                return [i for i in idx if type(x := col[i]) not in _CONTAINERS and x in items]

            return run_in_untyped

        def run_not_in_untyped(batch: Batch, idx: Idx) -> Idx:
            col = raw(batch)
            return [i for i in idx if type(x := col[i]) in _CONTAINERS or x not in items]

        return run_not_in_untyped
    if op == "in":

        def run_in(batch: Batch, idx: Idx) -> Idx:
            col = raw(batch)
            return [i for i in idx if col[i] in items]

        return run_in

    def run_not_in(batch: Batch, idx: Idx) -> Idx:
        col = raw(batch)
        return [i for i in idx if col[i] not in items]

    return run_not_in


def _compile_regex(pattern: str, raw: Callable[[Batch], Sequence[Any]]) -> CompiledCondition:
    search = re.compile(pattern).search

    def run_regex(batch: Batch, idx: Idx) -> Idx:
        col = raw(batch)
        # Run the pattern once per distinct value (user agents, domains repeat a lot).
        try:
            values = {col[i] for i in idx}
        except TypeError:  # untyped paths may hold lists/objects
            return [i for i in idx if isinstance(x := col[i], str) and search(x) is not None]
        matching = {v for v in values if type(v) is str and search(v) is not None}
        return [i for i in idx if col[i] in matching] if matching else []

    return run_regex


def _compile_presence(op: str, raw: Callable[[Batch], Sequence[Any]]) -> CompiledCondition:
    """exists / missing on a scalar field: inline test (no call per value)."""
    if op == "exists":

        def run_exists(batch: Batch, idx: Idx) -> Idx:
            col = raw(batch)
            return [i for i in idx if (x := col[i]) is not None and x != ""]

        return run_exists

    def run_missing(batch: Batch, idx: Idx) -> Idx:
        col = raw(batch)
        return [i for i in idx if (x := col[i]) is None or x == ""]

    return run_missing


def _compile_multi_eq(
    value: Any, negate: bool, raw: Callable[[Batch], Sequence[Any]]
) -> CompiledCondition:
    if negate:

        def run_none_eq(batch: Batch, idx: Idx) -> Idx:
            col = raw(batch)
            return [i for i in idx if value not in col[i]]

        return run_none_eq

    def run_any_eq(batch: Batch, idx: Idx) -> Idx:
        col = raw(batch)
        return [i for i in idx if value in col[i]]

    return run_any_eq


def _compile_multi_in(
    items: frozenset[Any], negate: bool, raw: Callable[[Batch], Sequence[Any]]
) -> CompiledCondition:
    # No element in ``items`` is a disjoint tuple; any element in them is not.
    return _select(items.isdisjoint, not negate, raw)


def _select(
    hit: Callable[[Any], bool], negate: bool, raw: Callable[[Batch], Sequence[Any]]
) -> CompiledCondition:
    """The indices whose value ``hit`` accepts (``negate``: rejects), one call per value."""
    if negate:

        def run_not(batch: Batch, idx: Idx) -> Idx:
            col = raw(batch)
            return [i for i in idx if not hit(col[i])]

        return run_not

    def run(batch: Batch, idx: Idx) -> Idx:
        col = raw(batch)
        return [i for i in idx if hit(col[i])]

    return run


def _compile_numeric(
    op: str, value: Any, numbers: Callable[[Batch], Sequence[Any]]
) -> CompiledCondition:
    # One closure per operator so the comparison is inlined in the comprehension.
    if op == "gt":

        def run(batch: Batch, idx: Idx) -> Idx:
            col = numbers(batch)
            return [i for i in idx if (x := col[i]) is not None and x > value]
    elif op == "ge":

        def run(batch: Batch, idx: Idx) -> Idx:
            col = numbers(batch)
            return [i for i in idx if (x := col[i]) is not None and x >= value]
    elif op == "lt":

        def run(batch: Batch, idx: Idx) -> Idx:
            col = numbers(batch)
            return [i for i in idx if (x := col[i]) is not None and x < value]
    elif op == "le":

        def run(batch: Batch, idx: Idx) -> Idx:
            col = numbers(batch)
            return [i for i in idx if (x := col[i]) is not None and x <= value]
    else:
        lo, hi = value

        def run(batch: Batch, idx: Idx) -> Idx:
            col = numbers(batch)
            return [i for i in idx if (x := col[i]) is not None and lo <= x <= hi]

    return run


def compile_condition(condition: Any, lists: dict[str, list[Any]]) -> CompiledCondition:
    """Turn a validated condition into ``fn(batch, idx) -> matching idx`` (order preserved)."""
    if isinstance(condition, AllOf):
        children = [compile_condition(c, lists) for c in condition.all]

        def run_all(batch: Batch, idx: Idx) -> Idx:
            for child in children:  # narrowing: each child only sees what passed so far
                if not idx:
                    break
                idx = child(batch, idx)
            return idx

        return run_all
    if isinstance(condition, AnyOf):
        children = [compile_condition(c, lists) for c in condition.any]

        def run_any(batch: Batch, idx: Idx) -> Idx:
            matched: set[int] = set()
            rest = idx
            for child in children:  # each child only sees what no earlier child matched
                hit = child(batch, rest)
                if hit:
                    matched.update(hit)
                    rest = [i for i in rest if i not in matched]
                    if not rest:
                        break
            return [i for i in idx if i in matched] if matched else []

        return run_any
    if isinstance(condition, NotOf):
        child = compile_condition(condition.not_, lists)

        def run_not(batch: Batch, idx: Idx) -> Idx:
            hit = child(batch, idx)
            if not hit:
                return idx
            hit_set = set(hit)
            return [i for i in idx if i not in hit_set]

        return run_not
    return _compile_test(condition, lists)


# ---------------------------------------------------------------------------------------------
# Decisions
# ---------------------------------------------------------------------------------------------


class Decision:
    """The outcome of the rules for one record.

    :param index: position of the record in the evaluated batch.
    :param rule_id: the first rule that matched.
    :param action: that rule's action.
    :param columns: ``(label, column)`` of each value the rule tested; ``matched`` reads them.
    """

    __slots__ = ("_columns", "action", "index", "rule_id")

    def __init__(
        self, index: int, rule_id: str, action: str, columns: Sequence[tuple[str, Sequence[Any]]]
    ) -> None:
        self.index = index
        self.rule_id = rule_id
        self.action = action
        self._columns = columns

    @property
    def matched(self) -> dict[str, Any]:
        """The values the rule tested for this record, by field path or aggregate label.

        Built on access (for the audit), not while deciding.
        """
        i = self.index
        return {label: _jsonable(col[i]) for label, col in self._columns}

    def __repr__(self) -> str:
        return f"Decision({self.index}, {self.rule_id!r}, {self.action!r}, {self.matched!r})"


@dataclass
class Evaluation:
    """Decisions for a batch: one per matched record; unmatched records stay on hold.

    :param decisions: decisions in rule order, then record order.
    :param evaluated: how many records the rules were run on.
    :param per_rule: number of records decided by each rule id (every rule listed, 0 included).
    :param cpu_seconds: CPU time spent deciding (``time.process_time``).
    """

    decisions: list[Decision]
    evaluated: int
    per_rule: dict[str, int]
    cpu_seconds: float = 0.0
    _by_index: dict[int, Decision] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_index = {d.index: d for d in self.decisions}

    def for_index(self, index: int) -> Decision | None:
        """The decision of record ``index`` or ``None`` when no rule matched."""
        return self._by_index.get(index)

    @property
    def per_action(self) -> dict[str, int]:
        counts = Counter(d.action for d in self.decisions)
        return {a: counts.get(a, 0) for a in ("approve", "reject", "review", "hold")}

    @property
    def unmatched(self) -> int:
        return self.evaluated - len(self.decisions)


@dataclass(frozen=True)
class CompiledRule:
    """A rule with its compiled condition and the leaves whose values the audit records."""

    rule: Rule
    run: CompiledCondition
    tests: tuple[Test, ...]


class RuleSet:
    """Validated, compiled rules, ready to decide batches.

    :param rules_file: a validated :class:`RulesFile` (see :func:`load_rules`).
    :param source: where the rules came from, for logs.
    """

    def __init__(self, rules_file: RulesFile, source: str = "<rules>") -> None:
        self.rules_file = rules_file
        self.source = source
        self.compiled: list[CompiledRule] = [
            CompiledRule(
                rule,
                compile_condition(rule.when, rules_file.lists),
                tuple(t for t, _ in iter_tests(rule.when, ())),
            )
            for rule in rules_file.rules
            if rule.enabled
        ]
        self.prefetch: tuple[str, ...] = _prefetch_paths(t for c in self.compiled for t in c.tests)

    @classmethod
    def from_file(cls, path: str | Path) -> RuleSet:
        """Load, validate and compile a rules file (raises ``ConfigValidationError``)."""
        return cls(load_rules(path), source=str(path))

    def relationship_members(self) -> tuple[str, ...]:
        """``relationship`` members the rules read (to project pulled records)."""
        members: dict[str, None] = {}
        for compiled in self.compiled:
            for test in compiled.tests:
                agg = test.agg
                paths = [*agg.fields, *agg.per_fields] if agg is not None else [test.label()]
                for path in paths:
                    if path in DERIVED_FIELDS:
                        if any(n.startswith("relationship.") for n in DERIVED_FIELDS[path].needs):
                            members["on_hold_snapshots"] = None
                        continue
                    segments = parse_path(path)
                    if segments[0].key == "relationship" and len(segments) > 1:
                        members[segments[1].key] = None
        return tuple(members)

    @property
    def rules(self) -> list[Rule]:
        return [c.rule for c in self.compiled]

    @property
    def horizon_hours(self) -> float:
        """The widest time window of the rules' aggregates (``within_hours``), 0 without one.

        A conversion's windowed aggregates are complete only once this much time has passed
        after it, and computing them needs this much traffic before the review window.
        """
        hours = [
            t.agg.within_hours
            for c in self.compiled
            for t in c.tests
            if t.agg is not None and t.agg.within_hours is not None
        ]
        return float(max(hours, default=0.0))

    def rule(self, rule_id: str) -> Rule:
        return next(c.rule for c in self.compiled if c.rule.id == rule_id)

    def evaluate(
        self,
        records: Sequence[dict[str, Any]],
        *,
        now: float | None = None,
        eligible: Sequence[int] | None = None,
    ) -> Evaluation:
        """Decide records: the first matching rule wins; unmatched records get no decision.

        :param records: the whole batch; aggregates are computed over all of it.
        :param now: evaluation time in unix seconds (default: the current time).
        :param eligible: positions to decide (default: all); the others still count in
            aggregates (e.g. conversions too young to decide but sharing an IP).
        """
        started = time.process_time()
        # The batch allocates many small containers while every record is alive: generational
        # GC would rescan all of them again and again (measured: 2-3x slower on 100k records).
        with paused_gc():
            return self._evaluate(records, now, eligible, started)

    def _evaluate(
        self,
        records: Sequence[dict[str, Any]],
        now: float | None,
        eligible: Sequence[int] | None,
        started: float,
    ) -> Evaluation:
        batch = Batch(records, time.time() if now is None else now, self.prefetch)
        remaining: Idx = list(range(len(records))) if eligible is None else list(eligible)
        evaluated = len(remaining)
        decisions: list[Decision] = []
        per_rule: dict[str, int] = {}
        decided = bytearray(len(records))
        stale = 0  # decided records still listed in `remaining`
        for compiled in self.compiled:
            hit = compiled.run(batch, remaining) if remaining else []
            if stale and hit:
                hit = [i for i in hit if not decided[i]]
            per_rule[compiled.rule.id] = len(hit)
            if not hit:
                continue
            columns = [
                (t.label(), batch.column(t.field) if t.field is not None else batch.aggregate(t))
                for t in compiled.tests
            ]
            rule_id, action = compiled.rule.id, compiled.rule.action
            decisions.extend([Decision(i, rule_id, action, columns) for i in hit])
            for i in hit:
                decided[i] = 1
            stale += len(hit)
            # Rebuilding `remaining` costs a pass: do it once enough of it is decided.
            if stale * 20 > len(remaining):
                remaining = [i for i in remaining if not decided[i]]
                stale = 0
        return Evaluation(
            decisions=decisions,
            evaluated=evaluated,
            per_rule=per_rule,
            cpu_seconds=time.process_time() - started,
        )


def _prefetch_paths(tests: Any) -> tuple[str, ...]:
    """Plain paths the rules read (directly, via derived fields or via aggregates).

    Paths with an index or through a list stop at their last plain prefix (the list itself).
    """
    found: dict[str, None] = {}
    for test in tests:
        paths = [test.field] if test.field is not None else [*test.agg.fields, *test.agg.per_fields]
        if test.agg is not None and test.agg.within_hours is not None:
            paths.append("conversion_unix_timestamp")
        for path in paths:
            derived = DERIVED_FIELDS.get(path)
            if derived is not None:
                found.update(dict.fromkeys(derived.needs))
                continue
            plain: list[str] = []
            for segment in parse_path(path):
                plain.append(segment.key)
                if segment.index is not None or path_is_multi(".".join(plain)):
                    break
            if path_is_multi(".".join(plain)):
                plain.pop()
            if plain:
                found[".".join(plain)] = None
    return tuple(found)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value
