"""Pin BLAS to one thread while compiled code runs.

Two BLAS threads on a busy 2-core machine made a 784-256-256-10 epoch 10x slower, and two
concurrent trainers lost their speedup: parallelism in nnjit comes from running trainers in
threads, not from BLAS. Numba's ``np.dot`` calls scipy's BLAS, which numba loads lazily; a limit
applied before that library is loaded silently misses it, so we import it first.
"""

from __future__ import annotations

import contextlib
import threading

import scipy.linalg.cython_blas  # noqa: F401  (load the BLAS numba will call, before limiting)
from threadpoolctl import ThreadpoolController

_lock = threading.Lock()
_depth = 0
_saved: list[tuple[object, int]] = []
_blas_controllers: list | None = None


def _controllers() -> list:
    """threadpoolctl's per-library controllers of the loaded BLAS libraries (found once)."""
    global _blas_controllers
    if _blas_controllers is None:
        controller = ThreadpoolController()
        _blas_controllers = [c for c in controller.lib_controllers if c.user_api == "blas"]
    return _blas_controllers


@contextlib.contextmanager
def single_threaded_blas():
    """Limit every loaded BLAS to one thread; nested and concurrent uses share one limit.

    Calls each library's own ``set_num_threads`` directly (a few microseconds) instead of
    ``threadpool_limits``, which re-scans the loaded libraries on every call (~60 us per fit).
    """
    global _depth
    with _lock:
        if _depth == 0:
            _saved.clear()
            for c in _controllers():
                _saved.append((c, c.num_threads))
                c.set_num_threads(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for c, n in _saved:
                    c.set_num_threads(n)
                _saved.clear()


def blas_thread_counts() -> list[int]:
    """Current thread counts of the BLAS libraries nnjit pins (those loaded when it was first
    used: numpy's and scipy's, the one numba calls); for tests and benchmarks."""
    return [c.num_threads for c in _controllers()]
