"""The four YAML files users edit, fuzzed: every input loads or gives a ConfigValidationError.

Three kinds of input per file: the shipped file with leaves replaced, keys added or dropped
(near misses, the common mistake), arbitrary YAML documents, and arbitrary bytes (wrong
encodings, binary). Never a traceback from deep inside (``KeyError``, ``TypeError``...), and the
message always names the file.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.rules.loader import load_rules
from affiliate_network.settings.models import load_affiliate_report_targets, load_network_settings
from affiliate_network.sync.loader import load_desired_state

INCLUDE = Path(__file__).resolve().parents[2] / "include"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["UTC", "America/New_York", "parquet", "jsonl", "$blocked", "active", ""]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), inner, max_size=4),
    ),
    max_leaves=15,
)


def _mutate(node: Any, data: st.DataObject, depth: int = 0) -> Any:
    """A near miss of ``node``: some leaves replaced, keys added or dropped."""
    if data.draw(st.integers(0, 9), label=f"touch@{depth}") == 0:
        return data.draw(values, label="replacement")
    if isinstance(node, dict):
        out = {}
        for key, child in node.items():
            if data.draw(st.integers(0, 19), label="drop") == 0:
                continue
            out[key] = _mutate(child, data, depth + 1)
        if data.draw(st.integers(0, 14), label="add") == 0:
            out[data.draw(st.text(max_size=12), label="new key")] = data.draw(values)
        return out
    if isinstance(node, list):
        return [_mutate(child, data, depth + 1) for child in node]
    return node


LOADERS: dict[str, Callable[[Path], Any]] = {
    "onhold_rules.yaml": load_rules,
    "offer_state.yaml": load_desired_state,
    "network.yaml": lambda _path: load_network_settings(),
    "reports.yaml": lambda _path: load_affiliate_report_targets(),
}


def _load(tmp: Path, name: str, content: bytes) -> None:
    path = tmp / name
    path.write_bytes(content)
    message = name
    try:
        LOADERS[name](path)
    except ConfigValidationError as err:
        message = str(err)
    assert name in message, message


@pytest.fixture
def include_dir(tmp_path_factory, monkeypatch) -> Path:
    tmp = tmp_path_factory.mktemp("include")
    for shipped in INCLUDE.iterdir():
        (tmp / shipped.name).write_bytes(shipped.read_bytes())
    monkeypatch.setenv("AFFILIATE_NETWORK_INCLUDE_DIR", str(tmp))
    return tmp


@pytest.mark.parametrize("name", sorted(LOADERS))
@given(data=st.data())
def test_near_misses_of_the_shipped_files(include_dir, name, data) -> None:
    shipped = yaml.safe_load((INCLUDE / name).read_text())
    doc = _mutate(copy.deepcopy(shipped), data)
    _load(include_dir, name, yaml.safe_dump(doc, allow_unicode=True).encode())


@pytest.mark.parametrize("name", sorted(LOADERS))
@given(doc=values)
def test_arbitrary_documents(include_dir, name, doc) -> None:
    _load(include_dir, name, yaml.safe_dump(doc, allow_unicode=True).encode())


@pytest.mark.parametrize("name", sorted(LOADERS))
@given(content=st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(lambda t: t.encode("utf-16")),
    st.text(max_size=200).map(lambda t: t.encode("latin-1", errors="replace")),
))  # fmt: skip
def test_arbitrary_bytes(include_dir, name, content) -> None:
    _load(include_dir, name, content)


# What the fuzzing found (each raised a TypeError, a pydantic or a YAML constructor error before):
@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("network.yaml", "?\n", "unknown field"),
        ("network.yaml", "=\n", "not valid YAML"),
        ("reports.yaml", "!!python/name:os.system\n", "not valid YAML"),
        ("onhold_rules.yaml", "=\n", "not valid YAML"),
        (
            "onhold_rules.yaml",
            "lists: {blocked: null}\nrules:\n  - {id: a, description: d, action: reject,"
            " when: {field: sub1, in: $blocked}}\n",
            "is not a list of values",
        ),
        (
            "onhold_rules.yaml",
            "lists: {0: [a]}\nrules:\n  - {id: a, description: d, action: reject,"
            " when: {field: sub1, in: $nope}}\n",
            "unknown list",
        ),
    ],
)
def test_found_by_fuzzing(include_dir, name, text, words) -> None:
    (include_dir / name).write_text(text)
    with pytest.raises(ConfigValidationError, match=words):
        LOADERS[name](include_dir / name)
