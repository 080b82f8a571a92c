"""Registers the network page with Airflow 3.1+ (a FastAPI app and its external views).

The plugin loader imports this file from the plugins folder (``.airflowignore`` keeps it out of
the package folders). The app is mounted on the API server at ``/affiliate-network``; the views
show it inside Airflow's UI: in the navigation and as a tab of each of the three DAGs.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from affiliate_network.ui.app import SECTION_DAGS, URL_PREFIX, create_app

_VIEW: dict[str, Any] = {"name": "Affiliate network", "href": f"{URL_PREFIX}/", "category": None}


class AffiliateNetworkUiPlugin(AirflowPlugin):
    """The network page: ``fastapi_apps`` serves it, ``external_views`` link it in the UI."""

    name = "affiliate_network_ui"
    fastapi_apps = [
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "Affiliate network page"}
    ]
    external_views = [
        {**_VIEW, "destination": "nav", "url_route": "affiliate-network"},
        # A tab on the three DAGs' pages (an iframe of the same page).
        # Airflow fills {DAG_ID} in (destination dag): the page puts that DAG's section first.
        {
            **_VIEW,
            "name": "Network",
            "href": f"{URL_PREFIX}/?dag_id={{DAG_ID}}",
            "destination": "dag",
            "url_route": "affiliate-network-dag",
        },
    ]


__all__ = ["SECTION_DAGS", "AffiliateNetworkUiPlugin"]
