"""The deployment's arming switches: the one reader of every ``AFFILIATE_*_ARMED`` variable.

A writer that can change the network (the on-hold review, the offer sync) writes only on a
deployment that set its switch to true; a new deployment starts without any, and its runs only
plan. Each writer reads its switch here, when its task runs (never at DAG parse time), so one
parser decides what "armed" means and a typo fails the same way for every switch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from affiliate_network.exceptions import ConfigValidationError

__all__ = ["ARMED_VALUES", "UNARMED_VALUES", "deployment_armed"]

#: Values (trimmed, any case) that arm; unset or any of :data:`UNARMED_VALUES` does not.
ARMED_VALUES = frozenset({"true", "1", "yes", "on"})
UNARMED_VALUES = frozenset({"false", "0", "no", "off", ""})


def deployment_armed(variable: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether this deployment has set the arming switch ``variable``.

    Read when a task runs, never at DAG parse time: arming or disarming a deployment takes
    effect with the next task, without a DAG re-parse. Unset or empty is unarmed.

    :param variable: the environment variable of the switch (e.g. ``AFFILIATE_ONHOLD_ARMED``).
    :param environ: the environment to read (default: this process's).
    :raises ConfigValidationError: a value other than true/false/1/0/yes/no/on/off, naming
        the variable (a typo must not be read as either).
    """
    raw = (os.environ if environ is None else environ).get(variable, "")
    text = raw.strip().lower()
    if text in ARMED_VALUES:
        return True
    if text in UNARMED_VALUES:
        return False
    raise ConfigValidationError(
        f"{variable} must be true or false (unset: not armed), got {raw[:40]!r}"
    )
