"""docs/reference.md is what docs/generate_reference.py writes from the current docstrings."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "generate_reference.py"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_reference", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_is_generated_from_the_current_docstrings() -> None:
    generated = _generator().render()
    committed = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert committed == generated, (
        "docs/reference.md is stale: run python docs/generate_reference.py"
    )


def test_the_reference_lists_the_hook_and_every_operator_the_dags_use() -> None:
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    for name in (
        "AffiliateNetworkHook",
        "iter_conversions",
        "ConversionReportOperator",
        "AffiliateReportOperator",
        "ReconciliationOperator",
        "PublishChangesOperator",
        "OnHoldReviewOperator",
        "OnHoldReviewApplyOperator",
        "OfferStateSyncOperator",
        "ScrubRateSyncOperator",
    ):
        assert re.search(rf"^#+ `{name}`", text, re.MULTILINE), name
    # Each operator's constructor arguments come with their docs and its templated fields.
    assert "- `lookback_days`: when set (templated)" in text
    assert "Templated fields: `from_date`, `to_date`" in text


def test_a_docstring_renders_params_raises_and_roles() -> None:
    render = _generator().render_docstring
    doc = """First line with ``code`` and :class:`~a.b.Hook`.

    :param day: the day,
        continued.
    :raises ConfigValidationError: bad day.
    """
    assert render(doc) == (
        "First line with `code` and `Hook`.\n\n"
        "- `day`: the day, continued.\n"
        "- raises `ConfigValidationError`: bad day.\n"
    )
