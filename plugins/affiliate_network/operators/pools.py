"""The Airflow pool of the network's reporting requests, from the environment (no I/O).

The network takes at most 10 requests in flight on ``/networks/reporting/*`` (README, "Sharing
one network's quota"). The hook keeps to it across processes with leases; a pool lets the
scheduler see it too, so tasks queue in Airflow instead of waiting on a lease. A task naming a
pool the deployment lacks is never scheduled, so the pool is off unless the deployment names
it: the demo and ``docker compose`` create ``affiliate_network_reporting`` and set the variable.
"""

from __future__ import annotations

import os
from typing import Any

from affiliate_network.exceptions import ConfigValidationError

#: The pool's name; unset or empty: the tasks use Airflow's ``default_pool``.
POOL_ENV = "AFFILIATE_NETWORK_REPORTING_POOL"
#: Slots a reporting task holds: its hook's pages in flight (the ``concurrency`` extra, 4 by
#: default), so that a pool of 10 slots runs at most 10 // 4 = 2 pulls at once.
SLOTS_ENV = "AFFILIATE_NETWORK_REPORTING_POOL_SLOTS"
DEFAULT_SLOTS = 4


def reporting_pool() -> dict[str, Any]:
    """``pool`` and ``pool_slots`` for a task that sends requests to ``/networks/reporting/*``.

    :return: ``{}`` when :data:`POOL_ENV` is unset, else ``{"pool": ..., "pool_slots": n}``.
    :raises ConfigValidationError: the slots are not a whole number from 1 to 10.
    """
    name = os.environ.get(POOL_ENV, "").strip()
    if not name:
        return {}
    raw = os.environ.get(SLOTS_ENV, "").strip() or str(DEFAULT_SLOTS)
    try:
        slots = int(raw)
    except ValueError:
        slots = 0
    if not 1 <= slots <= 10:
        raise ConfigValidationError(
            f"environment variable {SLOTS_ENV}: must be a whole number from 1 to 10 (the "
            f"network's cap on reporting requests in flight), got {raw!r}"
        )
    return {"pool": name, "pool_slots": slots}
