"""A rules file that is not UTF-8 gets the same clear error as any other bad rules file."""

from __future__ import annotations

from pathlib import Path

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.rules.loader import load_rules

EXAMPLE = Path(__file__).resolve().parents[2] / "include" / "onhold_rules.yaml"


def _error(path: Path) -> ConfigValidationError:
    with pytest.raises(ConfigValidationError) as info:
        load_rules(path)
    return info.value


def test_a_latin1_byte_names_the_file_line_and_byte_position(tmp_path):
    data = EXAMPLE.read_bytes()
    at = data.index(b"description:")
    path = tmp_path / "rules.yaml"
    path.write_bytes(data[:at] + b"# r\xe8gle\n" + data[at:])
    err = _error(path)
    line = data[:at].count(b"\n") + 1
    assert str(err).startswith(f"Invalid rules file {path} (1 problem):")
    assert f"{path}:{line}: not UTF-8 text: byte {at + 3} (line {line}) is 0xe8" in str(err)
    (problem,) = err.errors
    assert (problem.source, problem.line) == (str(path), line)


def test_a_utf16_rules_file_is_named_as_such(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_bytes(EXAMPLE.read_text(encoding="utf-8").encode("utf-16"))
    assert "looks like UTF-16" in str(_error(path))


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + EXAMPLE.read_bytes())
    assert load_rules(path).rules
