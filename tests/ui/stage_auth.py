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


def _without_dags() -> set[str]:
    return {u.strip() for u in os.environ.get(USERS_WITHOUT_DAGS, "").split(",") if u.strip()}


class StageAuthManager(SimpleAuthManager):
    """The simple auth manager, except that the named users are granted no DAG."""

    def is_authorized_dag(self, *, user: Any, **kwargs: Any) -> bool:
        if user.get_name() in _without_dags():
            return False
        return bool(super().is_authorized_dag(user=user, **kwargs))
