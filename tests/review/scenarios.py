"""Issue 18's three scenarios on the planted sandbox data, printed as figures (not a test).

``uv run python -m tests.review.scenarios``: one clean run; a run SIGKILLed in the middle of its
rejections, then rerun; a run early enough that a group's youngest members wait, then the next
run. Each line gives the final on-hold states and how many planted fraud conversions were
approved. ``tests/review/test_across_runs.py`` asserts the same property over many steps.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from affiliate_network_sandbox.testing import start_sandbox
from tests.support.stepped_reviews import (
    DAYS,
    END_DATE,
    after_the_end,
    held_states,
    killed_after,
    planted_fraud,
    stepped_review,
)

CONN = "afn_scenarios"


def main() -> None:
    end_day = END_DATE
    with start_sandbox(
        seed=11, end_date=end_day.isoformat(), days=DAYS, conversions_per_day=300, on_hold_share=0.3
    ) as world:
        os.environ[f"AIRFLOW_CONN_{CONN.upper()}"] = json.dumps(
            {
                "conn_type": "affiliate_network",
                "host": world.base_url,
                "password": world.keys["network"],
                "extra": {"portal": "network"},
            }
        )
        tmp = Path(tempfile.mkdtemp())
        end = after_the_end(world)

        def report(name: str) -> dict[str, str | None]:
            states = held_states(world, CONN)
            approved = {i for i, s in states.items() if s == "approved"}
            counts = Counter(states.values())
            print(
                f"{name}: approved {counts['approved']}, rejected {counts['rejected']}, "
                f"still on hold {counts['on_hold']}; planted fraud approved: "
                f"{len(approved & planted_fraud(world))}",
                flush=True,
            )
            return states

        world.reset()
        stepped_review(CONN, tmp / "clean", end, "clean")
        clean = report("1. one clean run")

        world.reset()
        killed = killed_after(world, CONN, tmp / "killed", end, "run", 12)
        seen = Counter(held_states(world, CONN).values())
        print(f"   (killed: {killed}; at the kill {seen['rejected']} rejected)", flush=True)
        stepped_review(CONN, tmp / "killed", end, "run")
        print(f"   same as the clean run: {report('2. killed mid-rejections, rerun') == clean}")

        world.reset()
        stepped_review(CONN, tmp / "stepped", end - dt.timedelta(hours=30), "first")
        report("3a. a run 30 hours earlier")
        stepped_review(CONN, tmp / "stepped", end, "second")
        print(f"   same as the clean run: {report('3b. then the next run') == clean}")


if __name__ == "__main__":
    main()
