"""The on-hold rules language: a YAML rules file in, one decision per conversion out.

A rules file (``include/onhold_rules.yaml``) is an ordered list of rules. Each conversion gets
the action of the FIRST rule whose condition holds; no match leaves it on hold::

    version: 1
    lists:                                   # optional named lists, used as $name
      blocked_sub1: [blk-botnet-01, blk-incent-07]
    rules:
      - id: blocked-sub1                     # unique; letters, digits, _ . -
        description: Traffic from a blocklisted sub ID
        action: reject                       # approve | reject | review | hold
        when: {field: sub1, in: $blocked_sub1}

      - id: duplicate-ip-24h
        description: Three or more conversions from one IP within 24 hours
        action: reject
        when:
          agg: {count_same: conversion_user_ip, within_hours: 24}
          ge: 3

      - id: risky-big-sale
        description: Big sale with a proxy signal, ask a person
        action: review
        when:
          all:
            - {field: sale_amount, ge: 1000}
            - any:
                - {field: ip_mismatch, eq: true}
                - {field: click_to_conversion_seconds, lt: 30}
            - not: {field: relationship.affiliate.network_affiliate_id, in: [2001, 2002]}

Actions: ``approve`` / ``reject`` are sent to the network; ``review`` asks a person in the
Airflow UI; ``hold`` keeps the conversion on hold and stops evaluation (later rules are not
tried). A rule with ``enabled: false`` is skipped.

Conditions
    ``all: [...]``, ``any: [...]``, ``not: {...}`` nest freely. A leaf tests a ``field`` (or an
    ``agg``) with one operator, written ``{field: F, OP: VALUE}`` or ``{field: F, op: OP,
    value: VALUE}``.

Operators
    ``eq``, ``ne``, ``in`` / ``not_in`` (a list or ``$list``), ``gt``, ``ge``, ``lt``, ``le``,
    ``between: [low, high]`` (inclusive), ``regex`` (Python syntax, searched anywhere in the text:
    anchor with ``^...$``; ``(?i)`` ignores case), ``exists: true`` / ``missing: true`` (a value is
    missing when absent, null or empty). Ordering operators compare numbers; a missing value never
    satisfies ``eq``/``gt``/... (``ne``/``not_in`` are true for it).

Fields
    Any field of the spec's conversion record (``sale_amount``, ``sub1``, ``email``...), and dotted
    paths into ``relationship`` (``relationship.affiliate.network_affiliate_id``). Lists take an
    index (``relationship.on_hold_snapshots[-1].status``: the last one) or are walked element by
    element (``relationship.on_hold_snapshots.status``: true when ANY element matches; ``ne``,
    ``not_in`` and ``missing`` then mean NO element matches). Unknown fields are rejected with a
    suggestion. Derived fields: ``click_to_conversion_seconds``, ``ip_mismatch``, ``age_seconds``,
    ``age_hours``, ``hold_age_hours``, ``on_hold_status``, ``on_hold_conversion_id``,
    ``email_domain``, ``payout_to_sale_ratio`` (``affiliate-network-rules fields`` lists them).

Aggregates (``agg:``), computed once per run over every on-hold candidate of the window
    - ``count_same: F`` (or a list of fields) - how many candidates share this conversion's value
      (itself included); ``within_hours: H`` counts only those within H hours of this one (before
      or after); ``per: G`` adds a grouping field.
    - ``share_same: F`` [``per: G``] - that count divided by all candidates (or by the G group).
    - ``count_distinct: F, per: G`` - distinct F values in this conversion's G group.
    - ``ratio_to_median: F`` [``per: G``] - the value divided by the median of F (in the group).
    Empty values never group together: their aggregate is missing.

Validation happens before anything is pulled: every problem of a file is reported at once in a
:class:`~affiliate_network.exceptions.ConfigValidationError`, one line each, as
``FILE:LINE: rule 'ID': FIELD: MESSAGE``. From the shell or CI:
``affiliate-network-rules validate FILE...`` (or ``python -m affiliate_network.rules``).

Evaluation is column-wise (see :mod:`affiliate_network.rules.engine`): 100,000 conversions
against 30 rules take about a second of CPU (``bench/bench_rules.py``).
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy exports: DAG files import the operators, which import rules.fields (through review/);
# parsing a DAG must not build the pydantic models.
_EXPORTS = {
    "Decision": "affiliate_network.rules.engine",
    "Evaluation": "affiliate_network.rules.engine",
    "RuleSet": "affiliate_network.rules.engine",
    "RuleError": "affiliate_network.rules.loader",
    "load_rules": "affiliate_network.rules.loader",
    "loads_rules": "affiliate_network.rules.loader",
    "RulesFile": "affiliate_network.rules.model",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
