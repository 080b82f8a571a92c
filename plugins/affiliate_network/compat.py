"""Where a name lives in each supported Airflow 3 release: the one place that knows.

The provider supports Airflow 3.1, 3.2 and 3.3 and declares a floor, no ceiling
(``pyproject.toml``; CI runs a smoke stage per older release and the newest 3.x on the index,
``.ci/older-airflow``). Airflow moved some names into
the Task SDK (``airflow.sdk``) after 3.1; their older home is the core package. Every module of
the provider and every DAG file imports these names from here, never from a version-dependent
path, so supporting another release means editing this file only.

=============================  ==========================  =================================
name                           3.2 and later               3.1
=============================  ==========================  =================================
``AirflowFailException``       ``airflow.sdk.exceptions``  ``airflow.exceptions``
``AirflowNotFoundException``   ``airflow.sdk.exceptions``  ``airflow.exceptions``
``CronDataIntervalTimetable``  ``airflow.sdk``             ``airflow.timetables.interval``
=============================  ==========================  =================================

And what a release lacks: asset events carry partition keys (``add_partitions``) from 3.3 on
(:func:`add_asset_partitions`; before, the event's ``extra`` lists the partitions). Deadline
alerts (:func:`deadline_alert`) differ in all three: 3.1 runs only an ``AsyncCallback`` (its
``SyncCallback``, in ``airflow.sdk.definitions.deadline``, is refused) and fails to create a
run whose deadline counts from its queued time in ``airflow dags test``, so the provider
attaches none there (one warning); 3.2 runs a ``SyncCallback`` (in
``airflow.sdk.definitions.callback``) but its ``airflow dags test`` fails at the end of a run
of a DAG with deadlines (they are left out in that command); only 3.3 takes
``DeadlineAlert(name=...)``.

Each name is taken from its newest home first: the Task SDK's classes are the ones the 3.2+
task runner catches (3.1's runner catches the core ones), and the SDK timetable keeps the
scheduler's serialization modules out of every DAG parse.
"""

from __future__ import annotations

import datetime as dt
import inspect
import sys
import warnings
from typing import Any

try:  # Airflow 3.2+
    from airflow.sdk.exceptions import (
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSkipException,
    )
except ImportError:  # Airflow 3.1
    from airflow.exceptions import (  # type: ignore[no-redef,attr-defined]
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSkipException,
    )

try:  # Airflow 3.2+
    from airflow.sdk import CronDataIntervalTimetable
except ImportError:  # Airflow 3.1
    from airflow.timetables.interval import (  # type: ignore[assignment]
        CronDataIntervalTimetable,
    )

__all__ = [
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSkipException",
    "CronDataIntervalTimetable",
    "add_asset_partitions",
    "deadline_alert",
]


def timetable_timezone(timetable: Any) -> str | None:
    """The IANA name of the zone a timetable cuts its intervals in, or None when it has none.

    The Task SDK's timetables (3.2+) keep it as ``timezone`` (a name or a pendulum zone), the
    core ones (3.1, and the scheduler's side) as ``_timezone``.
    """
    zone = getattr(timetable, "timezone", None) or getattr(timetable, "_timezone", None)
    if zone is None:
        return None
    name = zone if isinstance(zone, str) else getattr(zone, "name", None)
    return str(name) if name else None


def add_asset_partitions(event: Any, keys: list[str]) -> bool:
    """Add partition keys to an outlet's asset event where the release has them (3.3+).

    :param event: the task's outlet event accessor (``context["outlet_events"][asset]``).
    :param keys: the partition keys (``date=YYYY-MM-DD``).
    :return: whether the release took them; older releases have only the event's ``extra``.
    """
    add = getattr(event, "add_partitions", None)
    if add is None:  # Airflow 3.1, 3.2: no partitioned asset events
        return False
    add(keys)
    return True


def deadline_alert(
    interval: dt.timedelta, *, callback: str, kwargs: dict[str, Any], name: str
) -> Any | None:
    """A deadline alert on the run's queued time, built the way this release takes one.

    :param interval: how long after the run was queued the callback fires.
    :param callback: import path of the callable the executor runs (a ``SyncCallback``).
    :param kwargs: the callback's keyword arguments (JSON values).
    :param name: the alert's name, shown by releases that have one (3.3+).
    :return: the alert, or None (warned once per process) on Airflow 3.1, whose deadline
        alerts run no ``SyncCallback`` and whose ``airflow dags test`` fails on a run-queued
        deadline (the run is not in the database yet when it is evaluated), and under
        ``airflow dags test`` (3.2, 3.3), which fails at the end of such a run.
    """
    from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

    try:  # Airflow 3.2+: the executor runs a SyncCallback
        from airflow.sdk.definitions.callback import SyncCallback
    except ImportError:  # Airflow 3.1
        _left_out(
            "Airflow 3.1 runs no deadline alert this provider can attach: the "
            "late_after_minutes of include/notifications.yaml take effect from Airflow 3.2 "
            "(the failure and review notifiers work on 3.1)"
        )
        return None
    named = "name" in inspect.signature(DeadlineAlert.__init__).parameters  # 3.3+
    if sys.argv[1:3] == ["dags", "test"]:
        # dag.test() of Airflow 3.2 and 3.3 (checked on 3.3.2) ends every run of a DAG with a
        # deadline in an error (it reads the DAG's alerts as database ids); a test run is never
        # late anyway.
        _left_out(
            "deadline alerts are left out under `airflow dags test`, which fails on DAGs that "
            "have them (Airflow 3.2, 3.3); the scheduler gets them"
        )
        return None
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=interval,
        callback=SyncCallback(callback, kwargs=kwargs),
        **({"name": name} if named else {}),
    )


#: Whether this process warned that it attaches no deadline alert.
_DEADLINES_WARNED = False


def _left_out(why: str) -> None:
    global _DEADLINES_WARNED
    if not _DEADLINES_WARNED:
        _DEADLINES_WARNED = True
        warnings.warn(why, UserWarning, stacklevel=3)
