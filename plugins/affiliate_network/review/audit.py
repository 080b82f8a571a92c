"""The on-hold review's audit files: JSON Lines per attempt, written atomically."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import Any

from airflow.sdk import ObjectStoragePath


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "run"


def audit_dir(base: str, dag_id: str, run_id: str) -> ObjectStoragePath:
    """``<base>/onhold_review/<dag_id>/<run_id>/`` (the run id made path-safe)."""
    return ObjectStoragePath(base) / "onhold_review" / _safe_name(dag_id) / _safe_name(run_id)


def write_jsonl_atomic(path: ObjectStoragePath, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows as JSON Lines to a temporary sibling, then rename it onto ``path``.

    A reader never sees a half-written file: either the previous version or the new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True, default=str) + "\n")
            count += 1
    tmp.rename(path)
    return count


def read_jsonl(path: str | ObjectStoragePath) -> list[dict[str, Any]]:
    """Rows of a JSON Lines audit file."""
    target = path if isinstance(path, ObjectStoragePath) else ObjectStoragePath(path)
    with target.open("r", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
