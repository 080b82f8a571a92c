"""Where a name lives in each supported Airflow 3 release: the one place that knows.

The provider supports Airflow 3.1, 3.2 and 3.3 (``pyproject.toml`` declares the tested range;
CI runs a smoke stage per older release, ``.ci/older-airflow``). Airflow moved some names into
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
(:func:`add_asset_partitions`; before, the event's ``extra`` lists the partitions).

Each name is taken from its newest home first: the Task SDK's classes are the ones the 3.2+
task runner catches (3.1's runner catches the core ones), and the SDK timetable keeps the
scheduler's serialization modules out of every DAG parse.
"""

from __future__ import annotations

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
]


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
