"""Checks of the older-Airflow smoke stage (.ci/older-airflow), run inside that release's venv.

``dags``: every DAG file of the folder parses with no import error and defines its DAG.
``deadlines``: with notifications on (the stage's include/), each DAG carries its deadline
alerts (``SyncCallback`` checkpoints, from 3.2; 3.1 gets none, with one warning) and they
survive the release's DAG serialization (what the scheduler stores).
``provider``: the release's ProvidersManager knows the connection type, and the connection
form's custom fields where the release reads them from the provider info (3.2+; 3.1 reads a
hook's wtforms widgets, which need the FAB provider: README's compatibility table).
"""

from __future__ import annotations

import os
import sys
from typing import Any

EXPECTED_DAGS = {"affiliate_daily_reports", "affiliate_onhold_review", "affiliate_offer_sync"}
#: Custom fields the connection form must show where the release reads ``conn-fields``.
EXPECTED_FIELDS = {"portal", "region", "eu_base_url"}


def _dag_bag() -> Any:
    """The DAG folder through the release's DagBag (its home and arguments moved in 3.3)."""
    try:  # Airflow 3.3+
        from airflow.dag_processing.dagbag import DagBag

        return DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    except ImportError:  # Airflow 3.1, 3.2
        from airflow.models.dagbag import DagBag as OldDagBag

        return OldDagBag(
            dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"], include_examples=False
        )


def check_dags() -> None:

    bag = _dag_bag()
    if bag.import_errors:
        for path, error in bag.import_errors.items():
            print(f"{path}: {error}", file=sys.stderr)
        raise SystemExit(f"{len(bag.import_errors)} DAG file(s) failed to import")
    missing = EXPECTED_DAGS - set(bag.dag_ids)
    if missing:
        raise SystemExit(f"DAGs not defined: {sorted(missing)}")
    print(f"{len(bag.dag_ids)} DAGs parsed with no import error: {sorted(bag.dag_ids)}")


def check_deadlines() -> None:
    import airflow

    try:  # Airflow 3.2+
        from airflow.serialization.serialized_objects import DagSerialization
    except ImportError:  # Airflow 3.1
        from airflow.serialization.serialized_objects import (  # type: ignore[attr-defined,no-redef]
            SerializedDAG as DagSerialization,
        )

    from affiliate_network.notify import CHECKPOINTS_MIN

    major, minor = (int(x) for x in airflow.__version__.split(".")[:2])
    bag = _dag_bag()
    if bag.import_errors:
        raise SystemExit(f"DAG files failed to import: {bag.import_errors}")
    for dag_id in sorted(EXPECTED_DAGS):
        dag = bag.dags[dag_id]
        alerts = list(dag.deadline or [])
        kinds = {type(alert.callback).__name__ for alert in alerts}
        if (major, minor) < (3, 2):  # none attached, one warning (compat.deadline_alert)
            if alerts:
                raise SystemExit(f"{dag_id}: {len(alerts)} deadline alerts on Airflow 3.1")
            print(f"{dag_id}: no deadline alert on Airflow {airflow.__version__} (as documented)")
            continue
        if len(alerts) != len(CHECKPOINTS_MIN) or kinds != {"SyncCallback"}:
            raise SystemExit(f"{dag_id}: {len(alerts)} deadline alerts of {kinds}")
        serialized = str(DagSerialization.to_dict(dag))
        if "affiliate_network.notify" not in serialized:
            raise SystemExit(f"{dag_id}: the deadline callback is not in the serialized DAG")
        print(f"{dag_id}: {len(alerts)} deadline alerts (SyncCallback), serialized")


def check_provider() -> None:
    import airflow
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    hooks = manager.hooks
    if "affiliate_network" not in hooks:
        raise SystemExit("connection type affiliate_network not registered")
    info = hooks["affiliate_network"]
    print(
        f"connection type affiliate_network: {info.hook_class_name} ({info.connection_testable=})"
    )
    fields = {
        key.rsplit("__", 1)[-1]
        for key in manager.connection_form_widgets
        if key.startswith("extra__affiliate_network__")
    }
    behaviour = manager.field_behaviours.get("affiliate_network")
    major, minor = (int(x) for x in airflow.__version__.split(".")[:2])
    print(f"Airflow {airflow.__version__}: form fields {sorted(fields)}, behaviour {behaviour}")
    if (major, minor) >= (3, 2) and not fields >= EXPECTED_FIELDS:
        raise SystemExit(f"connection form lacks {sorted(EXPECTED_FIELDS - fields)}")


if __name__ == "__main__":
    {"dags": check_dags, "deadlines": check_deadlines, "provider": check_provider}[sys.argv[1]]()
