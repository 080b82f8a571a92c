"""The network page's FastAPI app, mounted on Airflow's API server by the UI plugin.

``GET /`` is the page (HTML, CSS and JS inline: the browser fetches nothing else, from no CDN);
``GET /api/overview`` its data, ``GET /api/file`` one file the page links to. Both data routes
ask Airflow's auth manager, as Airflow's own API routes do, for each DAG whose outputs they
show or serve: the request's user (its JWT cookie or bearer token,
:func:`airflow.api_fastapi.core_api.security.get_user`) and ``is_authorized_dag`` with that
DAG's id (and its team, in multi-team mode). Which DAG wrote a file is what its writer recorded
(:func:`affiliate_network.ui.network_data.run_dag_id`), from the file's path relative to the
base, never from a folder's name elsewhere. A user who may read none of the DAGs gets 403.

Run states and the human-review requests waiting come from Airflow's metadata (the models its
own REST API reads: ``DagRun``, ``HITLDetail``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from affiliate_network.ui.network_data import (
    DEFAULT_DAYS,
    AirflowRun,
    HumanRequest,
    QuotaSource,
    local_base,
    read_page,
    run_dag_id,
)
from affiliate_network.ui.sections import SECTION_DAGS

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

#: Where Airflow mounts the app (``fastapi_apps``' ``url_prefix``).
URL_PREFIX = "/affiliate-network"
__all__ = ["SECTION_DAGS", "URL_PREFIX", "create_app", "file_dags"]
_PAGE = Path(__file__).with_name("network_page.html")
#: The review operator's class: a DAG holding one is a review DAG.
_REVIEW_OPERATOR = "OnHoldReviewOperator"


def dag_reader(user: BaseUser) -> Callable[[str], bool]:
    """``may_read(dag_id)``: the auth manager's answer for this user (asked once per DAG)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    manager = get_auth_manager()

    @cache
    def may_read(dag_id: str) -> bool:
        details = DagDetails(id=dag_id, team_name=_team_of(dag_id))
        return bool(manager.is_authorized_dag(method="GET", details=details, user=user))

    return may_read


def _team_of(dag_id: str) -> str | None:
    """The team owning the DAG's bundle (multi-team mode, Airflow 3.2+), as Airflow's own DAG
    routes pass it: without it an auth manager lets a user of another team read the DAG."""
    from airflow.models.dag import DagModel

    lookup = getattr(DagModel, "get_team_name", None)  # absent before Airflow 3.2
    return lookup(dag_id) if lookup is not None else None


def data_base() -> str:
    """The output base the DAGs write to: the Airflow Variable, else the environment/default."""
    from airflow.models import Variable

    from affiliate_network.settings.paths import DATA_BASE_VARIABLE, default_data_base

    value = Variable.get(DATA_BASE_VARIABLE, default_var=None)
    return str(value) if value else default_data_base()


def quota_sources() -> list[QuotaSource]:
    """Each network connection's quota store (its own folder), or a note saying why not."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    from affiliate_network.hooks._budget import QuotaSettings, scope_of
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    with create_session() as session:
        conn_ids = [
            c.conn_id
            for c in session.query(Connection).filter(Connection.conn_type == "affiliate_network")
        ]
    conn_ids += [c for c in _env_conn_ids() if c not in conn_ids]
    out = []
    for conn_id in conn_ids:
        try:
            hook = AffiliateNetworkHook(conn_id)
            identity, portal = hook.network, hook.portal
            settings = QuotaSettings.from_extras(hook._extras, conn_id)
        except Exception as err:  # shown as a note: the page says why, not nothing
            first = (str(err).strip().splitlines() or [""])[0]
            out.append(QuotaSource(conn_id, note=f"cannot be read: {type(err).__name__}: {first}"))
            continue
        if settings.mode == "local":
            out.append(
                QuotaSource(
                    conn_id, note="quota: local (each process its own; nothing shared to show)"
                )
            )
            continue
        if settings.redis_url:
            out.append(QuotaSource(conn_id, note="quota in Redis (not read by this page)"))
            continue
        directory = Path(
            settings.directory
            or os.path.join(tempfile.gettempdir(), f"affiliate-network-quota-{os.getuid()}")
        )
        out.append(
            QuotaSource(
                conn_id,
                scope=scope_of(identity, portal),
                budget=settings.granular_per_hour,
                window_s=settings.granular_window_s,
                directory=directory,
            )
        )
    return out


def _env_conn_ids() -> list[str]:
    prefix = "AIRFLOW_CONN_"
    return [k[len(prefix) :].lower() for k in os.environ if k.startswith(prefix)]


def airflow_facts(
    first: dt.date, last: dt.date
) -> tuple[list[AirflowRun], list[HumanRequest], list[str]]:
    """Airflow's runs of the days shown (every DAG: the page filters by reader), the human-review
    requests it holds unanswered, and the DAGs holding the review operator."""
    import sqlalchemy as sa
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    lo = dt.datetime.combine(first - dt.timedelta(days=1), dt.time(), dt.UTC)
    hi = dt.datetime.combine(last + dt.timedelta(days=2), dt.time(), dt.UTC)
    runs: list[AirflowRun] = []
    waiting: list[HumanRequest] = []
    review_dags: list[str] = []
    with create_session() as session:
        rows = session.execute(
            sa.select(DagRun).where(DagRun.run_after >= lo, DagRun.run_after < hi)
        ).scalars()
        for r in rows:
            start = r.data_interval_start or r.logical_date or r.run_after
            runs.append(
                AirflowRun(
                    dag_id=r.dag_id,
                    run_id=r.run_id,
                    state=str(getattr(r.state, "value", r.state)),
                    day=start.date().isoformat() if start else None,
                    start_date=r.start_date.isoformat() if r.start_date else None,
                    end_date=r.end_date.isoformat() if r.end_date else None,
                    run_type=str(getattr(r.run_type, "value", r.run_type)),
                )
            )
        import importlib.util

        # Airflow before 3.1 has no human-in-the-loop requests (nothing can be waiting).
        if importlib.util.find_spec("airflow.models.hitl") is not None:
            from airflow.models.hitl import HITLDetail

            q = (
                sa.select(HITLDetail, TaskInstance)
                .join(TaskInstance, TaskInstance.id == HITLDetail.ti_id)
                # Unanswered, and its task still waiting for the answer (a cleared or failed
                # run's request is no longer asked): the API's response_received=false,
                # ti_state=deferred.
                .where(HITLDetail.responded_at.is_(None), TaskInstance.state == "deferred")
            )
            for detail, ti in session.execute(q):
                waiting.append(
                    HumanRequest(
                        dag_id=ti.dag_id,
                        run_id=ti.run_id,
                        task_id=ti.task_id,
                        map_index=ti.map_index,
                        subject=detail.subject,
                        created_at=detail.created_at.isoformat() if detail.created_at else None,
                    )
                )
        review_dags = sorted(
            {
                ti_dag
                for (ti_dag,) in session.execute(
                    sa.select(TaskInstance.dag_id)
                    .where(TaskInstance.operator == _REVIEW_OPERATOR)
                    .distinct()
                )
            }
        )
    return runs, waiting, review_dags


def overview(
    may_read: Callable[[str], bool], days: int = DEFAULT_DAYS, last: dt.date | None = None
) -> dict[str, Any]:
    """The page's data for what the user may read (runs in a worker thread)."""
    from affiliate_network.review.options import review_armed
    from affiliate_network.settings.paths import include_dir

    today = dt.datetime.now(dt.UTC).date()
    end = last or today
    first = end - dt.timedelta(days=days - 1)
    problems: list[str] = []
    try:
        runs, waiting, review_dags = airflow_facts(first, max(end, today))
        runs_in: list[AirflowRun] | None = runs
        waiting_in: list[HumanRequest] | None = waiting
    except Exception as err:  # the files still show; the page says Airflow was not asked
        log.warning("network page: Airflow's runs unavailable: %s", err)
        problems.append(f"Airflow's runs and requests unavailable ({type(err).__name__})")
        runs_in, waiting_in, review_dags = None, None, []
    page = read_page(
        data_base(),
        last=end,
        days=days,
        today=today,
        may_read=may_read,
        review_dags=review_dags,
        runs=runs_in,
        waiting=waiting_in,
        offer_state=include_dir() / "offer_state.yaml",
        quota=quota_sources(),
    )
    if not page.shown:
        raise HTTPException(status_code=403, detail="no read access to the network's DAGs")
    out = page.to_json()
    out["problems"] = problems + out["problems"]
    out["generated_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    out["dags"] = {s: d for s, d in SECTION_DAGS.items() if may_read(d)}
    try:
        out["armed"] = {"review": review_armed()}
    except Exception:
        out["armed"] = {"review": None}
    return out


def file_dags(base: Path, target: Path) -> list[str] | None:
    """The DAGs a reader must be allowed to read to get ``target`` (all of them), from its path
    relative to the base and what the writers recorded; ``None``: not a file this page serves."""
    from affiliate_network.helpers.run_records import RECORD_NAME

    try:
        rel = target.relative_to(base).parts
    except ValueError:
        return None
    if not rel or any(p in ("", ".", "..") for p in rel):
        return None
    name = rel[-1]
    if rel[0] == "conversions" and len(rel) == 3 and rel[1].startswith("date="):
        if name in ("_manifest.json", "_reconciliation.json") or (
            name.startswith("_changes-") and name.endswith(".json")
        ):
            return [SECTION_DAGS["reports"]]
        return None
    if rel[0] == "onhold_review":
        if len(rel) == 4 and rel[1] == "_state" and name == "human_decisions.jsonl":
            return _review_dags_of_conn(base, rel[2])
        if (
            len(rel) == 4
            and not rel[1].startswith(("_", "."))
            and (name.endswith(".jsonl") or RECORD_NAME.match(name))
        ):
            dag_id = run_dag_id(target.parent, base, [])
            return None if dag_id is None else [dag_id]
        return None
    if rel[0] == "sync" and len(rel) == 2 and name.startswith("ledger-") and name.endswith(".json"):
        return [SECTION_DAGS["sync"]]
    if rel[0] == "sync_runs" and len(rel) == 4 and RECORD_NAME.match(name):
        import json

        try:
            dag_id = json.loads(target.read_text(encoding="utf-8")).get("dag_id")
        except (OSError, ValueError):
            return None
        return [str(dag_id)] if dag_id else None
    return None


def _review_dags_of_conn(base: Path, conn_dir: str) -> list[str] | None:
    """Every review DAG whose runs recorded this connection (a reader must read them all)."""
    import json

    from affiliate_network.helpers.run_records import RECORD_NAME

    root = base / "onhold_review"
    dags: set[str] = set()
    legacy: set[str] = set()
    for dag_dir in (p for p in root.iterdir() if p.is_dir() and p.name[0] not in "_."):
        for run_dir in (p for p in dag_dir.iterdir() if p.is_dir()):
            records = [c for c in run_dir.iterdir() if RECORD_NAME.match(c.name)]
            if not records:
                legacy.add(dag_dir.name)  # no record names its connection: it may be this one
            for path in records:
                try:
                    doc = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                conn = str(doc.get("conn_id") or "")
                if "".join(c if c.isalnum() or c in "-_." else "_" for c in conn) == conn_dir:
                    dags.add(str(doc["dag_id"]))
    found = dags | legacy
    return sorted(found) if found else None


def _network_dags(base: Path, dags: list[str]) -> set[str]:
    """The DAGs whose reader is a reader of the page (only to answer 403, not 404, to the
    others): the sections' DAGs, the file's, and the review DAGs' folders under the base."""
    root = base / "onhold_review"
    found = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    return {*SECTION_DAGS.values(), *dags, *(d for d in found if d[0] not in "_.")}


def create_app() -> FastAPI:
    """The app Airflow mounts at :data:`URL_PREFIX`."""
    app = FastAPI(title="Affiliate network", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        # The page holds no data: it asks /api/overview, which checks the user.
        return HTMLResponse(_PAGE.read_text(encoding="utf-8"))

    @app.get("/api/overview")
    async def api_overview(
        user: GetUserDep,
        days: Annotated[int, Query(ge=1, le=120)] = DEFAULT_DAYS,
        last: Annotated[dt.date | None, Query()] = None,
    ) -> JSONResponse:
        may_read = dag_reader(user)
        return JSONResponse(await asyncio.to_thread(overview, may_read, days, last))

    @app.get("/api/file")
    async def api_file(
        user: GetUserDep,
        path: Annotated[str, Query(min_length=1, description="relative to the output base")],
    ) -> FileResponse:
        base_dir = local_base(await asyncio.to_thread(data_base))
        if base_dir is None:
            raise HTTPException(status_code=404, detail="not a file this page shows")
        base = base_dir.resolve()
        target = (base / path).resolve()
        dags = await asyncio.to_thread(file_dags, base, target) or []
        may_read = dag_reader(user)
        allowed = bool(dags) and all(may_read(d) for d in dags)
        if not allowed and not any(may_read(d) for d in _network_dags(base, dags)):
            raise HTTPException(status_code=403, detail="no read access to the network's DAGs")
        if not allowed or not target.is_file():
            raise HTTPException(status_code=404, detail="not a file this page shows")
        return FileResponse(target, media_type="text/plain; charset=utf-8")

    return app
