"""A pytest plugin that logs each test's CPU seconds, to see where the suite's time goes.

Wall-clock durations (``--durations``) mostly say which test happened to compile a shared build
first, and they stretch on a loaded machine; CPU seconds (the test process's own plus those of
the child processes it waited for) hold up under load. Run from the repository root::

    CPULOG=/tmp/cpu.tsv PYTHONPATH=tools python -m pytest -q -n auto -p pytest_cpu_log

Each line of ``$CPULOG`` is ``own<TAB>children<TAB>test id`` (setup to teardown, so a
module-scoped fixture counts in the first test that uses it). Run the suite twice on one
``NUMBA_CACHE_DIR``: the first run's total minus the second's is the compiling.
"""

from __future__ import annotations

import os
import resource

_started: dict[str, tuple[float, float]] = {}


def _cpu_seconds() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def pytest_runtest_setup(item) -> None:
    _started[item.nodeid] = _cpu_seconds()


def pytest_runtest_makereport(item, call) -> None:
    start = _started.pop(item.nodeid, None) if call.when == "teardown" else None
    if start is None:
        return
    own, children = _cpu_seconds()
    with open(os.environ.get("CPULOG", "cpu.tsv"), "a", encoding="utf-8") as log:
        log.write(f"{own - start[0]:.2f}\t{children - start[1]:.2f}\t{item.nodeid}\n")
