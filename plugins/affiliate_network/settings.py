"""Network and report settings: the one loader of ``include/network.yaml`` and ``reports.yaml``.

Every error names the file, the line and the field, and is raised before any request is sent.
The network's reporting timezone is named by IANA name; its API id comes from the one table of
the API's timezone ids (:mod:`affiliate_network.timezones`). An explicit ``timezone_id`` is
allowed but must agree with the name.

Read at run time only (never at DAG parse time), except ``include/notifications.yaml``: the DAG
files read it when parsed, for the deadline alert (:func:`load_notification_settings`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import pydantic

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.paths import include_dir
from affiliate_network.timezones import (
    TIMEZONES,
    UnknownTimezoneError,
    id_for_name,
    name_for_id,
)

if TYPE_CHECKING:
    import yaml

NETWORK_CONFIG_FILE = "network.yaml"
REPORTS_CONFIG_FILE = "reports.yaml"

#: Documented limit of the conversion report: the prior 365 days only; older dates are an error.
CONVERSION_REPORT_HISTORY_DAYS = 365

_NETWORK_KEYS = ("timezone", "timezone_id", "currency_id")
_REPORTS_SECTION_KEYS = ("format", "columns", "affiliates")
_AFFILIATE_KEYS = ("affiliate_id", "conn_id", "columns", "format")


@dataclasses.dataclass(frozen=True)
class NetworkSettings:
    """The network's reporting settings (``include/network.yaml``).

    :param timezone: IANA name of the reporting timezone (a zone of the API's table).
    :param timezone_id: the API's id of that zone.
    :param currency_id: reporting currency code, or None for the network's default.
    :param source: the file they were read from.
    """

    timezone: str
    timezone_id: int
    currency_id: str | None
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        """``{"timezone", "timezone_id", "currency_id"}`` (the shape older callers read)."""
        return {
            "timezone": self.timezone,
            "timezone_id": self.timezone_id,
            "currency_id": self.currency_id,
        }


# -- YAML with line numbers --------------------------------------------------------------------


@dataclasses.dataclass
class _Doc:
    """A parsed YAML document with the line (1-based) of every mapping key and list item."""

    path: Path
    data: Any
    lines: dict[tuple[object, ...], int]

    def where(self, *loc: Any) -> str:
        """``file:line: a.b[2].c`` for a location (the nearest known line)."""
        probe = tuple(loc)
        while probe and probe not in self.lines:
            probe = probe[:-1]
        line = self.lines.get(probe)
        field = ""
        for part in loc:
            # Keys may be anything YAML allows (null, numbers): shown as text.
            name = str(part)
            field += f"[{name}]" if isinstance(part, int) else (f".{name}" if field else name)
        at = f"{self.path}:{line}" if line else str(self.path)
        return f"{at}: {field}" if field else at


def _read_yaml(name: str) -> _Doc:
    import yaml

    from affiliate_network import yamlguard
    from affiliate_network.textfile import NotUtf8Error, decode_utf8

    path = include_dir() / name
    try:
        text = decode_utf8(path.read_bytes())
    except FileNotFoundError as err:
        raise ConfigValidationError(f"{path}: file not found") from err
    except NotUtf8Error as err:
        raise ConfigValidationError(f"{path}:{err.line}: {err}") from err
    try:
        node = yamlguard.compose(text)
    except yaml.YAMLError as err:
        # No chained cause: a traceback would print PyYAML's snippet of the file.
        raise ConfigValidationError(_yaml_problem(path, err)) from None
    if (problem_at := yamlguard.graph_problem(node)) is not None:
        raise ConfigValidationError(f"{path}:{problem_at[0]}: {problem_at[1]}")
    lines, duplicates = yamlguard.index_lines(node)
    if duplicates:
        loc, dup_line, first = duplicates[0]
        raise ConfigValidationError(
            f"{path}:{dup_line}: {loc[-1]} appears twice (first at line {first}); YAML would "
            "silently keep the last"
        )
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:  # e.g. a tag no safe constructor knows (``!!python/...``)
        raise ConfigValidationError(_yaml_problem(path, err)) from None
    return _Doc(path, data if data is not None else {}, lines)


def _yaml_problem(path: Path, err: yaml.YAMLError) -> str:
    """``FILE:LINE: invalid YAML: PROBLEM (column C)``, without the snippet of the file."""
    from affiliate_network import yamlguard

    line, problem = yamlguard.describe_error(err)
    return f"{path}{f':{line}' if line else ''}: invalid YAML: {problem}"


def _check_keys(doc: _Doc, mapping: Mapping[str, Any], allowed: tuple[str, ...], *loc: Any) -> None:
    for key in mapping:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigValidationError(
                f"{doc.where(*loc, key)}: unknown field (fields: {', '.join(allowed)}){hint}"
            )


# -- network.yaml ------------------------------------------------------------------------------


def load_network_settings() -> NetworkSettings:
    """``include/network.yaml``, validated against the API's timezone table.

    :raises ConfigValidationError: unknown zone name, unknown id, name/id mismatch, wrong types
        or unknown fields; the message names file, line and field.
    """
    doc = _read_yaml(NETWORK_CONFIG_FILE)
    data = doc.data
    if not isinstance(data, dict):
        raise ConfigValidationError(f"{doc.where()}: the top level must be a mapping")
    _check_keys(doc, data, _NETWORK_KEYS)
    tz_name, tz_id, currency = (
        data.get("timezone"),
        data.get("timezone_id"),
        data.get("currency_id"),
    )
    if tz_name is None and tz_id is None:
        raise ConfigValidationError(
            f"{doc.where()}: timezone: required (the network's reporting timezone as an IANA "
            "name, e.g. UTC or America/New_York)"
        )
    if tz_id is not None and (isinstance(tz_id, bool) or not isinstance(tz_id, int)):
        raise ConfigValidationError(f"{doc.where('timezone_id')}: must be an integer")
    try:
        table_name = name_for_id(tz_id) if tz_id is not None else None
    except UnknownTimezoneError as err:
        raise ConfigValidationError(f"{doc.where('timezone_id')}: {err}") from err
    if tz_name is not None:
        try:
            named_id = id_for_name(tz_name)
        except UnknownTimezoneError as err:
            raise ConfigValidationError(f"{doc.where('timezone')}: {err}") from err
        if tz_id is not None and tz_id != named_id:
            raise ConfigValidationError(
                f"{doc.where('timezone_id')}: {tz_id} is {table_name} in the API's timezone "
                f"table, but timezone is {tz_name!r} (id {named_id}); fix one of the two, or "
                "drop timezone_id (it is looked up from the name)"
            )
        tz_id = named_id
    assert isinstance(tz_id, int)
    if currency is not None and (not isinstance(currency, str) or len(currency.strip()) != 3):
        raise ConfigValidationError(
            f"{doc.where('currency_id')}: must be a 3-letter currency code such as USD"
        )
    return NetworkSettings(
        timezone=TIMEZONES[tz_id],
        timezone_id=tz_id,
        currency_id=currency.strip().upper() if currency else None,
        source=str(doc.path),
    )


def load_network_config() -> dict[str, Any]:
    """``include/network.yaml`` as ``{"timezone", "timezone_id", "currency_id"}``.

    Validated against the API's timezone table, as :func:`load_network_settings`.
    """
    return load_network_settings().as_dict()


def resolve_timezone(
    timezone_id: int | str | None, timezone: str | None, settings: NetworkSettings | None = None
) -> tuple[int, str]:
    """``(id, IANA name)`` from an operator's explicit arguments, else the network settings.

    Either argument alone is completed from the table; both must agree. With neither, the
    network settings decide (there is no operator-level default).
    """
    where = "operator argument"
    if timezone_id is not None and str(timezone_id).strip() != "":
        try:
            tz_id = int(str(timezone_id).strip())
            name = name_for_id(tz_id)
        except (ValueError, UnknownTimezoneError) as err:
            raise ConfigValidationError(f"{where} timezone_id: {err}") from err
        if timezone:
            try:
                named = id_for_name(timezone)
            except UnknownTimezoneError as err:
                raise ConfigValidationError(f"{where} network_timezone: {err}") from err
            if named != tz_id:
                raise ConfigValidationError(
                    f"{where} timezone_id {tz_id} is {name} in the API's table, but "
                    f"network_timezone is {timezone!r} (id {named})"
                )
        return tz_id, name
    if timezone:
        try:
            tz_id = id_for_name(timezone)
        except UnknownTimezoneError as err:
            raise ConfigValidationError(f"{where} network_timezone: {err}") from err
        return tz_id, TIMEZONES[tz_id]
    cfg = settings or load_network_settings()
    return cfg.timezone_id, cfg.timezone


def check_report_history(
    first_day: dt.date, timezone: str, *, today: dt.date | None = None
) -> None:
    """Refuse a conversion-report day older than the documented 365-day history.

    :raises ConfigValidationError: before anything is sent, saying why and what to do.
    """
    import zoneinfo

    now = today or dt.datetime.now(zoneinfo.ZoneInfo(timezone)).date()
    oldest = now - dt.timedelta(days=CONVERSION_REPORT_HISTORY_DAYS)
    if first_day < oldest:
        raise ConfigValidationError(
            f"day {first_day} is older than the conversion report's documented history (the "
            f"prior {CONVERSION_REPORT_HISTORY_DAYS} days: {oldest} is the oldest day the API "
            f"serves today, in {timezone}); nothing was requested. Partitions already landed "
            f"for older days stay as they are. Backfill or re-pull from {oldest} on "
            f"(airflow backfill create --from-date {oldest} ...)."
        )


# -- reports.yaml ------------------------------------------------------------------------------


def load_affiliate_report_targets() -> list[dict[str, Any]]:
    """Mapped-task kwargs for the affiliate report operator, from ``include/reports.yaml``.

    One entry per affiliate: ``affiliate_network_conn_id``, ``affiliate_id``, ``columns``,
    ``format``. Every entry is validated here (file, line, entry and field), so a bad file fails
    the config task before any report is requested.
    """
    from affiliate_network.reports.schema import FORMATS, validate_report_columns

    doc = _read_yaml(REPORTS_CONFIG_FILE)
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("affiliate_reports"), dict):
        raise ConfigValidationError(f"{doc.where('affiliate_reports')}: missing mapping")
    section = data["affiliate_reports"]
    _check_keys(doc, section, _REPORTS_SECTION_KEYS, "affiliate_reports")
    default_fmt = section.get("format", "parquet")
    if default_fmt not in FORMATS:
        raise ConfigValidationError(
            f"{doc.where('affiliate_reports', 'format')}: must be one of {list(FORMATS)}"
        )
    default_cols = section.get("columns")
    affiliates = section.get("affiliates")
    if not isinstance(affiliates, list) or not affiliates:
        raise ConfigValidationError(
            f"{doc.where('affiliate_reports', 'affiliates')}: must be a non-empty list"
        )
    targets: list[dict[str, Any]] = []
    seen: set[int] = set()
    for i, entry in enumerate(affiliates):
        loc = ("affiliate_reports", "affiliates", i)
        if not isinstance(entry, dict):
            raise ConfigValidationError(f"{doc.where(*loc)}: each entry must be a mapping")
        _check_keys(doc, entry, _AFFILIATE_KEYS, *loc)
        conn_id, aff_id = entry.get("conn_id"), entry.get("affiliate_id")
        if not isinstance(conn_id, str) or not conn_id.strip():
            raise ConfigValidationError(f"{doc.where(*loc, 'conn_id')}: a connection id is needed")
        if isinstance(aff_id, str) and aff_id.strip().isdigit():
            aff_id = int(aff_id.strip())
        if isinstance(aff_id, bool) or not isinstance(aff_id, int) or aff_id <= 0:
            raise ConfigValidationError(
                f"{doc.where(*loc, 'affiliate_id')}: must be a positive integer id"
            )
        if aff_id in seen:
            raise ConfigValidationError(f"{doc.where(*loc, 'affiliate_id')}: {aff_id} repeated")
        seen.add(aff_id)
        fmt = entry.get("format", default_fmt)
        if fmt not in FORMATS:
            raise ConfigValidationError(f"{doc.where(*loc, 'format')}: one of {list(FORMATS)}")
        cols_loc = (*loc, "columns") if "columns" in entry else ("affiliate_reports", "columns")
        cols = entry.get("columns", default_cols)
        if not isinstance(cols, list):
            raise ConfigValidationError(f"{doc.where(*cols_loc)}: must be a list of columns")
        try:
            cols = validate_report_columns(cols)
        except ConfigValidationError as err:
            raise ConfigValidationError(f"{doc.where(*cols_loc)}: {err.message}") from err
        targets.append(
            {
                "affiliate_network_conn_id": conn_id.strip(),
                "affiliate_id": str(aff_id),
                "columns": cols,
                "format": fmt,
            }
        )
    return targets


# -- notifications.yaml ------------------------------------------------------------------------
# The one place that says who hears about what (affiliate_network.notify). Read when a DAG file
# is parsed (the deadline alert is part of the DAG; one small file) and when a notification is
# sent (channel settings take effect without a re-parse).

NOTIFICATIONS_CONFIG_FILE = "notifications.yaml"

#: What a person can be told about (``events`` in the file; all of them by default).
NotificationEvent = Literal[
    "guardrail_tripped",
    "sync_blocked",
    "reconciliation_failed",
    "task_failed",
    "review_waiting",
    "run_late",
]
NOTIFICATION_EVENTS: tuple[str, ...] = get_args(NotificationEvent)


class EmailChannel(pydantic.BaseModel):
    """E-mail through an Airflow SMTP connection (``apache-airflow-providers-smtp``).

    :param conn_id: the SMTP connection (host, port, login; TLS flags in its extras).
    :param to: recipients.
    :param from_email: sender; default the connection's ``from_email`` extra.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    conn_id: str = pydantic.Field("smtp_default", min_length=1)
    to: list[str] = pydantic.Field(min_length=1)
    from_email: str | None = None


class WebhookChannel(pydantic.BaseModel):
    """A chat webhook through an Airflow HTTP connection (``apache-airflow-providers-http``).

    :param conn_id: the HTTP connection; its host holds the webhook URL (the secret part of a
        chat webhook URL belongs there, not in this file).
    :param endpoint: path appended to the connection's URL (not secret).
    :param format: ``text`` posts ``{"text": ...}`` (Slack, Mattermost, Rocket.Chat, Google Chat
        incoming webhooks); ``json`` posts the message's fields.
    :param timeout_s: longest wait for the receiver.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    conn_id: str = pydantic.Field(min_length=1)
    endpoint: str = ""
    format: Literal["text", "json"] = "text"
    timeout_s: float = pydantic.Field(10.0, gt=0, le=120)


class NotificationSettings(pydantic.BaseModel):
    """``include/notifications.yaml``: off unless ``enabled: true`` with a channel.

    :param enabled: the master switch (default off: the DAGs get no notifier and no deadline).
    :param email: the e-mail channel, or None.
    :param webhook: the chat webhook channel, or None.
    :param events: which events are sent (default all of :data:`NOTIFICATION_EVENTS`).
    :param late_after_minutes: ``{dag_id: minutes}``: a run not finished this long after it was
        queued is late (a deadline alert); a DAG not listed has none.
    :param late_backfill_runs: also announce late backfill runs (queued together, they wait for
        each other: off by default).
    :param runbook_url: where the "what to do" sections live (docs/notifications.md, or its URL).
    :param source: the file read (empty when there is none).
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    enabled: bool = False
    email: EmailChannel | None = None
    webhook: WebhookChannel | None = None
    events: list[NotificationEvent] = pydantic.Field(
        default_factory=lambda: list(get_args(NotificationEvent))
    )
    late_after_minutes: dict[str, pydantic.PositiveInt] = pydantic.Field(default_factory=dict)
    late_backfill_runs: bool = False
    runbook_url: str = "docs/notifications.md"
    source: str = ""

    @pydantic.model_validator(mode="after")
    def _a_channel_when_enabled(self) -> NotificationSettings:
        if self.enabled and self.email is None and self.webhook is None:
            raise ValueError("enabled: true needs a channel (email, webhook or both)")
        return self

    def wants(self, event: str) -> bool:
        """True when notifications are on and ``event`` is one of ``events``."""
        return self.enabled and event in self.events

    def late_after(self, dag_id: str) -> dt.timedelta | None:
        """The DAG's deadline after its run is queued, or None (no deadline alert)."""
        minutes = self.late_after_minutes.get(dag_id)
        return dt.timedelta(minutes=minutes) if self.enabled and minutes else None


def load_notification_settings() -> NotificationSettings:
    """``include/notifications.yaml``, validated (:class:`NotificationSettings`).

    No file, or ``enabled: false``: notifications are off and nothing is attached to the DAGs.

    :raises ConfigValidationError: a wrong type, an unknown field or event, ``enabled`` without a
        channel; the message names file, line and field.
    """
    if not (include_dir() / NOTIFICATIONS_CONFIG_FILE).is_file():
        return NotificationSettings()
    doc = _read_yaml(NOTIFICATIONS_CONFIG_FILE)
    if not isinstance(doc.data, dict):
        raise ConfigValidationError(f"{doc.where()}: the top level must be a mapping")
    try:
        return NotificationSettings.model_validate({**doc.data, "source": str(doc.path)})
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigValidationError(f"{doc.where(*first['loc'])}: {message}") from None
