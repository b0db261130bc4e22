"""Shared test configuration: one hypothesis profile (the first example of a test compiles),
and no stale compiled code."""

import compileall
import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "nnjit",
    deadline=None,
    max_examples=25,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("nnjit")


def _drop_stale_numba_cache() -> None:
    """Delete numba's cached machine code older than the newest nnjit source file.

    numba checks a cached function against its own file only, so after an edit to a kernel the
    interpreter (another file) would load its old copy from the cache and the tests would run
    stale code. Deleting is always safe: the next call compiles again.
    """
    package = Path(__file__).resolve().parents[1] / "nnjit"
    newest = max(p.stat().st_mtime for p in package.rglob("*.py"))
    for cached in (*package.rglob("*.nbi"), *package.rglob("*.nbc")):
        if cached.stat().st_mtime < newest:
            cached.unlink(missing_ok=True)


@pytest.fixture
def python_sigint_handler():
    """Python's own SIGINT handler, as in a foreground terminal, for the tests of Ctrl-C. A
    process started in the background by a non-interactive shell (CI scripts, ``cmd &``)
    inherits SIGINT ignored, and Python then leaves it ignored: Ctrl-C cannot reach it at all."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _write_bytecode() -> None:
    """Write the bytecode of nnjit and the benchmarks when Python is told not to
    (``PYTHONDONTWRITEBYTECODE``, which many container images set).

    The suite starts a few hundred Python processes (the installed ``nnjit`` command, scripts,
    benchmarks); without bytecode each one compiles nnjit's ~190 modules from source again, about
    0.25 s of CPU per process. Up to date, this is one ``stat`` per file.
    """
    if not sys.flags.dont_write_bytecode:
        return  # every import writes it
    root = Path(__file__).resolve().parents[1]
    for package in ("nnjit", "benchmarks"):
        compileall.compile_dir(root / package, quiet=2)


if not os.environ.get("NUMBA_CACHE_DIR"):  # a cache elsewhere is the caller's to manage
    _drop_stale_numba_cache()
_write_bytecode()
