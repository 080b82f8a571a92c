"""The browser stage's auth manager: Airflow's simple auth manager and one user without DAGs.

Airflow 3.3's simple auth manager lets every role read every DAG (only multi-team mode separates
them, and that needs teams, team-owned bundles and executors per team); a deployment on FAB or
Keycloak gives a person access to some DAGs, or none. This subclass keeps everything of the
simple auth manager (sign-in form, tokens, roles) and answers "no" to every DAG question for
the users named in ``AFN_STAGE_USERS_WITHOUT_DAGS`` (comma separated), as such a deployment
answers for a person granted no DAG. ``deployment.ui_stage`` copies this file into
``$AIRFLOW_HOME/config`` (on every component's ``sys.path``) and names the class in
``AIRFLOW__CORE__AUTH_MANAGER``.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

#: The environment variable naming the users who may read no DAG.
USERS_WITHOUT_DAGS = "AFN_STAGE_USERS_WITHOUT_DAGS"
#: The environment variable granting users some DAGs only: ``user=dag1|dag2;user2=dag3``.
DAG_GRANTS = "AFN_STAGE_DAG_GRANTS"


def _without_dags() -> set[str]:
    return {u.strip() for u in os.environ.get(USERS_WITHOUT_DAGS, "").split(",") if u.strip()}


def _grants() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for item in filter(None, os.environ.get(DAG_GRANTS, "").split(";")):
        user, _, dags = item.partition("=")
        out[user.strip()] = {d.strip() for d in dags.split("|") if d.strip()}
    return out


class StageAuthManager(SimpleAuthManager):
    """The simple auth manager, except that the named users are granted no DAG, and the users
    of :data:`DAG_GRANTS` only the DAGs named there (as FAB or Keycloak grant DAGs per role)."""

    def is_authorized_dag(self, *, user: Any, **kwargs: Any) -> bool:
        name = user.get_name()
        if name in _without_dags():
            return False
        grants = _grants()
        if name in grants:
            details = kwargs.get("details")
            dag_id = getattr(details, "id", None)
            if dag_id is None or dag_id not in grants[name]:
                return False
        return bool(super().is_authorized_dag(user=user, **kwargs))
