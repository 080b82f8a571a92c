"""Where the package finds its YAML config and where it writes outputs.

Both are settings, not constants: DAGs run from a checkout, from docker-compose mounts
(``/opt/airflow/include``) or from an installed wheel, and outputs may live on ``s3://``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from affiliate_network.exceptions import DataBaseUnavailableError

#: Environment variable naming the folder of YAML config (rules, desired state, reports).
INCLUDE_DIR_ENV = "AFFILIATE_NETWORK_INCLUDE_DIR"
#: Environment variable / Airflow Variable naming the output base (local path or URL).
DATA_BASE_ENV = "AFFILIATE_NETWORK_DATA_BASE"
DATA_BASE_VARIABLE = "affiliate_network_data_base"

# plugins/affiliate_network/settings/paths.py -> project root in a checkout.
PROJECT_ROOT = Path(__file__).resolve().parents[3]
#: A checkout (the package under ``<root>/plugins``), not an installed wheel (site-packages).
IN_CHECKOUT = Path(__file__).resolve().parents[2].name == "plugins"


def _dags_folder() -> Path:
    """Airflow's configured DAGs folder (``[core] dags_folder``)."""
    from airflow.configuration import conf

    return Path(conf.get("core", "dags_folder")).expanduser()


def _deployment_root() -> Path:
    """Where ``include/`` and ``data/`` live: the checkout, or beside the DAGs folder.

    An installed wheel has no project folder of its own; Airflow projects keep ``include/`` next
    to ``dags/`` (Astro, the official docker-compose ``/opt/airflow/{dags,include}``).
    """
    if IN_CHECKOUT:
        return PROJECT_ROOT
    return _dags_folder().parent


def include_dir() -> Path:
    """Folder holding ``onhold_rules.yaml``, ``offer_state.yaml``, ``reports.yaml``.

    Order: ``$AFFILIATE_NETWORK_INCLUDE_DIR``; in a checkout ``<project>/include``; installed as
    a wheel, ``include/`` beside Airflow's DAGs folder (``<dags_folder>/../include``), else
    inside it (``<dags_folder>/include``). Not an Airflow Variable: DAG files read this folder
    at parse time (the report timetable's timezone), where a Variable lookup is a round trip
    to the metadata DB on every parse.
    """
    explicit = os.environ.get(INCLUDE_DIR_ENV)
    if explicit:
        return Path(explicit)
    beside = _deployment_root() / "include"
    if IN_CHECKOUT or beside.is_dir():
        return beside
    inside = _dags_folder() / "include"
    return inside if inside.is_dir() else beside


def default_data_base() -> str:
    """Output base when no Airflow Variable is set: env, else ``data/`` beside ``include/``.

    That is ``<project>/data`` in a checkout, ``<dags_folder>/../data`` for an installed wheel.
    """
    return os.environ.get(DATA_BASE_ENV) or str(_deployment_root() / "data")


def resolve_data_base(explicit: str | None = None, *, outside_task: bool = False) -> str:
    """The output base: the one resolver of the package.

    Order: ``explicit`` (an operator's ``base_path``), else the Airflow Variable
    ``affiliate_network_data_base``, else ``$AFFILIATE_NETWORK_DATA_BASE``, else
    :func:`default_data_base` (``<project>/data``, or beside the DAGs folder for a wheel).

    Airflow's ``Variable.get`` turns a failed lookup (API server restarting, a network blip)
    into "not set", which would silently move the outputs, and the sync's ledger, to the local
    default. Inside a task an unset Variable is therefore asked for once more through the task's
    own channel to the API server, which tells "not found" from "could not ask": only a real
    "not found" falls back; anything else raises :class:`DataBaseUnavailableError` (retryable).

    :param explicit: a base given by the caller; used as is.
    :param outside_task: the command line: Airflow may be absent, the fallback order applies.
    :raises DataBaseUnavailableError: inside a task, the Variable could not be read.
    """
    if explicit:
        return explicit
    from airflow.sdk import Variable

    value = Variable.get(DATA_BASE_VARIABLE, default=None)
    if value:
        return str(value)
    if not outside_task:
        value = _variable_in_task(DATA_BASE_VARIABLE)
        if value:
            return value
    return default_data_base()


def _variable_in_task(key: str, send: Any = None) -> str | None:
    """A Variable read through the running task's supervisor channel.

    :param key: Variable key.
    :param send: the channel's ``send`` (default: the running task's; ``None`` outside a task).
    :returns: the value, or ``None`` when the API server answers "not found" (or no task runs).
    :raises DataBaseUnavailableError: any other answer, or no answer.
    """
    from airflow.sdk.exceptions import ErrorType
    from airflow.sdk.execution_time.comms import ErrorResponse, GetVariable, VariableResult

    if send is None:
        from airflow.sdk.execution_time import task_runner

        comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
        if comms is None:  # not inside a task (tests calling execute, the CLI)
            return None
        send = comms.send
    try:
        answer = send(GetVariable(key=key))
    except Exception as err:  # any failure to ask is "unavailable", never "not set"
        raise DataBaseUnavailableError(_unavailable(key, type(err).__name__)) from None
    if isinstance(answer, VariableResult):
        return answer.value or None
    if isinstance(answer, ErrorResponse) and answer.error == ErrorType.VARIABLE_NOT_FOUND:
        return None
    kind = answer.error.value if isinstance(answer, ErrorResponse) else type(answer).__name__
    raise DataBaseUnavailableError(_unavailable(key, kind))


def _unavailable(key: str, why: str) -> str:
    return (
        f"could not read the Airflow Variable {key!r} ({why}); the task stops instead of writing "
        "to a default location it was not configured with (a sync would read an empty ledger "
        "there). It is retried; if it persists, check the API server"
    )
