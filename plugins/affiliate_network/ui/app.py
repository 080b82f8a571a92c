"""The network page's FastAPI app, mounted on Airflow's API server by the UI plugin.

``GET /`` is the page (HTML, CSS and JS inline: the browser fetches nothing else, from no CDN);
``GET /api/overview`` its data, ``GET /api/file`` one file the page links to. The two data
routes ask Airflow's auth manager, as Airflow's own API routes do: the request's user (its JWT
cookie or bearer token, :func:`airflow.api_fastapi.core_api.security.get_user`) and read access
(with the DAG's team, in multi-team mode) to each DAG whose outputs a section shows
(``reports``: the daily reports DAG, ``review``: the on-hold review, ``sync``: the offer sync).
A user who may read none of them gets 403 and the page shows nothing but that.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from affiliate_network.ui.network_data import DEFAULT_DAYS, read_page

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

#: Where Airflow mounts the app (``fastapi_apps``' ``url_prefix``).
URL_PREFIX = "/affiliate-network"
#: The DAG whose read access opens each section of the page.
SECTION_DAGS: dict[str, str] = {
    "reports": "affiliate_daily_reports",
    "review": "affiliate_onhold_review",
    "sync": "affiliate_offer_sync",
}
#: Files the page links to (by name): nothing else under the base is served.
_SERVED = ("_manifest.json", "_reconciliation.json")
_PAGE = Path(__file__).with_name("network_page.html")


def readable_sections(user: BaseUser) -> list[str]:
    """The page's sections whose DAG the user may read (the auth manager's answer).

    :param user: the request's user.
    """
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    manager = get_auth_manager()
    return [
        section
        for section, dag_id in SECTION_DAGS.items()
        if manager.is_authorized_dag(
            method="GET", details=DagDetails(id=dag_id, team_name=_team_of(dag_id)), user=user
        )
    ]


def _team_of(dag_id: str) -> str | None:
    """The team owning the DAG's bundle (multi-team mode, Airflow 3.2+), as Airflow's own DAG
    routes pass it: without it an auth manager lets a user of another team read the DAG."""
    from airflow.models.dag import DagModel

    lookup = getattr(DagModel, "get_team_name", None)  # absent before Airflow 3.2
    return lookup(dag_id) if lookup is not None else None


def _sections(user: GetUserDep) -> list[str]:
    sections = readable_sections(user)
    if not sections:
        raise HTTPException(status_code=403, detail="no read access to the network's DAGs")
    return sections


def data_base() -> str:
    """The output base the DAGs write to: the Airflow Variable, else the environment/default."""
    from airflow.models import Variable

    from affiliate_network.settings.paths import DATA_BASE_VARIABLE, default_data_base

    value = Variable.get(DATA_BASE_VARIABLE, default_var=None)
    return str(value) if value else default_data_base()


def _networks() -> tuple[Path | None, dict[str, tuple[str, int, float]]]:
    """The quota file store and, per network connection, its store scope and budget."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    from affiliate_network.hooks._budget import QuotaSettings, scope_of
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    networks: dict[str, tuple[str, int, float]] = {}
    directory: Path | None = None
    with create_session() as session:
        conn_ids = [
            c.conn_id
            for c in session.query(Connection).filter(Connection.conn_type == "affiliate_network")
        ]
    conn_ids += [c for c in _env_conn_ids() if c not in conn_ids]
    for conn_id in conn_ids:
        try:
            hook = AffiliateNetworkHook(conn_id)
            identity, portal = hook.network, hook.portal
            settings = QuotaSettings.from_extras(hook._extras, conn_id)
            if settings.mode == "local" or settings.redis_url:
                continue
        except Exception as err:  # a broken connection shows nothing here; its DAG says why
            log.info("network page: no quota row for %s (%s)", conn_id, type(err).__name__)
            continue
        directory = Path(
            settings.directory
            or os.path.join(tempfile.gettempdir(), f"affiliate-network-quota-{os.getuid()}")
        )
        networks[conn_id] = (
            scope_of(identity, portal),
            settings.granular_per_hour,
            settings.granular_window_s,
        )
    return directory, networks


def _env_conn_ids() -> list[str]:
    prefix = "AIRFLOW_CONN_"
    return [k[len(prefix) :].lower() for k in os.environ if k.startswith(prefix)]


def overview(sections: list[str], days: int = DEFAULT_DAYS) -> dict[str, Any]:
    """The page's data for the sections the user may read (runs in a worker thread)."""
    from affiliate_network.settings.paths import include_dir

    directory, networks = _networks()
    page = read_page(
        data_base(),
        days=days,
        offer_state=include_dir() / "offer_state.yaml",
        quota_dir=directory,
        networks=networks,
        sections=sections,
    )
    out = page.to_json()
    out["sections"] = sections
    out["generated_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    out["dags"] = {s: SECTION_DAGS[s] for s in sections}
    return out


def create_app() -> FastAPI:
    """The app Airflow mounts at :data:`URL_PREFIX`."""
    app = FastAPI(title="Affiliate network", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        # The page holds no data: it asks /api/overview, which checks the user.
        return HTMLResponse(_PAGE.read_text(encoding="utf-8"))

    @app.get("/api/overview")
    async def api_overview(
        sections: Annotated[list[str], Depends(_sections)],
        days: Annotated[int, Query(ge=1, le=120)] = DEFAULT_DAYS,
    ) -> JSONResponse:
        return JSONResponse(await asyncio.to_thread(overview, sections, days))

    @app.get("/api/file")
    async def api_file(
        sections: Annotated[list[str], Depends(_sections)],
        path: Annotated[str, Query(min_length=1)],
    ) -> FileResponse:
        target = Path(path).resolve()
        base = Path(await asyncio.to_thread(data_base)).resolve()
        section = "sync" if target.parent.name == "sync" else (
            "review" if "onhold_review" in target.parts else "reports"
        )  # fmt: skip
        allowed = (
            target.is_relative_to(base)
            and section in sections
            and (target.name in _SERVED or target.suffix == ".jsonl"
                 or (section == "sync" and target.name.startswith("ledger-")))
        )  # fmt: skip
        if not allowed or not target.is_file():
            raise HTTPException(status_code=404, detail="not a file this page shows")
        return FileResponse(target, media_type="text/plain; charset=utf-8")

    return app
