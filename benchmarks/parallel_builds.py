"""Parallel (``prange``) twins of the big elementwise, optimizer and spmm kernels, and when to use
them: what ``python -m benchmarks.parallel`` measures.

No training path calls the twins (the interpreter's parallel optimizer build was reverted: a
few percent faster with an idle second core, several times slower while another process used
it), so they live here, beside the benchmark, and ``import nnjit`` leaves numba's threading layer
alone. Wiring them back in means moving this module into ``nnjit/kernels/`` again and calling
:func:`parallel_min_sizes` from the trainer.

One source, two builds (as umap's ``layouts.py``): the kernels in ``nnjit/kernels/elementwise.py``,
``optim.py`` and ``graph_ops.py`` (``spmm_forward``) write disjoint elements per iteration and loop
with ``prange``, which their serial builds treat as ``range``. :func:`parallel_build` compiles the
same Python function a second time with ``parallel=True``, so the twin computes what the serial
kernel computes, split over threads.

When it pays (``python -m benchmarks.parallel``, see :data:`PARALLEL_MIN_SIZE`): a parallel region
costs 1-2.5 us here, so only large arrays gain (or a few thousand exp/tanh/erf), and nothing gains
when the cores are already busy (two trainers in two threads). A compiled caller picks the build
by size, with ``mins = parallel_min_sizes(...)`` passed in from Python (an int64 array, or None)::

    if mins is not None and n >= mins[P_OPTIMIZER]:
        adam_update_parallel(...)
    else:
        adam_update(...)

Threading layers: numba runs parallel regions on ``tbb``, ``omp`` or ``workqueue``. ``workqueue``
aborts the whole process when two Python threads enter parallel regions at once (nnjit's trainers
run in threads), so importing this module (not nnjit) asks numba for a thread-safe layer
(``'threadsafe'``: tbb, else omp) before any parallel function is compiled or loaded, and
:func:`parallel_available` says False (with one warning) where only ``workqueue`` is left.
GNU OpenMP is also not fork-safe: a ``fork()``-ed child of a process that started omp threads is
killed by its first parallel region, so :func:`parallel_available` is False there too.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import warnings

import numba
import numpy as np
from numba.np.ufunc import parallel as _npar

from nnjit.kernels import elementwise as _ke
from nnjit.kernels import graph_ops as _kg
from nnjit.kernels import optim as _ko
from nnjit.kernels._jit import jit, renamed_copy

#: A size no array reaches: "never use the parallel build". An int64, so compiled code can compare.
NEVER = 2**62

#: Smallest array length (elements) from which the parallel build is used, per family; compare
#: with ``n >= PARALLEL_MIN_SIZE[family]``. Each value is where ``python -m benchmarks.parallel``
#: found the parallel build >= 1.10x faster and nowhere above more than 5% slower, on an idle
#: second core (the runs and their speedups: docs/performance.md, "Parallel builds"); with two
#: trainers in two threads the gains vanish, so pass None from :func:`parallel_min_sizes` there.
PARALLEL_MIN_SIZE = {
    "optimizer": 300_000,
    "elementwise": 300_000,
    "transcendental": 3_000,
    "dropout": 100_000,
}

#: Which kernels each family covers (the benchmark times these; names without ``_parallel``).
FAMILIES = {
    # one pass over params, grads and 1-2 state buffers: memory bound
    "optimizer": ("adam_update", "sgd_update", "rmsprop_update"),
    # a compare or a few multiply-adds per element: memory bound (tanh and sigmoid backward work
    # from the saved output y, so they need no exp)
    "elementwise": ("relu_forward", "relu_backward", "leaky_relu_forward", "leaky_relu_backward",
                    "add_forward", "add_backward", "mul_forward", "mul_backward",
                    "tanh_backward", "sigmoid_backward"),
    # exp / tanh / erfc per element: compute bound, so they gain from a few thousand elements
    "transcendental": ("tanh_forward", "sigmoid_forward", "gelu_forward", "gelu_backward"),
    "dropout": ("dropout_backward",),
}

_SAFE_LAYERS = ("tbb", "omp")
_FIX_HINT = ("install TBB (pip install tbb) or set NUMBA_THREADING_LAYER=omp (needs an OpenMP "
             "runtime, e.g. libgomp) before numba starts its threads")


# -- builds --------------------------------------------------------------------------------------
def parallel_build(kernel):
    """The ``parallel=True`` build of a ``@jit`` kernel, from the same Python source.

    The function is copied under the name ``<name>_parallel`` first: numba's on-disk cache is keyed
    by the function's qualified name, source file and bytecode, *not* by the ``parallel`` flag, so
    two builds of one function object would load each other's cached machine code (measured with
    numba 0.68: the serial build then ran on two threads; the parallel build segfaulted).

    Args:
        kernel: a numba dispatcher made by :func:`nnjit.kernels._jit.jit` (or any numba
            ``njit`` dispatcher), or a plain Python function.

    Returns:
        A new dispatcher compiled with nnjit's options plus ``parallel=True``.
    """
    fn = getattr(kernel, "py_func", kernel)
    twin = renamed_copy(fn, "parallel")
    twin.__doc__ = f"Parallel build of ``{fn.__module__}.{fn.__qualname__}``.\n\n{fn.__doc__ or ''}"
    return jit(twin, parallel=True)


adam_update_parallel = parallel_build(_ko.adam_update)
sgd_update_parallel = parallel_build(_ko.sgd_update)
rmsprop_update_parallel = parallel_build(_ko.rmsprop_update)

relu_forward_parallel = parallel_build(_ke.relu_forward)
relu_backward_parallel = parallel_build(_ke.relu_backward)
leaky_relu_forward_parallel = parallel_build(_ke.leaky_relu_forward)
leaky_relu_backward_parallel = parallel_build(_ke.leaky_relu_backward)
tanh_forward_parallel = parallel_build(_ke.tanh_forward)
tanh_backward_parallel = parallel_build(_ke.tanh_backward)
sigmoid_forward_parallel = parallel_build(_ke.sigmoid_forward)
sigmoid_backward_parallel = parallel_build(_ke.sigmoid_backward)
gelu_forward_parallel = parallel_build(_ke.gelu_forward)
gelu_backward_parallel = parallel_build(_ke.gelu_backward)
add_forward_parallel = parallel_build(_ke.add_forward)
add_backward_parallel = parallel_build(_ke.add_backward)
mul_forward_parallel = parallel_build(_ke.mul_forward)
mul_backward_parallel = parallel_build(_ke.mul_backward)
dropout_backward_parallel = parallel_build(_ke.dropout_backward)
# dropout_forward has no twin: it draws from one sequential RNG stream.

#: ``prange`` over targets; the backward spmm kernels scatter into source rows and stay serial.
spmm_forward_parallel = parallel_build(_kg.spmm_forward)

#: Smallest ``E * F`` (edges times feature columns) from which :data:`spmm_forward_parallel` was
#: >= 1.4x faster on an idle 2-core machine (docs/performance.md, "Parallel builds").
SPMM_PARALLEL_MIN_WORK = 32_768

#: serial kernel name -> (serial build, parallel build), for benchmarks and tests.
TWINS = {
    name: (getattr(_ko, name, None) or getattr(_ke, name), globals()[name + "_parallel"])
    for names in FAMILIES.values() for name in names
}


# -- threading layer -----------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _loadable(layer: str) -> bool:
    """True when numba could load threading layer ``layer`` ("tbb", "omp" or "workqueue")."""
    try:
        if layer == "tbb":
            _npar._check_tbb_version_compatible()  # as numba does: TBB >= 2021.6
        importlib.import_module(f"numba.np.ufunc.{layer}pool" if layer != "workqueue"
                                else "numba.np.ufunc.workqueue")
    except (ImportError, OSError):
        return False
    return True


def _predicted_layer(request: str):
    """The layer numba's ``_launch_threads`` will pick for ``NUMBA_THREADING_LAYER=request``."""
    linux = sys.platform.startswith("linux")
    if request in ("tbb", "omp", "workqueue"):
        candidates = [request]
    elif request == "safe":
        candidates = ["tbb"]
    elif request == "threadsafe":
        candidates = ["tbb", "omp"]
    elif request == "forksafe":
        candidates = ["tbb"] + ([] if linux else ["omp"]) + ["workqueue"]
    else:  # "default": in the user's priority order
        candidates = list(numba.config.THREADING_LAYER_PRIORITY)
    return next((c for c in candidates if _loadable(c)), None)


def _configure_layer() -> None:
    """Before numba starts its threads: ask for a thread-safe layer when one is installed.

    ``'default'`` becomes ``'threadsafe'`` (tbb, else omp) when either loads. An explicit request
    is respected, unless nothing it names can load: numba would then raise at the first parallel
    compile (i.e. inside nnjit's interpreter), so it is replaced, with a warning.
    """
    if numba.config.DISABLE_JIT or _npar._is_initialized:
        return
    request = str(numba.config.THREADING_LAYER).lower()
    safe = [layer for layer in _SAFE_LAYERS if _loadable(layer)]
    if request == "default":
        if safe:
            numba.config.THREADING_LAYER = "threadsafe"
        return
    if _predicted_layer(request) is None:
        fallback = "threadsafe" if safe else "workqueue"
        warnings.warn(f"nnjit: numba threading layer {request!r} cannot be loaded here; using "
                      f"{fallback!r} instead", RuntimeWarning, stacklevel=3)
        numba.config.THREADING_LAYER = fallback


def threading_layer():
    """Name of numba's threading layer: the one running, else the one it will pick, else None."""
    if _npar._is_initialized:
        return _npar.threading_layer()
    return _predicted_layer(str(numba.config.THREADING_LAYER).lower())


# A fork()-ed child inherits numba's "threads launched" state but not GNU OpenMP's threads; its
# first omp parallel region kills it ("fork() called from a process already using GNU OpenMP").
_forked_after_omp = False


def _after_fork_in_child() -> None:
    global _forked_after_omp
    if (_npar._is_initialized and _npar.threading_layer() == "omp"
            and sys.platform.startswith("linux")):
        _forked_after_omp = True


_warned: set = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def parallel_available() -> bool:
    """True when the parallel builds may run: numba's threading layer is ``tbb`` or ``omp``.

    False, with one ``RuntimeWarning`` per process naming the layer and the fix, when the layer is
    ``workqueue`` (two threads in parallel regions at once abort the process) or none can load,
    and in a ``fork()``-ed child of a process that already started GNU OpenMP's threads. False
    without a warning under ``NUMBA_DISABLE_JIT=1`` (nothing runs in parallel there). Cheap: call
    it before every compiled call that may take the parallel path.
    """
    if numba.config.DISABLE_JIT:
        return False
    layer = threading_layer()
    if layer not in _SAFE_LAYERS:
        _warn_once("layer", f"nnjit: numba's threading layer is {layer!r}, which aborts the "
                            f"process when two threads run parallel code at once; parallel "
                            f"kernels are off (serial builds only). To enable them, {_FIX_HINT}.")
        return False
    if _forked_after_omp:
        _warn_once("fork", "nnjit: this process was fork()-ed after GNU OpenMP started; running "
                           "OpenMP in it would abort, so parallel kernels are off. Use the "
                           "'spawn' or 'forkserver' start method, or install TBB "
                           "(pip install tbb).")
        return False
    return True


#: Order of the thresholds in :func:`parallel_min_sizes`; index them with the P_* constants.
FAMILY_ORDER = ("optimizer", "elementwise", "transcendental", "dropout")
P_OPTIMIZER, P_ELEMENTWISE, P_TRANSCENDENTAL, P_DROPOUT = range(len(FAMILY_ORDER))


def parallel_min_sizes(largest: int | None = None):
    """Thresholds for a compiled caller: int64 ``(4,)`` in :data:`FAMILY_ORDER`, or None.

    None means "serial kernels only": parallel builds are unavailable (see
    :func:`parallel_available`), numba has one thread, or ``largest`` (the biggest array the caller
    will pass, e.g. ``max(n_params, largest activation)``) is below every threshold. Pass None
    straight into the jitted caller: its ``if mins is not None and n >= mins[k]`` branches are
    pruned before typing, so the twins are not even compiled (a serial-only model pays nothing).
    The thresholds travel as data, not as compiled-in globals, so a cached caller needs no
    recompile when :data:`PARALLEL_MIN_SIZE` changes.
    """
    if numba.config.NUMBA_NUM_THREADS < 2 or not parallel_available():
        return None
    mins = np.array([PARALLEL_MIN_SIZE[f] for f in FAMILY_ORDER], np.int64)
    if largest is not None and largest < mins.min():
        return None
    return mins


def min_size(family: str) -> int:
    """``PARALLEL_MIN_SIZE[family]`` when parallel builds may run with >= 2 threads, else NEVER."""
    if family not in PARALLEL_MIN_SIZE:
        raise KeyError(f"unknown kernel family {family!r}; valid: {', '.join(PARALLEL_MIN_SIZE)}")
    if numba.config.NUMBA_NUM_THREADS < 2 or not parallel_available():
        return NEVER
    return int(PARALLEL_MIN_SIZE[family])


_configure_layer()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
