"""Shared test configuration: one hypothesis profile (the first example of a test compiles)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "nnjit",
    deadline=None,
    max_examples=25,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("nnjit")
