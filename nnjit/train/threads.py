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
_restore = None
_controller: ThreadpoolController | None = None


def _get_controller() -> ThreadpoolController:
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller


@contextlib.contextmanager
def single_threaded_blas():
    """Limit every loaded BLAS to one thread; nested and concurrent uses share one limit."""
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = _get_controller().limit(limits=1, user_api="blas")
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore is not None:
                _restore.restore_original_limits()
                _restore = None


def blas_thread_counts() -> list[int]:
    """Current thread counts of the loaded BLAS libraries (for tests and benchmarks)."""
    return [lib["num_threads"] for lib in _get_controller().info() if lib["user_api"] == "blas"]
