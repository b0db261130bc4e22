"""Serial vs parallel (``prange``) builds of the elementwise and optimizer kernels: where it pays.

Run from the repository root::

    python -m benchmarks.parallel          # full run (a few minutes): tables, results/parallel.json
    python -m benchmarks.parallel --quick  # tiny sizes, 1 repeat, fewer kernels (smoke test)

1. Kernels: every kernel of ``benchmarks.parallel_builds.FAMILIES`` (optimizer step; memory-bound
   elementwise; exp/tanh/erf activations; dropout backward), serial build vs parallel twin, float32,
   over sizes 1e3 .. 1e7 elements in half-decade steps. Each sample times ``k`` back-to-back calls
   made from compiled code (as the interpreter calls them; no Python call overhead) with ``k`` set
   so a sample lasts >= 25 ms; serial and parallel samples alternate; medians of ``--repeats``.
   A block of samples (one kernel, one size) during which other processes used more than
   ``--max-other`` cores is retaken (for up to ``--max-wait`` seconds, then kept and flagged).
   A kernel's crossover is the smallest size at which the parallel build is >= 10% faster and
   above which it is nowhere more than 5% slower (at 1e7 the cheapest kernels are bound by DRAM
   bandwidth, which one core nearly saturates: both builds tie there). The strict rule (>= 10%
   faster at every larger size too) is reported beside it. A family's crossover is the largest of
   its kernels'; "never" when some kernel never qualifies.
2. Two trainers in two threads: a compiled "training step" (ReLU forward + backward over the
   activations, Adam over the parameters) run by one thread or by two threads at once, with the
   serial kernels or the parallel twins: total steps per second. Shows that concurrent parallel
   regions do not crash (omp/tbb layer) and what they cost when the cores are already busy.
3. Compile time: a fresh process with an empty ``NUMBA_CACHE_DIR`` compiles one jitted caller that
   dispatches to the 18 kernels (an if/elif chain, like the interpreter), without and with the
   parallel twins (``if mins is not None and n >= mins[family]: twin else serial`` in every
   branch); then a fresh process loads each from the warm cache. The twin caller is compiled once
   with an int64 array ``mins`` and once with ``mins=None``: numba prunes the ``is not None``
   branches before typing, so the None build compiles no twin at all.

Parallel kernels need an idle second core. The CPU used by other processes is recorded per kernel
and for the run (``/proc/stat``), with a WARNING above 0.1 cores; ``--wait-quiet SECONDS`` first
waits for the machine to go idle. The load average before and after is recorded too.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import threading
import time

import numba
import numpy as np

from benchmarks._common import (
    finish,
    OtherLoad,
    alternate,
    child_env,
    environment_info,
    fmt_ratio,
    fmt_time,
    loadavg,
    out_path,
    print_table,
    ratio,
    run_child,
    summarize,
    temp_dir,
)
from benchmarks import parallel_builds as kp
from nnjit.kernels import elementwise as ke
from nnjit.kernels import optim as ko
from nnjit.kernels._jit import jit

SIZES = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000)
QUICK_SIZES = (1_000, 30_000)
#: --quick times the first kernel of each family only (each kernel costs a compile of the timing
#: driver, about 0.4 s per build) ...
QUICK_FAMILIES = {family: names[:1] for family, names in kp.FAMILIES.items()}
#: ... and compiles one caller, the serial one, cold then warm (the twin callers are the same code
#: path with other kernels; the int64-array one alone compiles for ~10 s).
QUICK_COMPILE_VARIANTS = ("serial kernels only",)
MIN_GAIN = 1.10  # the parallel build must be at least 10% faster from the crossover ...
MAX_LOSS = 0.95  # ... and no more than 5% slower at any larger size (DRAM-bound sizes tie)
F32 = np.float32


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- 1. kernels ----------------------------------------------------------------------------------
@numba.njit(nogil=True)
def _repeat(fn, k, *args):  # pragma: no cover - compiled
    """Call ``fn(*args)`` k times from compiled code (cache=False: it takes a function argument)."""
    for _ in range(k):
        fn(*args)


_OPT_ARGS = {
    # step 3: past the step-1 state initialisation, as in the steady state of a fit
    "adam_update": lambda a: (a[0], a[1], a[2], a[3], 1e-3, 0.9, 0.999, 1e-8, 1e-4, False, 3),
    "sgd_update": lambda a: (a[0], a[1], a[2], 0.01, 0.9, 0.0, False, 1e-4, 3),
    "rmsprop_update": lambda a: (a[0], a[1], a[2], a[3], 0.01, 0.99, 1e-8, 1e-4, 0.0, 3),
}


def kernel_args(name: str, n: int, seed: int = 0) -> tuple:
    """Arguments of kernel ``name`` on fresh float32 arrays of length ``n`` (accumulate=True)."""
    rng = np.random.default_rng(seed)
    if name in _OPT_ARGS:
        arrays = [rng.standard_normal(n, dtype=F32) * F32(0.1) for _ in range(2)]
        arrays += [np.zeros(n, F32), np.zeros(n, F32)]
        arrays[3][:] = 1e-3  # second moments / square averages are positive
        return _OPT_ARGS[name](arrays)
    serial = kp.TWINS[name][0]
    params = inspect.signature(getattr(serial, "py_func", serial)).parameters
    out = []
    for p in params:
        if p == "accumulate":
            out.append(True)
        elif p == "slope":
            out.append(0.01)
        elif p == "mask":
            out.append(np.where(rng.random(n) < 0.5, F32(2.0), F32(0.0)).astype(F32))
        else:
            out.append(rng.standard_normal(n, dtype=F32))
    return tuple(out)


def _sampler(fn, args, sample_s: float):
    """A zero-argument timer returning seconds per call, with k calibrated to last >= sample_s."""
    _repeat(fn, 1, *args)  # compile the driver and the kernel
    k = 1
    while True:
        t0 = time.perf_counter()
        _repeat(fn, k, *args)
        dt = time.perf_counter() - t0
        if dt >= sample_s or k >= 1 << 22:
            break
        k = max(k * 2, int(k * sample_s / max(dt, 1e-9) * 1.2))

    def sample(_r=None):
        t0 = time.perf_counter()
        _repeat(fn, k, *args)
        return (time.perf_counter() - t0) / k

    return sample, k


def crossover(sizes, speedups, min_gain: float = MIN_GAIN, max_loss: float = MAX_LOSS):
    """Smallest size s with speedup >= min_gain at s, where no larger size is below max_loss
    (speedup = serial time / parallel time), or None. ``max_loss=min_gain`` gives the strict rule:
    >= min_gain at s and at every larger size."""
    best = None
    ok_above = True
    for size, s in sorted(zip(sizes, speedups), reverse=True):
        if s is not None and s >= min_gain and ok_above:
            best = size
        ok_above = ok_above and s is not None and s >= max_loss
    return best


def quiet_run(fn, max_cores: float, max_wait_s: float):
    """Run ``fn()`` until other processes used < max_cores during it (or max_wait_s has passed).

    Returns ``(result, other_cores, tries)``. On a shared machine this retakes a block of samples
    that another process disturbed, instead of reporting its noise as a (lack of) speedup.
    """
    t0 = time.perf_counter()
    tries = 0
    while True:
        tries += 1
        with OtherLoad() as o:
            result = fn()
        if o.cores is None or o.cores < max_cores or time.perf_counter() - t0 > max_wait_s:
            return result, o.cores, tries
        time.sleep(0.5)


def kernel_section(sizes, repeats: int, sample_s: float, max_other: float = 0.15,
                   max_wait_s: float = 120.0, families=None) -> dict:
    """Serial vs parallel build of every kernel of ``families`` (default ``kp.FAMILIES``)."""
    out = {}
    for family, names in (kp.FAMILIES if families is None else families).items():
        for name in names:
            serial, par = kp.TWINS[name]
            rows = []
            for n in sizes:
                # one set of arrays per build: both start from the same state, neither warms the
                # other's cache lines
                s_fn, s_k = _sampler(serial, kernel_args(name, n), sample_s)
                p_fn, p_k = _sampler(par, kernel_args(name, n), sample_s)
                res, other, tries = quiet_run(
                    lambda s_fn=s_fn, p_fn=p_fn: alternate({"serial": s_fn, "parallel": p_fn},
                                                          repeats), max_other, max_wait_s)
                s, p = summarize(res["serial"]), summarize(res["parallel"])
                rows.append(dict(n=n, serial=s, parallel=p, calls_per_sample=[s_k, p_k],
                                 speedup=ratio(s["median"], p["median"]),
                                 other_load_cores=other, tries=tries))
            ns, sp = [r["n"] for r in rows], [r["speedup"] for r in rows]
            cx = crossover(ns, sp)
            worst = max((r["other_load_cores"] or 0.0) for r in rows)
            out[name] = dict(family=family, rows=rows, crossover=cx,
                             crossover_strict=crossover(ns, sp, max_loss=MIN_GAIN),
                             other_load_cores=worst)
            log(f"   {name}: crossover {cx if cx is not None else 'never'} "
                f"(speedups {', '.join(fmt_ratio(r['speedup']) for r in rows)}; "
                f"other processes <= {worst:.2f} cores, "
                f"{sum(r['tries'] for r in rows) - len(rows)} retakes)")
    return out


def family_thresholds(kernels: dict, sizes) -> dict:
    """Per family: the largest kernel crossover (None = some kernel never gains)."""
    fam = {}
    for family, names in kp.FAMILIES.items():
        cx = [kernels[n]["crossover"] for n in names if n in kernels]
        largest = max(sizes)
        speedup_at_largest = [next(r["speedup"] for r in kernels[n]["rows"] if r["n"] == largest)
                              for n in names if n in kernels]
        strict = [kernels[n]["crossover_strict"] for n in names if n in kernels]
        fam[family] = dict(
            crossover=None if (not cx or any(c is None for c in cx)) else max(cx),
            crossover_strict=None if (not strict or any(c is None for c in strict))
            else max(strict),
            kernels_never=[n for n in names if n in kernels and kernels[n]["crossover"] is None],
            speedup_at_largest=dict(zip([n for n in names if n in kernels], speedup_at_largest)),
        )
    return fam


# -- 2. two trainers in two threads ----------------------------------------------------------------
@jit
def _trainer_steps(k, use_parallel, x, y, dy, dx, p, g, m, v):  # pragma: no cover - compiled
    """k "training steps": ReLU forward and backward over (n_act,), Adam over (n_param,)."""
    for step in range(2, k + 2):
        if use_parallel:
            kp.relu_forward_parallel(x, y)
            kp.relu_backward_parallel(y, dy, dx, False)
            kp.adam_update_parallel(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, step)
        else:
            ke.relu_forward(x, y)
            ke.relu_backward(y, dy, dx, False)
            ko.adam_update(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, step)


def _trainer_arrays(n_act: int, n_param: int, seed: int):
    rng = np.random.default_rng(seed)
    acts = [rng.standard_normal(n_act, dtype=F32) for _ in range(4)]
    params = [rng.standard_normal(n_param, dtype=F32) * F32(0.1) for _ in range(2)]
    return (*acts, *params, np.zeros(n_param, F32), np.full(n_param, 1e-3, F32))


def _run_threads(n_threads: int, k: int, use_parallel: bool, arrays) -> float:
    """Wall seconds for n_threads threads, each running k steps on its own arrays."""
    barrier = threading.Barrier(n_threads + 1)
    errors = []

    def work(i):
        barrier.wait()
        try:
            _trainer_steps(k, use_parallel, *arrays[i])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return wall


THREAD_WORKLOADS = {
    # (activations, parameters): Digits 64-64-10 at batch 16 (1024 hidden activations, 4810
    # parameters), and a large model beyond every measured crossover.
    "small (1,024 act., 4,810 params)": (1_024, 4_810),
    "large (1,000,000 act., 1,000,000 params)": (1_000_000, 1_000_000),
}


def threads_section(repeats: int, target_s: float, workloads=THREAD_WORKLOADS,
                    max_other: float = 0.15, max_wait_s: float = 120.0) -> dict:
    out = {}
    for label, (n_act, n_param) in workloads.items():
        arrays = [_trainer_arrays(n_act, n_param, s) for s in range(2)]
        for par in (False, True):
            _trainer_steps(1, par, *arrays[0])  # compile
        t0 = time.perf_counter()
        _trainer_steps(10, False, *arrays[0])
        per_step = (time.perf_counter() - t0) / 10
        k = max(10, int(target_s / max(per_step, 1e-9)))
        modes = {f"{build}, {nt} thread{'s' if nt > 1 else ''}": (nt, build == "parallel")
                 for build in ("serial", "parallel") for nt in (1, 2)}
        res, other, tries = quiet_run(
            lambda: alternate({m: (lambda r, nt=nt, par=par: _run_threads(nt, k, par, arrays))
                               for m, (nt, par) in modes.items()}, repeats),
            max_other, max_wait_s)
        rows = {}
        for m, (nt, par) in modes.items():
            wall = summarize(res[m])
            rows[m] = dict(threads=nt, parallel=par, wall=wall,
                           steps_per_s=nt * k / wall["median"] if wall["median"] else None)
        base = rows["serial, 1 thread"]["steps_per_s"]
        for r in rows.values():
            r["throughput_vs_serial_1_thread"] = ratio(r["steps_per_s"], base)
        out[label] = dict(n_act=n_act, n_param=n_param, steps_per_thread=k, modes=rows,
                          other_load_cores=other, tries=tries)
        log(f"   {label}: " + ", ".join(f"{m} {r['steps_per_s']:.0f} steps/s"
                                         for m, r in rows.items()))
    return out


# -- 3. compile time of one caller with and without the twins --------------------------------------
@jit
def _caller_serial(op, x, y, dy, dx, p, g, m, v, mins):  # pragma: no cover - compiled
    """Interpreter-like dispatch to the 18 serial kernels (``mins`` unused, same signature)."""
    if op == 0:
        ke.relu_forward(x, y)
    elif op == 1:
        ke.relu_backward(y, dy, dx, True)
    elif op == 2:
        ke.leaky_relu_forward(x, y, 0.01)
    elif op == 3:
        ke.leaky_relu_backward(x, dy, dx, True, 0.01)
    elif op == 4:
        ke.add_forward(x, dy, y)
    elif op == 5:
        ke.add_backward(dy, dx, True)
    elif op == 6:
        ke.mul_forward(x, dy, y)
    elif op == 7:
        ke.mul_backward(dy, x, dx, True)
    elif op == 8:
        ke.tanh_forward(x, y)
    elif op == 9:
        ke.tanh_backward(y, dy, dx, True)
    elif op == 10:
        ke.sigmoid_forward(x, y)
    elif op == 11:
        ke.sigmoid_backward(y, dy, dx, True)
    elif op == 12:
        ke.gelu_forward(x, y)
    elif op == 13:
        ke.gelu_backward(x, dy, dx, True)
    elif op == 14:
        ke.dropout_backward(x, dy, dx, True)
    elif op == 15:
        ko.sgd_update(p, g, m, 0.01, 0.9, 0.0, False, 0.0, 2)
    elif op == 16:
        ko.adam_update(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 2)
    else:
        ko.rmsprop_update(p, g, m, v, 0.01, 0.99, 1e-8, 0.0, 0.0, 2)


@jit
def _caller_twins(op, x, y, dy, dx, p, g, m, v, mins):  # pragma: no cover - compiled
    """As :func:`_caller_serial`, choosing the parallel twin when the size reaches ``mins[family]``
    (mins: int64 [optimizer, elementwise, transcendental, dropout], NEVER when unavailable; or
    None: serial kernels only, and the twins are not even compiled). The ``mins is not None``
    test must sit in each ``if`` itself for numba's branch pruning to remove the twin call."""
    n = x.shape[0]
    if op == 0:
        if mins is not None and n >= mins[1]:
            kp.relu_forward_parallel(x, y)
        else:
            ke.relu_forward(x, y)
    elif op == 1:
        if mins is not None and n >= mins[1]:
            kp.relu_backward_parallel(y, dy, dx, True)
        else:
            ke.relu_backward(y, dy, dx, True)
    elif op == 2:
        if mins is not None and n >= mins[1]:
            kp.leaky_relu_forward_parallel(x, y, 0.01)
        else:
            ke.leaky_relu_forward(x, y, 0.01)
    elif op == 3:
        if mins is not None and n >= mins[1]:
            kp.leaky_relu_backward_parallel(x, dy, dx, True, 0.01)
        else:
            ke.leaky_relu_backward(x, dy, dx, True, 0.01)
    elif op == 4:
        if mins is not None and n >= mins[1]:
            kp.add_forward_parallel(x, dy, y)
        else:
            ke.add_forward(x, dy, y)
    elif op == 5:
        if mins is not None and n >= mins[1]:
            kp.add_backward_parallel(dy, dx, True)
        else:
            ke.add_backward(dy, dx, True)
    elif op == 6:
        if mins is not None and n >= mins[1]:
            kp.mul_forward_parallel(x, dy, y)
        else:
            ke.mul_forward(x, dy, y)
    elif op == 7:
        if mins is not None and n >= mins[1]:
            kp.mul_backward_parallel(dy, x, dx, True)
        else:
            ke.mul_backward(dy, x, dx, True)
    elif op == 8:
        if mins is not None and n >= mins[2]:
            kp.tanh_forward_parallel(x, y)
        else:
            ke.tanh_forward(x, y)
    elif op == 9:
        if mins is not None and n >= mins[1]:
            kp.tanh_backward_parallel(y, dy, dx, True)
        else:
            ke.tanh_backward(y, dy, dx, True)
    elif op == 10:
        if mins is not None and n >= mins[2]:
            kp.sigmoid_forward_parallel(x, y)
        else:
            ke.sigmoid_forward(x, y)
    elif op == 11:
        if mins is not None and n >= mins[1]:
            kp.sigmoid_backward_parallel(y, dy, dx, True)
        else:
            ke.sigmoid_backward(y, dy, dx, True)
    elif op == 12:
        if mins is not None and n >= mins[2]:
            kp.gelu_forward_parallel(x, y)
        else:
            ke.gelu_forward(x, y)
    elif op == 13:
        if mins is not None and n >= mins[2]:
            kp.gelu_backward_parallel(x, dy, dx, True)
        else:
            ke.gelu_backward(x, dy, dx, True)
    elif op == 14:
        if mins is not None and n >= mins[3]:
            kp.dropout_backward_parallel(x, dy, dx, True)
        else:
            ke.dropout_backward(x, dy, dx, True)
    elif op == 15:
        if mins is not None and p.shape[0] >= mins[0]:
            kp.sgd_update_parallel(p, g, m, 0.01, 0.9, 0.0, False, 0.0, 2)
        else:
            ko.sgd_update(p, g, m, 0.01, 0.9, 0.0, False, 0.0, 2)
    elif op == 16:
        if mins is not None and p.shape[0] >= mins[0]:
            kp.adam_update_parallel(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 2)
        else:
            ko.adam_update(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 2)
    elif mins is not None and p.shape[0] >= mins[0]:
        kp.rmsprop_update_parallel(p, g, m, v, 0.01, 0.99, 1e-8, 0.0, 0.0, 2)
    else:
        ko.rmsprop_update(p, g, m, v, 0.01, 0.99, 1e-8, 0.0, 0.0, 2)


COMPILE_CHILD = """
import time
t0 = time.perf_counter()
from benchmarks._common import NumbaCompileProfiler, emit_result
import numpy as np
import benchmarks.parallel as bp
t_import = time.perf_counter() - t0
caller = getattr(bp, CALLER)
a = [np.ones(4096, np.float32) for _ in range(8)]
# MINS "array": every branch takes the parallel twin when there is one; "none": serial only
mins = np.zeros(4, np.int64) if MINS == "array" else None
with NumbaCompileProfiler() as prof:
    t0 = time.perf_counter()
    caller(np.int64(0), *a, mins)
    t_first = time.perf_counter() - t0
t0 = time.perf_counter()
for op in range(18):
    caller(np.int64(op), *a, mins)
t_all_ops = time.perf_counter() - t0
emit_result(dict(first_call_s=t_first, import_s=t_import, all_ops_after_s=t_all_ops,
                 **prof.summary()))
"""


#: Compile-time variants: label -> (caller, mins).
COMPILE_VARIANTS = {
    "serial kernels only": ("_caller_serial", "array"),
    "with twins, mins=int64 array": ("_caller_twins", "array"),
    "with twins, mins=None": ("_caller_twins", "none"),
}


def compile_section(runs: int, variants=tuple(COMPILE_VARIANTS)) -> dict:
    """Cold then warm first call of each caller in ``variants`` (labels of COMPILE_VARIANTS; the
    first one, serial, is the base of ``delta_vs_serial_s``), ``runs`` fresh processes each."""
    base = next(iter(COMPILE_VARIANTS))
    if base not in variants:
        raise ValueError(f"compile_section: the variants must include {base!r}")
    out = {"cold": {}, "warm": {}}
    with temp_dir("nnjit-bench-parallel-") as root:
        dirs = {c: [os.path.join(root, f"v{k}-{i}") for i in range(runs)]
                for k, c in enumerate(variants)}
        for phase in ("cold", "warm"):
            samples = {c: [] for c in dirs}
            for i in range(runs):
                for c in dirs:  # alternate the variants
                    env = child_env(NUMBA_CACHE_DIR=dirs[c][i])
                    caller, mins = COMPILE_VARIANTS[c]
                    r = run_child(f"CALLER = {caller!r}\nMINS = {mins!r}\n" + COMPILE_CHILD,
                                  env=env)
                    samples[c].append(r)
                    log(f"   {phase} {c} {i + 1}/{runs}: first call {r['first_call_s']:.2f} s, "
                        f"{r['n_compiles']} compiles, {r['cache_loads']} cache loads")
            for c, rs in samples.items():
                out[phase][c] = dict(
                    first_call=summarize(r["first_call_s"] for r in rs),
                    compile=summarize(r["compile_s"] for r in rs),
                    llvm=summarize(r["llvm_s"] for r in rs),
                    n_compiles=summarize(r["n_compiles"] for r in rs),
                    cache_loads=summarize(r["cache_loads"] for r in rs),
                    process_wall=summarize(r["_wall_s"] for r in rs),
                    top_functions=rs[0]["top_functions"])
    for phase in ("cold", "warm"):
        s = out[phase][base]["first_call"]["median"]
        for c in variants:
            t = out[phase][c]["first_call"]["median"]
            out[phase][c]["delta_vs_serial_s"] = None if s is None or t is None else t - s
    return out


# -- report --------------------------------------------------------------------------------------
def _size(n) -> str:
    if n is None:
        return "never"
    exp = int(np.floor(np.log10(n)))
    mant = n / 10**exp
    return f"{mant:g}e{exp}"


def print_report(res: dict) -> None:
    sizes = res["config"]["sizes"]
    kernels = res["kernels"]
    for family, names in kp.FAMILIES.items():
        names = [n for n in names if n in kernels]  # --quick times one kernel per family
        if not names:
            continue
        headers = ["kernel"] + [_size(n) for n in sizes] + ["crossover"]
        rows = []
        for name in names:
            k = kernels[name]
            rows.append([name] + [fmt_ratio(r["speedup"]) for r in k["rows"]]
                        + [_size(k["crossover"])])
        med = lambda key, n: kernels[names[0]]["rows"][sizes.index(n)][key]["median"]  # noqa: E731
        rows.append([f"({names[0]} serial)"] + [fmt_time(med("serial", n)) for n in sizes] + [""])
        rows.append([f"({names[0]} parallel)"] + [fmt_time(med("parallel", n)) for n in sizes]
                    + [""])
        fam = res["families"][family]
        print_table(headers, rows,
                    f"{family}: serial time / parallel time (float32; > 1 = parallel faster); "
                    f"family crossover {_size(fam['crossover'])}")

    rows = [[f, _size(v["crossover"]), _size(v["crossover_strict"]),
             ", ".join(v["kernels_never"]) or "-", str(res["thresholds"][f]),
             str(kp.PARALLEL_MIN_SIZE.get(f, "-"))]
            for f, v in res["families"].items()]
    print_table(["family", "crossover", "strict crossover", "kernels that never qualify",
                 "this run's threshold", "PARALLEL_MIN_SIZE now"], rows,
                f"Thresholds: >= {MIN_GAIN:.2f}x at the crossover, >= {MAX_LOSS:.2f}x above it "
                f"(strict: >= {MIN_GAIN:.2f}x above it too); never = {kp.NEVER}", align="llllrr")

    if res.get("threads"):
        rows = []
        for label, w in res["threads"].items():
            for m, r in w["modes"].items():
                rows.append([label, m, f"{r['steps_per_s']:.0f}",
                             fmt_ratio(r["throughput_vs_serial_1_thread"]),
                             fmt_time(r["wall"]["median"])])
        print_table(["workload", "kernels, threads", "steps/s (all threads)",
                     "vs serial 1 thread", "wall"], rows,
                    f"Training steps (ReLU fwd+bwd, Adam) in 1 or 2 Python threads, twins forced "
                    f"on whatever the size; layer {res['environment']['threading_layer']}",
                    align="llrrr")

    if res.get("compile"):
        rows = []
        for phase in ("cold", "warm"):
            for c, r in res["compile"][phase].items():
                d = r["delta_vs_serial_s"]
                rows.append([phase, c, fmt_time(r["first_call"]["median"]),
                             "-" if d is None else f"{'+' if d >= 0 else '-'}{fmt_time(abs(d))}",
                             fmt_time(r["compile"]["median"]), fmt_time(r["llvm"]["median"]),
                             f"{r['n_compiles']['median']:.0f}"])
        print_table(["cache", "caller", "first call", "vs serial", "numba compile", "LLVM",
                     "functions compiled"], rows,
                    "One jitted caller over the 18 kernels, without and with the twins "
                    "(fresh process each)", align="llrrrrr")
    for w in res["warnings"]:
        print(f"WARNING: {w}", flush=True)


def wait_quiet(timeout_s: float, window_s: float = 5.0, max_cores: float = 0.1) -> dict:
    """Wait (up to timeout_s) until other processes use < max_cores over a window_s window."""
    t0 = time.perf_counter()
    while True:
        with OtherLoad() as o:
            time.sleep(window_s)
        waited = time.perf_counter() - t0
        if o.cores is None or o.cores < max_cores or waited >= timeout_s:
            return dict(waited_s=waited, other_load_cores=o.cores,
                        quiet=o.cores is None or o.cores < max_cores)
        log(f"   waiting for a quiet machine: other processes use {o.cores:.2f} cores")


def _warnings(res: dict) -> list[str]:
    out = []
    busy = {n: k["other_load_cores"] for n, k in res["kernels"].items()
            if (k.get("other_load_cores") or 0) > res["config"]["max_other_cores"]}
    if busy:
        out.append("other processes kept a core busy while these kernels were timed (parallel "
                   "speedups understated there): "
                   + ", ".join(f"{n} {c:.2f} cores" for n, c in busy.items()))
    for label, w in (res.get("threads") or {}).items():
        if (w.get("other_load_cores") or 0) > res["config"]["max_other_cores"]:
            out.append(f"threads, {label}: other processes used {w['other_load_cores']:.2f} cores")
    if res["environment"]["threading_layer"] not in ("tbb", "omp"):
        out.append(f"threading layer {res['environment']['threading_layer']!r}: concurrent "
                   f"parallel regions abort; the thread section was skipped")
    if res["config"]["quick"]:
        out.append("--quick: one kernel per family, one compiled caller, 1 repeat; the numbers "
                   "mean nothing")
    return out


# -- main ----------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.parallel", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, 1 repeat, one kernel per family, one compiled caller: checks "
                        "that the benchmark runs (smoke test)")
    p.add_argument("--repeats", type=int, default=None, help="samples per build (default 9)")
    p.add_argument("--sample-ms", type=float, default=None,
                   help="minimum duration of one sample in ms (default 25)")
    p.add_argument("--compile-runs", type=int, default=None,
                   help="fresh processes per caller and cache state (default 3; 0 skips)")
    p.add_argument("--no-threads", action="store_true", help="skip the two-thread section")
    p.add_argument("--max-other", type=float, default=0.15, metavar="CORES",
                   help="retake a block of samples when other processes used more CPU than this "
                        "during it (default 0.15 cores)")
    p.add_argument("--max-wait", type=float, default=120.0, metavar="SECONDS",
                   help="give up retaking a block after this long and keep it, flagged "
                        "(default 120)")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="first wait up to SECONDS for other processes to go idle (default 0)")
    p.add_argument("--out", default="parallel",
                   help="results name, .json path or directory (default parallel)")
    args = p.parse_args(argv)
    q = args.quick
    repeats = args.repeats or (1 if q else 9)
    sample_s = (args.sample_ms or (0.5 if q else 25.0)) / 1e3
    compile_runs = args.compile_runs if args.compile_runs is not None else (1 if q else 3)
    sizes = list(QUICK_SIZES if q else SIZES)

    quiet = wait_quiet(args.wait_quiet) if args.wait_quiet > 0 else None
    t_start = time.perf_counter()
    load_before = loadavg()
    run_load = OtherLoad().__enter__()
    available = kp.parallel_available()
    layer = kp.threading_layer()
    res: dict = {"benchmark": "parallel",
                 "config": dict(quick=q, repeats=repeats, sample_s=sample_s, sizes=sizes,
                                min_gain=MIN_GAIN, max_loss=MAX_LOSS, dtype="float32",
                                compile_runs=compile_runs, max_other_cores=args.max_other,
                                max_wait_s=args.max_wait)}
    log(f"threading layer {layer!r}, parallel available: {available}, "
        f"{numba.config.NUMBA_NUM_THREADS} numba threads")
    log("1. kernels: serial vs parallel build")
    res["kernels"] = kernel_section(sizes, repeats, sample_s, args.max_other,
                                    0.0 if q else args.max_wait, QUICK_FAMILIES if q else None)
    res["families"] = family_thresholds(res["kernels"], sizes)
    res["thresholds"] = {f: (kp.NEVER if v["crossover"] is None else v["crossover"])
                         for f, v in res["families"].items()}
    res["never"] = kp.NEVER
    res["threads"] = None
    if not args.no_threads and layer in ("tbb", "omp"):
        log("2. two trainers in two threads")
        res["threads"] = threads_section(1 if q else max(3, repeats // 2), 0.05 if q else 0.5,
                                         {k: (min(a, 20_000), min(b, 20_000)) if q else (a, b)
                                          for k, (a, b) in THREAD_WORKLOADS.items()},
                                         args.max_other, 0.0 if q else args.max_wait)
    run_load.__exit__(None, None, None)  # kernels + threads; the compile children would count
    res["compile"] = None
    if compile_runs > 0:
        log(f"3. compile time ({compile_runs} fresh processes per caller and cache state)")
        res["compile"] = compile_section(compile_runs, QUICK_COMPILE_VARIANTS if q else
                                         tuple(COMPILE_VARIANTS))
    res["environment"] = environment_info(
        loadavg_before=load_before, loadavg_after=loadavg(), threading_layer=layer,
        other_load_cores=run_load.cores, wait_quiet=quiet,
        parallel_available=available, numba_num_threads=numba.config.NUMBA_NUM_THREADS,
        current_parallel_min_size=dict(kp.PARALLEL_MIN_SIZE))
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    return finish(res, out_path(args.out, "parallel"), _warnings, print_report)


if __name__ == "__main__":
    main()
