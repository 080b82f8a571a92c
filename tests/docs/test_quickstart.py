"""docs/quickstart.md, followed end to end with the sandbox standing in for the network.

Every command block marked ``<!-- quickstart-test -->`` (or ``<!-- quickstart-test: label -->``)
runs in order, in bash, in a fresh ``AIRFLOW_HOME`` with a SQLite metadata DB; ``export`` lines
carry over from block to block as they would in one shell. The one substitution is the block
marked ``quickstart-test: values`` (step 0): the sandbox's URL and keys, a scratch project folder
and data base, and the sandbox's desired offer state. During the block labelled ``arm review``
the test answers the review's human requests ("Keep on hold") through Airflow's REST API, as a
reviewer would under Required actions (``demo.run``'s answerer).

Checked over HTTP against the sandbox's request log: the dry runs write nothing; arming the
offer sync makes it write (and the review still nothing); arming the review makes it write its
decisions. At the end every DAG run in the metadata DB succeeded, for the three DAGs.
"""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
MARK = re.compile(r"<!-- quickstart-test(?::\s*([^>]*?))?\s*-->\s*\n```bash\n(.*?)```", re.DOTALL)
DAG_IDS = {"affiliate_daily_reports", "affiliate_onhold_review", "affiliate_offer_sync"}
#: Answers the review's human requests while the block runs (as the demo does).
ANSWERING = (
    "import subprocess, sys\n"
    "from demo.run import _wait_answering_reviews\n"
    "proc = subprocess.Popen(sys.argv[1:])\n"
    "_wait_answering_reviews(proc, 'affiliate_onhold_review')\n"
    "sys.exit(proc.returncode)\n"
)


def marked_blocks(text: str) -> list[tuple[str, str]]:
    """``(label, commands)`` of every marked bash block, in document order."""
    return [((label or "").strip(), body) for label, body in MARK.findall(text)]


def _writes(sandbox: Any) -> dict[str, int]:
    """Write requests the sandbox saw, by route (reads: GET and the reporting POST queries)."""
    routes: dict[str, int] = sandbox.request_counts().get("by_route") or {}
    return {
        route: n
        for route, n in routes.items()
        if not route.startswith("GET ")
        and not (route.startswith("POST ") and "/reporting/" in route and "onhold" not in route)
    }


def _base_env(home: Path) -> dict[str, str]:
    """A clean shell environment: nothing of the test session's Airflow or provider settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "AFFILIATE_", "AFN_", "MY_", "PYTEST", "COV_"))
    }
    env.update(
        {
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__API_AUTH__JWT_SECRET": "quickstart-test-" + "x" * 64,
            "PYTHONPATH": str(ROOT),  # the review answerer imports demo.run
        }
    )
    return env


@pytest.mark.timeout(1200)  # ~13 Airflow commands; minutes on a loaded 2-core machine
def test_the_quickstart_ends_green_and_writes_nothing_until_each_writer_is_armed(
    sandbox, tmp_path
) -> None:
    blocks = marked_blocks(QUICKSTART.read_text(encoding="utf-8"))
    labels = [label for label, _ in blocks]
    assert labels[0] == "values"
    assert {"arm offer sync", "arm review"} <= set(labels)
    values = {
        "MY_SOURCE": str(ROOT),
        "MY_PROJECT": str(tmp_path / "project"),
        "MY_API_URL": sandbox.base_url,
        "MY_NETWORK_KEY": sandbox.keys["network"],
        "MY_AFFILIATE_2001_KEY": sandbox.keys["affiliate"]["2001"],
        "MY_AFFILIATE_2002_KEY": sandbox.keys["affiliate"]["2002"],
        "MY_DATA_BASE": str(tmp_path / "data"),
        "MY_OFFER_STATE": str(ROOT / "demo" / "include" / "offer_state.yaml"),
    }
    # The production block names exactly these variables.
    assert set(re.findall(r"^export (MY_\w+)=", blocks[0][1], re.MULTILINE)) == set(values)
    home = tmp_path / "home"
    home.mkdir()
    env = _base_env(home)
    state = tmp_path / "state.sh"
    state.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in values.items()))
    migrate = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True, text=True
    )
    assert migrate.returncode == 0, migrate.stderr[-2000:]

    log = tmp_path / "quickstart.log"
    timings: list[str] = []
    for label, commands in blocks[1:]:
        script = f"set -euo pipefail\nsource {state}\n{commands}\nexport -p > {state}.next\n"
        argv = ["bash", "-c", script]
        if label == "arm review":
            argv = [sys.executable, "-c", ANSWERING, *argv]
        started = time.monotonic()
        with log.open("a") as out:
            out.write(f"\n===== block {label or commands.splitlines()[0]!r}\n")
            out.flush()
            proc = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
        timings.append(f"{time.monotonic() - started:5.1f}s {commands.splitlines()[0][:60]}")
        assert proc.returncode == 0, log.read_text()[-4000:]
        Path(f"{state}.next").replace(state)
        writes = _writes(sandbox)
        if "dags test affiliate_offer_sync" in commands and not label:
            assert writes == {}, "a writer wrote before it was armed"
        elif label == "arm offer sync":
            assert writes, "the armed offer sync sent nothing"
            assert not [r for r in writes if "onhold" in r], writes
        elif label == "arm review":
            assert [r for r in writes if "onhold" in r], writes
    print("\n".join(timings))

    with sqlite3.connect(home / "airflow.db") as db:
        runs = db.execute("SELECT dag_id, state FROM dag_run").fetchall()
    assert {dag_id for dag_id, _ in runs} == DAG_IDS
    assert {state for _, state in runs} == {"success"}, runs
    # Each DAG ran from the scratch project's copy, with its include/ and data base.
    assert (tmp_path / "data" / "conversions").is_dir()


def test_the_readme_links_the_quickstart_first() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_link = re.search(r"\]\(([^)]+)\)", readme)
    assert first_link is not None
    assert first_link.group(1) == "docs/quickstart.md"


def test_every_step_says_required_or_optional_and_the_safe_default() -> None:
    text = QUICKSTART.read_text(encoding="utf-8")
    steps = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    numbered = [s for s in steps if re.match(r"\d+\. ", s)]
    assert len(numbered) >= 14
    for step in numbered:
        title = step.splitlines()[0]
        if title.startswith(("0.", "15.")):  # the values; what to watch
            continue
        assert re.search(r"\((required|optional|recommended)", title), title
        if "check" in title or "reading" in title:
            continue
        assert "Safe default" in step or "safe default" in step, title
