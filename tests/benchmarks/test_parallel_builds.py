"""Parallel twins (benchmarks/parallel_builds.py, no training path uses them): same results as
the serial builds, threading-layer safety, concurrent threads.

Speed is not asserted here (``benchmarks/parallel.py`` measures it); these check that the twins
are safe to switch in: identical numbers, a warning and a serial fallback under ``workqueue``, no
crash when two Python threads run parallel regions at once, and separate on-disk cache entries.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numba
import numpy as np
import pytest

from benchmarks import parallel_builds as kp
from nnjit.kernels import elementwise as ke
from nnjit.kernels import graph_ops as kg
from nnjit.kernels import optim as ko

N = 20_011  # odd and large enough that every thread gets a chunk with a vector body and a tail
ROOT = Path(__file__).resolve().parents[2]
needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="runs compiled parallel code")
ELEMENTWISE = [name for fam, names in kp.FAMILIES.items() if fam != "optimizer" for name in names]


def _elementwise_args(name, n, dtype, accumulate, seed=0):
    rng = np.random.default_rng(seed)
    args = []
    serial = kp.TWINS[name][0]
    for p in inspect.signature(getattr(serial, "py_func", serial)).parameters:
        if p == "accumulate":
            args.append(accumulate)
        elif p == "slope":
            args.append(0.02)
        elif p == "mask":
            args.append(np.where(rng.random(n) < 0.3, 0.0, 1 / 0.7).astype(dtype))
        else:
            x = (rng.standard_normal(n) * 3).astype(dtype)
            x[:5] = [0.0, -0.0, np.nan, np.inf, -np.inf]  # edge values go through both builds
            args.append(x)
    return args


def test_every_family_has_a_threshold_and_twins():
    assert set(kp.PARALLEL_MIN_SIZE) == set(kp.FAMILIES)
    for family, names in kp.FAMILIES.items():
        assert isinstance(kp.PARALLEL_MIN_SIZE[family], int)
        assert 0 < kp.PARALLEL_MIN_SIZE[family] <= kp.NEVER
        for name in names:
            serial, par = kp.TWINS[name]
            assert getattr(kp, name + "_parallel") is par
            assert serial is getattr(ko, name, None) or serial is getattr(ke, name)


def test_parallel_min_sizes(monkeypatch, fresh_warnings):
    assert kp.FAMILY_ORDER == tuple(kp.PARALLEL_MIN_SIZE)
    monkeypatch.setattr(kp, "threading_layer", lambda: "omp")
    monkeypatch.setattr(kp, "_forked_after_omp", False)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 2)
    mins = kp.parallel_min_sizes()
    assert mins.dtype == np.int64 and mins.shape == (len(kp.FAMILY_ORDER),)
    assert mins[kp.P_OPTIMIZER] == kp.PARALLEL_MIN_SIZE["optimizer"]
    assert mins[kp.P_TRANSCENDENTAL] == kp.PARALLEL_MIN_SIZE["transcendental"]
    smallest = min(kp.PARALLEL_MIN_SIZE.values())
    assert kp.parallel_min_sizes(largest=smallest) is not None
    assert kp.parallel_min_sizes(largest=smallest - 1) is None  # too small: serial build only
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    assert kp.parallel_min_sizes() is None
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 2)
    monkeypatch.setattr(kp, "threading_layer", lambda: "workqueue")
    with pytest.warns(RuntimeWarning, match="workqueue"):
        assert kp.parallel_min_sizes() is None


def test_benchmark_crossover_rule():
    from benchmarks.parallel import crossover

    sizes = [1, 2, 3, 4, 5]
    assert crossover(sizes, [0.5, 1.2, 1.5, 1.3, 1.0]) == 2  # a tie at the top still counts
    assert crossover(sizes, [0.5, 1.2, 1.5, 1.3, 1.0], max_loss=1.1) is None  # strict rule
    assert crossover(sizes, [0.5, 1.2, 0.9, 1.3, 1.2]) == 4  # a loss at 3 moves it above 3
    assert crossover(sizes, [0.5, 0.6, 0.7, 0.8, 0.9]) is None


def test_twin_is_a_separate_function_with_parallel_option():
    twin = kp.adam_update_parallel
    fn = getattr(twin, "py_func", twin)
    serial = getattr(ko.adam_update, "py_func", ko.adam_update)
    assert fn.__qualname__ == "adam_update_parallel"  # its own cache files (see parallel_build)
    assert fn.__code__ is serial.__code__  # one source
    if not numba.config.DISABLE_JIT:
        assert twin.targetoptions["parallel"] is True
        assert not ko.adam_update.targetoptions.get("parallel", False)


# -- same results ---------------------------------------------------------------------------------
# float32 for every kernel; float64 (gradient checks only; each dtype is a separate parallel
# compile of ~0.3 s) for two, to keep this file under 20 s with an empty numba cache.
DTYPE_CASES = [(name, np.float32) for name in ELEMENTWISE] + [
    ("sigmoid_forward", np.float64), ("gelu_backward", np.float64)]


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("name, dtype", DTYPE_CASES,
                         ids=[f"{n}-{np.dtype(d).name}" for n, d in DTYPE_CASES])
def test_elementwise_twin_is_bitwise_equal(name, dtype, accumulate):
    serial, par = kp.TWINS[name]
    a = _elementwise_args(name, N, dtype, accumulate)
    b = [x.copy() if isinstance(x, np.ndarray) else x for x in a]
    with np.errstate(all="ignore"):  # NaN/inf inputs, under NUMBA_DISABLE_JIT=1
        serial(*a)
        par(*b)
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))  # bitwise, NaNs too


OPT_CASES = {
    "adam": ("adam_update", 2, lambda s: (1e-3, 0.9, 0.999, 1e-8, 1e-2, False, s)),
    "adamw": ("adam_update", 2, lambda s: (1e-3, 0.9, 0.999, 1e-8, 1e-2, True, s)),
    "sgd": ("sgd_update", 1, lambda s: (0.1, 0.0, 0.0, False, 1e-3, s)),
    "sgd-nesterov": ("sgd_update", 1, lambda s: (0.1, 0.9, 0.0, True, 1e-3, s)),
    "rmsprop": ("rmsprop_update", 2, lambda s: (0.01, 0.99, 1e-8, 1e-3, 0.0, s)),
    "rmsprop-momentum": ("rmsprop_update", 2, lambda s: (0.01, 0.99, 1e-8, 1e-3, 0.9, s)),
}


OPT_DTYPE_CASES = [(c, np.float32) for c in OPT_CASES] + [
    ("adam", np.float64), ("sgd-nesterov", np.float64), ("rmsprop-momentum", np.float64)]


@pytest.mark.parametrize("case, dtype", OPT_DTYPE_CASES,
                         ids=[f"{c}-{np.dtype(d).name}" for c, d in OPT_DTYPE_CASES])
def test_optimizer_twin_is_bitwise_equal(case, dtype):
    # Each element's update reads and writes only element i, so the split over threads changes
    # nothing in float32: bitwise equal over several steps, from stale (NaN) state buffers. In
    # float64 LLVM vectorises Adam differently in the two builds (the fast-math flags allow an
    # approximate sqrt/division); measured: serial <= 13824 ulp from NumPy, parallel <= 128 ulp,
    # i.e. ~3e-12 relative: far inside float32 rounding, and only used for gradient checks.
    name, n_state, hyper = OPT_CASES[case]
    serial, par = kp.TWINS[name]
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal(N).astype(dtype)
    runs = []
    for fn in (serial, par):
        p = p0.copy()
        state = [np.full(N, np.nan, dtype) for _ in range(n_state)]
        for step in range(1, 5):
            g = np.random.default_rng(step).standard_normal(N).astype(dtype)
            fn(p, g, *state, *hyper(step))
        runs.append([p, *state])
    for x, y in zip(*runs):
        if dtype == np.float32 or name != "adam_update":
            np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))
        else:
            np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-15)


@needs_jit
@pytest.mark.parametrize("name",
                         ["adam_update", "relu_backward", "add_forward", "dropout_backward"])
def test_twin_still_vectorises(name):
    # The parallel build outlines the loop into a per-thread function; its chunk loop must still
    # use packed float32 AVX instructions (PACKED as in test_vectorized.py).
    import llvmlite.binding as llvm

    from nnjit.kernels._jit import jit
    from tests.kernels.test_vectorized import PACKED

    if "avx" not in llvm.get_host_cpu_features().flatten():
        pytest.skip("the host CPU has no AVX")
    par = kp.TWINS[name][1]
    fresh = jit(par.py_func, cache=False, parallel=True)  # numba cannot inspect cached code
    if name == "adam_update":
        v = np.ones(4096, np.float32)
        args = (v.copy(), v, v.copy(), v.copy(), 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 3)
    else:
        args = _elementwise_args(name, 4096, np.float32, True)
    fresh(*args)
    asm = "\n".join(fresh.inspect_asm().values())
    assert PACKED.search(asm), f"{name}_parallel: no packed ymm/zmm float32 instruction"


# -- threading layer ----------------------------------------------------------------------------
@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(kp, "_warned", set())
    monkeypatch.setattr(numba.config, "DISABLE_JIT", False)


def test_workqueue_is_unavailable_with_one_warning(monkeypatch, fresh_warnings):
    monkeypatch.setattr(kp, "threading_layer", lambda: "workqueue")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kp.parallel_available() is False
        assert kp.parallel_available() is False
        assert kp.min_size("optimizer") == kp.NEVER
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert issubclass(caught[0].category, RuntimeWarning)
    assert "'workqueue'" in msg and "pip install tbb" in msg and "NUMBA_THREADING_LAYER=omp" in msg


@pytest.mark.parametrize("layer", ["omp", "tbb"])
def test_omp_and_tbb_are_available_without_warning(monkeypatch, fresh_warnings, layer):
    monkeypatch.setattr(kp, "threading_layer", lambda: layer)
    monkeypatch.setattr(kp, "_forked_after_omp", False)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kp.parallel_available() is True
        assert kp.min_size("elementwise") == kp.PARALLEL_MIN_SIZE["elementwise"]
    with pytest.raises(KeyError, match="valid: optimizer"):
        kp.min_size("matmul")


def test_forked_child_after_omp_is_unavailable(monkeypatch, fresh_warnings):
    monkeypatch.setattr(kp, "threading_layer", lambda: "omp")
    monkeypatch.setattr(kp, "_forked_after_omp", True)
    with pytest.warns(RuntimeWarning, match="fork"):
        assert kp.parallel_available() is False


def test_no_layer_loadable_is_unavailable(monkeypatch, fresh_warnings):
    monkeypatch.setattr(kp, "threading_layer", lambda: None)
    with pytest.warns(RuntimeWarning, match="None"):
        assert kp.parallel_available() is False


@pytest.mark.parametrize("request_, loadable, expected", [
    ("default", {"omp", "workqueue"}, "omp"),
    ("default", {"tbb", "omp", "workqueue"}, "tbb"),
    ("threadsafe", {"workqueue"}, None),
    ("safe", {"omp", "workqueue"}, None),
    ("forksafe", {"omp", "workqueue"}, "workqueue"),  # on Linux GNU OpenMP is not fork-safe
    ("workqueue", {"tbb", "omp", "workqueue"}, "workqueue"),
])
def test_predicted_layer(monkeypatch, request_, loadable, expected):
    if not sys.platform.startswith("linux") and request_ == "forksafe":
        pytest.skip("forksafe picks omp outside Linux")
    monkeypatch.setattr(kp, "_loadable", lambda layer: layer in loadable)
    monkeypatch.setattr(numba.config, "THREADING_LAYER_PRIORITY", ["tbb", "omp", "workqueue"])
    assert kp._predicted_layer(request_) == expected


@pytest.mark.parametrize("request_, loadable, expected, warns", [
    ("default", {"omp", "workqueue"}, "threadsafe", False),
    ("default", {"workqueue"}, "default", False),
    ("workqueue", {"omp", "workqueue"}, "workqueue", False),  # an explicit choice is respected
    ("tbb", {"omp", "workqueue"}, "threadsafe", True),  # ... unless it cannot load at all
    ("safe", {"workqueue"}, "workqueue", True),
])
def test_configure_layer(monkeypatch, fresh_warnings, request_, loadable, expected, warns):
    from numba.np.ufunc import parallel as npar

    monkeypatch.setattr(npar, "_is_initialized", False)
    monkeypatch.setattr(kp, "_loadable", lambda layer: layer in loadable)
    monkeypatch.setattr(numba.config, "THREADING_LAYER", request_)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kp._configure_layer()
    assert numba.config.THREADING_LAYER == expected
    assert len(caught) == int(warns)


@needs_jit
def test_this_process_uses_a_safe_layer():
    # importing benchmarks.parallel_builds asked numba for "threadsafe" before any parallel code ran
    if kp.threading_layer() not in ("tbb", "omp"):
        pytest.skip(f"no thread-safe layer installed here ({kp.threading_layer()!r})")
    assert kp.parallel_available() is True


# -- concurrency ----------------------------------------------------------------------------------
@needs_jit
def test_two_threads_run_parallel_kernels_concurrently():
    if not kp.parallel_available():
        pytest.skip("no thread-safe threading layer")
    n, steps = 50_001, 200
    rng = np.random.default_rng(3)
    inputs = [(rng.standard_normal(n).astype(np.float32),
               rng.standard_normal(n).astype(np.float32)) for _ in range(2)]

    def train(fwd, bwd, opt, x, g, out):
        p = x.copy()
        y, dx = np.empty_like(x), np.zeros_like(x)
        m, v = np.zeros_like(x), np.zeros_like(x)
        for step in range(1, steps + 1):
            fwd(p, y)
            bwd(y, g, dx, True)
            opt(p, dx, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, step)
        out.append(p)

    expected = []
    for x, g in inputs:
        train(ke.relu_forward, ke.relu_backward, ko.adam_update, x, g, expected)
    results = [[], []]
    barrier = threading.Barrier(2)
    errors = []

    def work(i):
        try:
            barrier.wait()
            train(kp.relu_forward_parallel, kp.relu_backward_parallel, kp.adam_update_parallel,
                  *inputs[i], results[i])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and all(not t.is_alive() for t in threads)
    for i in range(2):
        np.testing.assert_array_equal(results[i][0], expected[i])


FORK_CHILD = """
import os, warnings, numpy as np
from benchmarks import parallel_builds as kp
x = np.ones(10_000, np.float32)
kp.relu_forward_parallel(x, x.copy())  # starts the threading layer's threads in the parent
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = kp.parallel_available()
    os.write(w, f"{ok} {len(caught)}".encode())
    os._exit(0)
os.waitpid(pid, 0)
print(kp.threading_layer(), kp.parallel_available(), os.read(r, 100).decode())
"""


@needs_jit
@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "fork"),
                    reason="GNU OpenMP's fork problem is Linux-only")
def test_fork_after_omp_turns_parallel_off_in_the_child():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    out = subprocess.run([sys.executable, "-c", FORK_CHILD], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    layer, parent_ok, child_ok, child_warnings = out.stdout.split()
    if layer != "omp":
        pytest.skip(f"layer {layer}: only GNU OpenMP is unsafe after fork")
    assert parent_ok == "True" and child_ok == "False" and child_warnings == "1"


# -- the on-disk cache keeps the two builds apart --------------------------------------------------
CACHE_CHILD = """
import json, numpy as np, numba
from benchmarks import parallel_builds as kp
from nnjit.kernels import elementwise as ke
x = np.linspace(-3, 3, 100_001).astype(np.float32)
ys, ya = np.empty_like(x), np.empty_like(x)
ke.tanh_forward(x, ys)
kp.tanh_forward_parallel(x, ya)
print(json.dumps(dict(equal=bool((ys == ya).all()),
                      hits=[sum(f.stats.cache_hits.values()) for f in
                            (ke.tanh_forward, kp.tanh_forward_parallel)],
                      layer=numba.threading_layer())))
"""


@needs_jit
def test_serial_and_parallel_builds_have_separate_cache_entries(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["NUMBA_CACHE_DIR"] = str(tmp_path)
    runs = []
    for _ in range(2):  # cold, then warm from the cache the first run wrote
        out = subprocess.run([sys.executable, "-c", CACHE_CHILD], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    names = {p.name.split("-")[0] for p in tmp_path.rglob("*.nbi")}
    assert {"elementwise.tanh_forward", "elementwise.tanh_forward_parallel"} <= names
    assert runs[0]["hits"] == [0, 0] and runs[1]["hits"] == [1, 1]
    assert runs[0]["equal"] and runs[1]["equal"]
    assert runs[1]["layer"] in ("tbb", "omp", "workqueue")


def test_spmm_forward_parallel_build_matches_serial():
    rng = np.random.default_rng(3)
    n_src, n_dst, n_edges = 50, 40, 300
    dst = np.sort(rng.integers(0, n_dst, n_edges))  # CSR by target
    src = rng.integers(0, n_src, n_edges).astype(np.int64)
    indptr = np.concatenate(([0], np.cumsum(np.bincount(dst, minlength=n_dst)))).astype(np.int64)
    for weighted, heads in ((True, 2), (False, 1)):
        w = rng.standard_normal((n_edges, heads))
        x = rng.standard_normal((n_src, heads * 4))
        a = np.empty((n_dst, heads * 4))
        b = np.empty((n_dst, heads * 4))
        kg.spmm_forward(indptr, src, w, x, a, weighted)
        kp.spmm_forward_parallel(indptr, src, w, x, b, weighted)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
