"""The BLAS that compiled code calls: which kernels it uses, and one thread while it runs.

Numba's ``np.dot`` calls scipy's OpenBLAS, which numba loads lazily.

* **Kernels.** OpenBLAS picks its kernels from the CPU model when it loads. It does not know AMD's
  AVX-512 CPUs (Zen 4 / Zen 5) by name and falls back to its AVX2 "Haswell" kernels, about half
  the speed of its AVX-512 "SkylakeX" kernels for nnjit's products (docs/performance.md). So, unless ``OPENBLAS_CORETYPE`` is already set or
  ``NNJIT_OPENBLAS_CORETYPE=off``, nnjit sets ``OPENBLAS_CORETYPE=SkylakeX`` on an AMD CPU with
  AVX-512 (F, CD, BW, DQ, VL) *before* scipy's OpenBLAS is loaded. If scipy's BLAS was imported
  before nnjit, it is too late and nothing changes. The variable is inherited by subprocesses.
* **Threads.** Two BLAS threads on a busy 2-core machine made a 784-256-256-10 epoch 10x slower,
  and two concurrent trainers lost their speedup: parallelism in nnjit comes from running
  trainers in threads, not from BLAS. A limit applied before the library is loaded silently
  misses it, so the library is imported here, first.
"""

from __future__ import annotations

import functools
import os
import sys
import threading

_AVX512 = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")


def _cpu_vendor() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def openblas_coretype_hint() -> str | None:
    """The OpenBLAS core type nnjit asks for on this machine (None: leave OpenBLAS to decide)."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return None
    if os.environ.get("NNJIT_OPENBLAS_CORETYPE", "").lower() in ("0", "off", "false", "no"):
        return None
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    if _cpu_vendor() == "AuthenticAMD" and all(features.get(f, False) for f in _AVX512):
        return "SkylakeX"
    return None


#: The OPENBLAS_CORETYPE nnjit set at import (None: it set nothing).
CORETYPE_SET_BY_NNJIT = None
if "scipy.linalg.cython_blas" not in sys.modules:
    CORETYPE_SET_BY_NNJIT = openblas_coretype_hint()
    if CORETYPE_SET_BY_NNJIT is not None:
        os.environ["OPENBLAS_CORETYPE"] = CORETYPE_SET_BY_NNJIT

import scipy.linalg.cython_blas  # noqa: E402,F401  (load the BLAS numba calls, before limiting)
from threadpoolctl import ThreadpoolController  # noqa: E402

_lock = threading.Lock()
_depth = 0
_saved: list[tuple[object, int]] = []
_blas: list | None = None


@functools.cache
def _blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded when first asked (scanned once)."""
    return [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]


def _controllers() -> list:
    """``(get_threads, set_threads)`` callables for each loaded BLAS library (found once).

    For OpenBLAS with its own threads these are the library's ``openblas_get/set_num_threads``
    themselves (a ctypes call each): threadpoolctl's controller silently ignores calls from
    any Python thread but the first one that used it (its "controlling thread"), so a trainer
    in a worker thread would run 2-thread GEMMs (two such trainers ran 2x *slower* than one
    after the other); nnjit serialises its own changes with ``_lock`` instead. Libraries
    threadpoolctl exposes differently go through its public API.
    """
    global _blas
    if _blas is None:
        _blas = []
        for c in _blas_libraries():
            symbol = getattr(c, "_get_symbol", None)
            raw_get = symbol("openblas_get_num_threads") if symbol else None
            raw_set = symbol("openblas_set_num_threads") if symbol else None
            if (c.internal_api == "openblas" and getattr(c, "threading_layer", "") != "openmp"
                    and raw_get is not None and raw_set is not None):
                _blas.append((raw_get, raw_set))
            else:
                _blas.append((lambda c=c: c.num_threads, lambda n, c=c: _set_threads(c, n)))
    return _blas


class _SingleThreadedBlas:
    """The context manager :func:`single_threaded_blas` returns (one per process, reentrant).

    A plain class rather than a generator-based context manager, and a library already on one
    thread is left alone (one ctypes call instead of three): this runs on every fit, predict and
    evaluate, and its cost counts in a small fit's fixed Python set-up.
    """

    __slots__ = ()

    def __enter__(self):
        global _depth
        with _lock:
            if _depth == 0:
                for get, set_ in _blas if _blas is not None else _controllers():
                    n = get()
                    if n != 1:
                        set_(1)
                        _saved.append((set_, n))
            _depth += 1
        return self

    def __exit__(self, *exc):
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0:
                for set_, n in _saved:
                    set_(n)
                _saved.clear()
        return False


_SINGLE = _SingleThreadedBlas()


def single_threaded_blas() -> _SingleThreadedBlas:
    """Limit every loaded BLAS to one thread; nested and concurrent uses share one limit."""
    return _SINGLE


def _set_threads(controller, n: int) -> None:
    """Set a library's thread count through threadpoolctl from any Python thread (it takes
    control for the call and hands it back)."""
    clear = getattr(type(controller), "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)
    controller.set_num_threads(n)
    if clear is not None:
        clear(force=True)


def blas_thread_counts() -> list[int]:
    """Current thread counts of the BLAS libraries nnjit pins (those loaded when it was first
    used: numpy's and scipy's, the one numba calls); for tests and benchmarks."""
    return [int(get()) for get, _ in _controllers()]


# OpenBLAS core types whose single-precision GEMM uses AVX-512.
_AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")


@functools.cache
def dense_forward_mode() -> int:
    """Which forward-product rules fit the BLAS numba calls (scipy's OpenBLAS):
    :data:`nnjit.kernels.dense.MODE_AVX512` when it runs AVX-512 kernels, else ``MODE_AVX2``
    (another BLAS, or OpenBLAS pinned to AVX2 kernels, e.g. by ``OPENBLAS_CORETYPE=Haswell``)."""
    from nnjit.kernels.dense import MODE_AVX2, MODE_AVX512

    scipy_dir = os.path.dirname(os.path.dirname(scipy.linalg.cython_blas.__file__))
    cores = [(os.path.dirname(c.filepath).startswith(scipy_dir), str(c.architecture).lower())
             for c in _blas_libraries()
             if c.internal_api == "openblas" and hasattr(c, "architecture")]
    cores.sort(reverse=True)  # scipy's own (in site-packages/scipy.libs or scipy/) first
    return MODE_AVX512 if cores and cores[0][1] in _AVX512_CORES else MODE_AVX2
