"""Settings that must agree, checked where they are read: the DAG's timezone and network.yaml's.

A daily report DAG's timetable cuts days at midnight in its own timezone, fixed when the DAG file
is parsed (``NETWORK_TIMEZONE`` in ``dags/affiliate_daily_reports.py``); the report operators cut
the same days at midnight in the network's reporting timezone (``timezone`` in
``include/network.yaml``). When the two differ (a New York network, the DAG left on UTC), a run's
window ends inside a network day that has not finished, and that half day is landed as if it
were whole.

:func:`check_network_timezone` is the one check. The DAG file calls it when it is parsed (a
mismatch is an import error of the file, shown on the DAG list), and the report operators call
it with their DAG's timetable zone when a run starts, before any request. It reads only the
``timezone`` (or ``timezone_id``) key of ``network.yaml`` and its line, with PyYAML's composer
(already loaded by ``airflow.sdk``), and keeps its verdict per file version (path, size and
modification time): a DAG processor re-parsing the file every few seconds reads it once. The
file's full validation (unknown keys, the currency, name against id) stays with the one loader,
:func:`affiliate_network.settings.models.load_network_settings`, when a task reads it; a file
this check cannot read is left to that loader's error.
"""

from __future__ import annotations

import os
from pathlib import Path

from affiliate_network.exceptions import ConfigValidationError, UnknownTimezoneError

#: The file and the fields compared.
NETWORK_FILE = "network.yaml"
TIMEZONE_FIELD = "timezone"
TIMEZONE_ID_FIELD = "timezone_id"
#: Larger files are left to the loader (a DAG parse reads no more than this). PyYAML's composer
#: keeps an alias as one shared node, so a file of aliases does not grow here either.
MAX_READ_BYTES = 64 * 1024

# (path, size, mtime_ns, dag timezone, setting, where) -> the error, or None when they agree.
_VERDICTS: dict[tuple[str, int, int, str, str, str], ConfigValidationError | None] = {}


def _canonical(name: str) -> str:
    """The API table's name of a zone (``Etc/UTC`` -> ``UTC``); an unknown name as given."""
    from affiliate_network.api.timezones import TIMEZONES, id_for_name

    try:
        return TIMEZONES[id_for_name(name)]
    except (UnknownTimezoneError, ValueError, KeyError):
        return name


def same_zone(a: str, b: str) -> bool:
    """Whether two zone names are the same zone of the API's table (``Etc/UTC`` is ``UTC``)."""
    return _canonical(a) == _canonical(b)


def _network_timezone(path: Path) -> tuple[str, str, int] | None:
    """``(zone name, field, line)`` of ``network.yaml``, or None when it cannot be read here."""
    import yaml

    from affiliate_network.api.timezones import name_for_id

    try:
        text = path.read_text(encoding="utf-8")
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(node, yaml.MappingNode):
        return None
    fields = {
        key.value: value
        for key, value in node.value
        if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.ScalarNode)
    }
    if TIMEZONE_FIELD in fields:
        value = fields[TIMEZONE_FIELD]
        return str(value.value), TIMEZONE_FIELD, value.start_mark.line + 1
    if TIMEZONE_ID_FIELD in fields:
        value = fields[TIMEZONE_ID_FIELD]
        try:
            name = name_for_id(int(value.value))
        except (UnknownTimezoneError, ValueError):
            return None
        return name, TIMEZONE_ID_FIELD, value.start_mark.line + 1
    return None


def check_network_timezone(dag_timezone: str, *, setting: str, where: str) -> None:
    """Refuse a DAG timezone that differs from the network's reporting timezone.

    :param dag_timezone: the zone the DAG's timetable cuts days in (an IANA name).
    :param setting: what holds it, for the error (``NETWORK_TIMEZONE``, "the timetable's
        timezone of DAG x").
    :param where: the file that holds it (the DAG file).
    :raises ConfigValidationError: the two differ; the message names both values, the DAG file
        and setting, and ``network.yaml`` with its line and field.
    """
    from affiliate_network.settings.paths import include_dir

    path = include_dir() / NETWORK_FILE
    try:
        stat = os.stat(path)
    except OSError:
        return  # the loader says what is missing when a task reads it
    if stat.st_size > MAX_READ_BYTES:
        return  # not a network.yaml to read at parse: the loader's size guard says so
    key = (str(path), stat.st_size, stat.st_mtime_ns, str(dag_timezone), setting, where)
    if key not in _VERDICTS:
        if len(_VERDICTS) > 64:  # a long-lived process over many edits of the file
            _VERDICTS.clear()
        _VERDICTS[key] = _verdict(path, str(dag_timezone), setting, where)
    error = _VERDICTS[key]
    if error is not None:
        raise ConfigValidationError(str(error))


def _verdict(
    path: Path, dag_timezone: str, setting: str, where: str
) -> ConfigValidationError | None:
    found = _network_timezone(path)
    if found is None:
        return None
    network, field, line = found
    if same_zone(network, dag_timezone):
        return None
    return ConfigValidationError(
        f"{where}: {setting} is {dag_timezone!r} but {path} line {line}, field {field}, is "
        f"{network!r}: the DAG's days end at midnight {dag_timezone} while the network's "
        f"report days end at midnight {network}, so a run would land a day that has not "
        f"finished. Make them equal: set {setting} to {_canonical(network)!r}, or fix "
        f"{field} in {path}."
    )
