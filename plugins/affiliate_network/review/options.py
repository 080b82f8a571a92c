"""How an on-hold review decides and writes: :class:`ReviewOptions`, checked when built.

Apart from :mod:`affiliate_network.review.job` on purpose: the review operator checks its part of
the options in its constructor (a bad argument fails at DAG parse time), and parsing a DAG file
must not load the review run (pull, writes, guardrails, audit). The write settings' defaults and
checks live here for that reason.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.review.numbers import MAX_HOURS, check_number
from affiliate_network.settings.arming import deployment_armed

if TYPE_CHECKING:
    from affiliate_network.review.guardrails import Guardrails
    from affiliate_network.rules.model import ReviewSettings

__all__ = [
    "APPROVED",
    "ARMED_VARIABLE",
    "DEFAULT_READBACK_WAIT_S",
    "DEFAULT_REJECT_STATUS",
    "MAX_LEASE_WAIT_MINUTES",
    "MAX_READBACK_WAIT_S",
    "MODE_DRY_RUN",
    "MOVED_VARIABLES",
    "ReviewOptions",
    "check_chunk_size",
    "check_readback_wait",
    "check_reject_status",
    "check_tuning",
    "dry_run_choice",
    "refuse_moved_variables",
    "review_armed",
]

#: PATCH status per rule action (the rejection value is configurable: the spec does not show it).
APPROVED = "approved"
DEFAULT_REJECT_STATUS = "rejected"
#: Seconds the writer waits for a sent status to show in a read-back. The service documents the
#: update as asynchronous, visible "up to a few seconds" later, without a number: a setting.
DEFAULT_READBACK_WAIT_S = 10.0
#: Longest accepted wait: the run holds the network's write lease while it waits.
MAX_READBACK_WAIT_S = 600.0


def check_reject_status(status: str) -> None:
    """Fail before anything is pulled or approved, not halfway through the writes."""
    from affiliate_network.hooks.affiliate_network import ON_HOLD_STATUS_FORM

    if not isinstance(status, str) or not ON_HOLD_STATUS_FORM.match(status):
        raise ConfigValidationError(
            f"reject_status {status!r} is not a status word (lowercase letters and '_', "
            f"e.g. 'rejected')"
        )


def check_readback_wait(readback_wait_s: float) -> None:
    """Seconds to wait for a read-back: 0..600 (0: read back once, do not wait).

    :raises ConfigValidationError: not a number, or outside that range.
    """
    if (
        not isinstance(readback_wait_s, int | float)
        or isinstance(readback_wait_s, bool)
        or not math.isfinite(readback_wait_s)
        or not 0 <= readback_wait_s <= MAX_READBACK_WAIT_S
    ):
        raise ConfigValidationError(
            f"readback_wait_s must be a number of seconds in 0..{MAX_READBACK_WAIT_S:g}, "
            f"got {readback_wait_s!r}"
        )


def check_chunk_size(chunk_size: int) -> None:
    """On-hold ids per PATCH: 1..2000.

    :raises ConfigValidationError: outside that range.
    """
    if not 1 <= chunk_size <= 2000:
        raise ConfigValidationError(f"chunk_size must be between 1 and 2000, got {chunk_size}")


#: The deployment setting that lets the review write to the network (and ask people). A new
#: deployment starts without it: every run then plans, writes its audit and asks nobody.
ARMED_VARIABLE = "AFFILIATE_ONHOLD_ARMED"


def review_armed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this deployment has armed the on-hold review (:data:`ARMED_VARIABLE`).

    Read when a task runs, never at DAG parse time (the shared reader of every arming switch,
    :func:`~affiliate_network.settings.arming.deployment_armed`). Unset or empty is unarmed.

    :param environ: the environment to read (default: this process's).
    :raises ConfigValidationError: a value other than true/false/1/0/yes/no/on/off, naming
        the variable (a typo must not be read as either).
    """
    return deployment_armed(ARMED_VARIABLE, environ)


#: The variables that held the review's settings, and their key in the rules file's ``review:``.
MOVED_VARIABLES = {
    "AFFILIATE_ONHOLD_LOOKBACK_DAYS": "lookback_days",
    "AFFILIATE_ONHOLD_MIN_AGE_HOURS": "min_age_hours",
    "AFFILIATE_ONHOLD_CHUNK_SIZE": "chunk_size",
    "AFFILIATE_ONHOLD_REJECT_STATUS": "reject_status",
    "AFFILIATE_ONHOLD_MAX_REJECT_SHARE": "max_reject_share",
    "AFFILIATE_ONHOLD_MAX_REJECT_COUNT": "max_reject_count",
    "AFFILIATE_ONHOLD_MAX_APPROVED_PAYOUT": "max_approved_payout",
    "AFFILIATE_ONHOLD_KEEP_DECISION_HOURS": "keep_decision_hours",
    "AFFILIATE_ONHOLD_REVIEW_MINUTES": "review_minutes",
    "AFFILIATE_ONHOLD_LATE_ARRIVAL_HOURS": "late_arrival_hours",
}


def refuse_moved_variables(rules_file: str, environ: Mapping[str, str] | None = None) -> None:
    """Fail when the environment still sets a setting that now lives in the rules file.

    Silently ignoring it would run the review with other guardrails than the deployment chose.

    :param rules_file: the rules file the review reads (named in the error).
    :param environ: the environment to read (default: this process's).
    :raises ConfigValidationError: naming each variable and its key in the rules file.
    """
    env = os.environ if environ is None else environ
    moved = [name for name in MOVED_VARIABLES if env.get(name, "").strip()]
    if moved:
        raise ConfigValidationError(
            "; ".join(f"{name} is no longer read" for name in moved)
            + f": set {', '.join(f'review.{MOVED_VARIABLES[n]}' for n in moved)} in the rules "
            f"file {rules_file} instead (docs/configuration.md), then unset the variable"
        )


#: The trigger form's ``mode`` choice.
MODE_DRY_RUN, MODE_WRITE = "dry_run", "write"


def dry_run_choice(conf: object, params: object, run_type: str) -> object:
    """The run's ``dry_run`` from its conf (and, for a manual run, its params); ``None``: unsaid.

    ``dry_run`` (true/false, as API callers send it) wins; else the form's ``mode``. A manual
    run without either reads ``params.mode``, whose default is the dry run. A scheduled run or
    a backfill says nothing (it also carries the form's default, which must not make it dry).

    :param conf: ``dag_run.conf``.
    :param params: the run's ``params``.
    :param run_type: ``dag_run.run_type``, lower case.
    """
    conf = conf if isinstance(conf, Mapping) else {}
    if conf.get("dry_run") is not None:
        return conf["dry_run"]
    mode = conf.get("mode")
    if mode is None and run_type.endswith("manual") and isinstance(params, Mapping):
        mode = params.get("mode")
    return None if mode is None else mode == MODE_DRY_RUN


#: Longest wait for another run's write lease (a day: a lease expires 10 min after its holder
#: stops renewing it, so longer only hides a stuck run).
MAX_LEASE_WAIT_MINUTES = 1440.0


def check_tuning(lease_wait_minutes: float, page_size: int | None, readback_wait_s: float) -> None:
    """A review task's own options (the rest are the rules file's), checked alone: the review
    operator calls it in its constructor, so a bad argument fails at DAG parse time without
    loading what only a running review needs.

    :raises ConfigValidationError: an argument out of its range, ``nan`` or infinite (named).
    """
    check_number(
        lease_wait_minutes, "lease_wait_minutes", low=0, high=MAX_LEASE_WAIT_MINUTES, unit="minutes"
    )
    if page_size is not None:
        check_number(page_size, "page_size", low=1, whole=True)
    check_readback_wait(readback_wait_s)


def _guardrails(*ceilings: Any) -> Guardrails:
    # Imported here: the guardrails bring the money module, which only a running review needs.
    from affiliate_network.review.guardrails import Guardrails

    return Guardrails(*ceilings)


@dataclass(frozen=True)
class ReviewOptions:
    """How a review decides and writes (checked when built).

    :param min_age_hours: decide only conversions on hold for at least this long (hours,
        0..:data:`~affiliate_network.review.numbers.MAX_HOURS`).
    :param keep_decision_hours: a reviewer's "Keep on hold" is not asked again for this long
        (hours, 0..:data:`~affiliate_network.review.numbers.MAX_HOURS`).
    :param chunk_size: on-hold ids per PATCH (a whole number, 1..2000).
    :param reject_status: PATCH status for rejections.
    :param guardrails: ceilings checked before the first write.
    :param lease_wait_minutes: how long to wait for another run's write lease (minutes,
        0..:data:`MAX_LEASE_WAIT_MINUTES`).
    :param page_size: conversion report page size (``None``: the connection's; the hook
        checks its upper bound).
    :param full_pull: pull the whole window instead of the traffic snapshot plus what is new.
    :param readback_wait_s: longest wait, in seconds, for sent statuses to show in a read-back
        (0..600, default :data:`DEFAULT_READBACK_WAIT_S` = 10:
        the API applies them asynchronously, "up to a few seconds"). Ids still on hold then are
        audited as accepted but not landed and decided again by the next run.
    :param late_arrival_hours: hours before the traffic cursor each incremental pull reads
        again (0..168).
    :raises ConfigValidationError: an argument out of its range, ``nan`` or infinite (named).
    """

    min_age_hours: float = 0.0
    keep_decision_hours: float = 24.0
    chunk_size: int = 100
    reject_status: str = DEFAULT_REJECT_STATUS
    guardrails: Guardrails = field(default_factory=_guardrails)
    lease_wait_minutes: float = 35.0
    page_size: int | None = None
    full_pull: bool = False
    readback_wait_s: float = DEFAULT_READBACK_WAIT_S
    late_arrival_hours: float = 6.0

    @classmethod
    def of(cls, settings: ReviewSettings, **tuning: Any) -> ReviewOptions:
        """The options a rules file's ``review:`` section sets, plus a task's ``tuning``."""
        return cls(
            min_age_hours=settings.min_age_hours,
            keep_decision_hours=settings.keep_decision_hours,
            chunk_size=settings.chunk_size,
            reject_status=settings.reject_status,
            guardrails=_guardrails(
                settings.max_reject_share, settings.max_reject_count, settings.max_approved_payout
            ),
            late_arrival_hours=settings.late_arrival_hours,
            **tuning,
        )

    def __post_init__(self) -> None:
        # Every number finite and in range: ``nan`` compares false, so a ``nan`` minimum age
        # or keep time would switch its check off instead of failing.
        check_number(self.chunk_size, "chunk_size", low=1, whole=True)
        object.__setattr__(self, "chunk_size", int(self.chunk_size))
        check_chunk_size(self.chunk_size)  # the range
        for name in ("min_age_hours", "keep_decision_hours"):
            check_number(getattr(self, name), name, low=0, high=MAX_HOURS, unit="hours")
        check_number(self.late_arrival_hours, "late_arrival_hours", low=0, high=168, unit="hours")
        check_tuning(self.lease_wait_minutes, self.page_size, self.readback_wait_s)
        if self.page_size is not None:
            object.__setattr__(self, "page_size", int(self.page_size))
        self.guardrails.validate()
        if not self.reject_status or self.reject_status == APPROVED:
            raise ConfigValidationError(
                f"reject_status must be a rejecting status, got {self.reject_status!r}"
            )
