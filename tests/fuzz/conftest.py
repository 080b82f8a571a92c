"""Hypothesis profiles: CI runs a bounded, reproducible number of examples per property."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=int(os.environ.get("AFN_FUZZ_EXAMPLES", "150")),
    deadline=None,
    derandomize=True,  # the same examples on every CI run: a red build is reproducible
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    print_blob=True,
)
settings.register_profile(
    "deep",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("AFN_FUZZ_PROFILE", "ci"))
