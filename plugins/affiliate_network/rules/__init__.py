"""The on-hold rules language: a YAML rules file in, one decision per conversion out.

Each conversion gets the action of the first rule whose condition holds; no match leaves it on
hold. The language (actions, conditions, operators, fields, aggregates) is documented once, in
``docs/onhold-review.md``, "The rules file"; ``affiliate-network-rules fields`` lists the fields.

Validation happens before anything is pulled: every problem of a file is reported at once in a
:class:`~affiliate_network.exceptions.ConfigValidationError`, one line each, as
``FILE:LINE: rule 'ID': FIELD: MESSAGE`` (``affiliate-network-rules validate FILE...`` or
``python -m affiliate_network.rules`` from the shell). Evaluation is column-wise
(:mod:`affiliate_network.rules.engine`).
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
