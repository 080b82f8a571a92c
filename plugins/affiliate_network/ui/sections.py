"""The DAG owning each section of the network page (no Airflow import)."""

from __future__ import annotations

#: The DAG whose read access opens each section of the page (a review run or sync run is
#: shown to readers of the DAG its record names; these are the defaults).
SECTION_DAGS: dict[str, str] = {
    "reports": "affiliate_daily_reports",
    "review": "affiliate_onhold_review",
    "sync": "affiliate_offer_sync",
}
