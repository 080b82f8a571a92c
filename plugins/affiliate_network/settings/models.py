"""Network and report settings: ``include/network.yaml`` and ``reports.yaml``, and their models.

Both files are read by the one config loader (:func:`affiliate_network.settings.loader.load`) and
validated by the pydantic models below (:class:`NetworkFile`, :class:`ReportsFile`), which
refuse unknown keys and document each key's default. Every error names the file, the line and
the field, and is raised before any request is sent. The network's reporting timezone is named
by IANA name; its API id comes from the one table of the API's timezone ids
(:mod:`affiliate_network.api.timezones`). An explicit ``timezone_id`` is allowed but must agree
with the name.

Read at run time only (never at DAG parse time), except ``include/notifications.yaml``: the DAG
files read it when parsed, for the deadline alert (:func:`load_notification_settings`). The
report DAG file also reads ``network.yaml``'s ``timezone`` key when parsed, through
:mod:`affiliate_network.settings.agreement` (its own small reader, not this loader).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Annotated, Any, Literal, get_args

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from affiliate_network.api.timezones import (
    TIMEZONES,
    id_for_name,
    name_for_id,
)
from affiliate_network.exceptions import ConfigValidationError, FieldError, UnknownTimezoneError
from affiliate_network.settings import loader
from affiliate_network.settings.paths import include_dir

NETWORK_CONFIG_FILE = "network.yaml"
REPORTS_CONFIG_FILE = "reports.yaml"

#: Documented limit of the conversion report: the prior 365 days only; older dates are an error.
CONVERSION_REPORT_HISTORY_DAYS = 365


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


# -- network.yaml ------------------------------------------------------------------------------


class NetworkFile(BaseModel):
    """The keys of ``include/network.yaml`` (unknown keys are refused).

    After validation both ``timezone`` and ``timezone_id`` are set (each completed from the
    other) and ``currency_id`` is upper case.

    :param timezone: the network's reporting timezone, an IANA name of the API's timezone table
        (``UTC`` aliases accepted); report days are cut at midnight there. No default: required
        unless ``timezone_id`` is given.
    :param timezone_id: the API's id of that zone. Default: looked up from ``timezone``; when
        both are given they must agree.
    :param currency_id: 3-letter reporting currency of the aggregated reports. Default: none
        (the network's own default currency).
    """

    model_config = ConfigDict(extra="forbid")

    timezone: str | None = Field(
        default=None, description="IANA name of the reporting timezone (required unless an id)"
    )
    timezone_id: int | None = Field(
        default=None, description="the API's id of the zone; default: looked up from the name"
    )
    currency_id: str | None = Field(
        default=None, description="3-letter reporting currency; default: the network's own"
    )

    @field_validator("timezone", mode="before")
    @classmethod
    def _known_zone(cls, value: Any) -> Any:
        if value is not None:
            id_for_name(value)  # UnknownTimezoneError (a ValueError) names the closest names
        return value

    @field_validator("timezone_id", mode="before")
    @classmethod
    def _known_id(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("must be an integer")
        name_for_id(value)
        return value

    @field_validator("currency_id", mode="before")
    @classmethod
    def _currency_code(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str) or len(value.strip()) != 3:
            raise ValueError("must be a 3-letter currency code such as USD")
        return value.strip().upper()

    @model_validator(mode="after")
    def _name_and_id_agree(self) -> NetworkFile:
        if self.timezone is None and self.timezone_id is None:
            raise FieldError(
                ("timezone",),
                "required (the network's reporting timezone as an IANA name, e.g. UTC or "
                "America/New_York)",
            )
        if self.timezone is not None:
            named_id = id_for_name(self.timezone)
            if self.timezone_id is not None and self.timezone_id != named_id:
                raise FieldError(
                    ("timezone_id",),
                    f"{self.timezone_id} is {name_for_id(self.timezone_id)} in the API's timezone "
                    f"table, but timezone is {self.timezone!r} (id {named_id}); fix one of the "
                    "two, or drop timezone_id (it is looked up from the name)",
                )
            self.timezone_id = named_id
        assert self.timezone_id is not None
        self.timezone = TIMEZONES[self.timezone_id]
        return self


def load_network_settings() -> NetworkSettings:
    """``include/network.yaml``, validated against the API's timezone table.

    :raises ConfigValidationError: unknown zone name, unknown id, name/id mismatch, wrong types
        or unknown fields; the message names file, line and field.
    """
    path = include_dir() / NETWORK_CONFIG_FILE
    network = loader.load(path, NetworkFile)
    # Both are set once validated (each completed from the other).
    assert network.timezone is not None
    assert network.timezone_id is not None
    return NetworkSettings(
        timezone=network.timezone,
        timezone_id=network.timezone_id,
        currency_id=network.currency_id,
        source=str(path),
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


def _report_format(value: Any) -> Any:
    from affiliate_network.api.report_columns import FORMATS

    if value is not None and value not in FORMATS:
        raise ValueError(f"must be one of {list(FORMATS)}")
    return value


def _report_columns(value: Any) -> Any:
    from affiliate_network.api.report_columns import validate_report_columns

    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError("must be a list of columns")
    try:
        return validate_report_columns(value)
    except ConfigValidationError as err:
        raise ValueError(err.message) from None


#: ``parquet`` or ``jsonl`` (the formats of :mod:`affiliate_network.api.report_columns`).
ReportFormat = Annotated[str, BeforeValidator(_report_format)]
#: An entity-table column list, checked by the report schema.
ReportColumns = Annotated[list[str] | None, BeforeValidator(_report_columns)]


class AffiliateReportEntry(BaseModel):
    """One affiliate of ``reports.yaml`` (``affiliate_reports.affiliates[i]``).

    :param affiliate_id: the affiliate's id, a positive integer (digits in quotes accepted),
        unique in the file. No default: required.
    :param conn_id: the Airflow connection of the affiliate's portal. No default: required.
    :param columns: the entity-table columns of this affiliate's report. Default: the
        section's ``columns``.
    :param format: ``parquet`` or ``jsonl``. Default: the section's ``format``.
    """

    model_config = ConfigDict(extra="forbid")

    affiliate_id: int = Field(description="the affiliate's id (positive, unique; required)")
    conn_id: str = Field(description="the affiliate portal's Airflow connection (required)")
    columns: ReportColumns = Field(
        default=None, description="report columns; default: the section's columns"
    )
    format: ReportFormat | None = Field(
        default=None, description="parquet or jsonl; default: the section's"
    )

    @field_validator("affiliate_id", mode="before")
    @classmethod
    def _positive_id(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError("must be a positive integer id")
        return value

    @field_validator("conn_id", mode="before")
    @classmethod
    def _connection(cls, value: Any) -> Any:
        if not isinstance(value, str) or not value.strip():
            raise ValueError("a connection id is needed")
        return value.strip()


class AffiliateReports(BaseModel):
    """The ``affiliate_reports`` section of ``reports.yaml``.

    :param format: the files' format, ``parquet`` or ``jsonl``. Default: ``parquet``.
    :param columns: the entity-table columns (1 to 10 of the report columns, at most one time
        column) of every affiliate without its own. Default: none; then every affiliate needs
        its own ``columns``.
    :param affiliates: one entry per affiliate, at least one. No default: required.
    """

    model_config = ConfigDict(extra="forbid")

    format: ReportFormat = Field(default="parquet", description="parquet (default) or jsonl")
    columns: ReportColumns = Field(
        default=None, description="default report columns of the affiliates"
    )
    affiliates: list[AffiliateReportEntry] = Field(description="one entry per affiliate")

    @field_validator("affiliates", mode="before")
    @classmethod
    def _non_empty(cls, value: Any) -> Any:
        if not isinstance(value, list) or not value:
            raise ValueError("must be a non-empty list")
        return value

    @model_validator(mode="after")
    def _each_affiliate_once_with_columns(self) -> AffiliateReports:
        seen: set[int] = set()
        for i, entry in enumerate(self.affiliates):
            if entry.affiliate_id in seen:
                raise FieldError(
                    ("affiliates", i, "affiliate_id"), f"{entry.affiliate_id} repeated"
                )
            seen.add(entry.affiliate_id)
            if entry.columns is None and self.columns is None:
                raise FieldError(("columns",), "must be a list of columns")
        return self


class ReportsFile(BaseModel):
    """The keys of ``include/reports.yaml`` (unknown keys are refused).

    :param affiliate_reports: the per-affiliate aggregated reports. No default: required.
    """

    model_config = ConfigDict(extra="forbid")

    affiliate_reports: AffiliateReports


def load_affiliate_report_targets() -> list[dict[str, Any]]:
    """Mapped-task kwargs for the affiliate report operator, from ``include/reports.yaml``.

    One entry per affiliate: ``affiliate_network_conn_id``, ``affiliate_id``, ``columns``,
    ``format``. Every entry is validated here (file, line, entry and field), so a bad file fails
    the config task before any report is requested.
    """
    section = loader.load(include_dir() / REPORTS_CONFIG_FILE, ReportsFile).affiliate_reports
    targets: list[dict[str, Any]] = []
    for entry in section.affiliates:
        columns = entry.columns if entry.columns is not None else section.columns
        targets.append(
            {
                "affiliate_network_conn_id": entry.conn_id,
                "affiliate_id": str(entry.affiliate_id),
                "columns": list(columns or ()),
                "format": entry.format or section.format,
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
    path = include_dir() / NOTIFICATIONS_CONFIG_FILE
    if not path.is_file():
        return NotificationSettings()
    settings = loader.load(path, NotificationSettings)
    return settings.model_copy(update={"source": str(path)})
