"""Memory and threads benchmark: NRT allocations per epoch, peak RSS of a fit, two trainers at once.

Run from the repository root::

    python -m benchmarks.memory            # full run (about 1 minute), tables + results/memory.json
    python -m benchmarks.memory --quick    # tiny sizes, 1 repeat (smoke test; numbers meaningless)

1. NRT allocations: numba's allocation statistics switched on in this process; the allocation
   count of a 2-epoch fit and of a 12-epoch fit after a warm-up fit. Per epoch must be 0.
2. Peak RSS: fresh ``python -c`` processes (sharing this process's numba cache, which the
   warm-up filled): ``resource.getrusage`` peak and current RSS after the interpreter start,
   ``import nnjit``, ``import pandas``, data + model, a first 1-epoch fit, a second fit.
3. Two trainers in two Python threads vs one after the other (same total work): wall time of
   both fits one after the other / wall time of both running at once (target >= 1.8x).

Workloads: Digits ``64-64-10`` batch 16 (80/20 split seed 0, standardised) and
``784-256-256-10`` batch 128 on 10,000 synthetic samples. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import os
import statistics
import sys
import threading
import time

import numpy as np

from benchmarks._common import (
    alternate,
    blas_info,
    child_env,
    count_nrt_allocations,
    environment_info,
    finish,
    fmt_num,
    fmt_ratio,
    fmt_time,
    load_rows,
    load_warning,
    loadavg,
    out_path,
    package_versions,
    print_table,
    ratio,
    revision_rows,
    run_child,
    summarize,
)

LR = 0.001
#: Target of issue 3: two trainers in two threads give >= 1.8x the throughput of sequential fits.
TARGET_THREAD_RATIO = 1.8

# Data and model of each workload; the RSS child gets the same two functions pasted in.
def make_workload(nn, np, name, n):
    """Training data of workload ``name`` ("digits" or "mlp784"; ``n`` = synthetic rows)."""
    if name == "digits":
        X, y = nn.datasets.load_digits()
        X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, 0.2, seed=0)
        X_train, X_test = nn.datasets.standardize(X_train, X_test)
        return dict(X=X_train, y=y_train, X_val=X_test, y_val=y_test, sizes=(64, 64, 10),
                    batch=16)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 784), dtype=np.float32)
    y = rng.integers(0, 10, n).astype(np.int64)
    return dict(X=X, y=y, X_val=None, y_val=None, sizes=(784, 256, 256, 10), batch=128)


def make_trainer(nn, w, seed):
    """A fresh MLP trainer (Adam lr 0.001, cross-entropy) and its DataLoader for workload ``w``."""
    nn.set_seed(seed)
    sizes = w["sizes"]
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
    trainer = nn.Trainer(nn.Sequential(*layers), nn.Adam(lr=0.001), nn.CrossEntropyLoss())
    return trainer, nn.DataLoader(w["X"], w["y"], batch_size=w["batch"])


_WORKLOAD_CODE = "\n" + inspect.getsource(make_workload) + "\n" + inspect.getsource(make_trainer)

WORKLOAD_LABELS = {"digits": "Digits 64-64-10, batch 16",
                   "mlp784": "784-256-256-10, batch 128"}

RSS_CHILD = """
from benchmarks._common import NumbaCompileProfiler, emit_result, rss_now
snap = [("interpreter start", rss_now())]
import nnjit as nn
snap.append(("import nnjit", rss_now()))
import pandas  # fit builds its history as a DataFrame (pandas is imported by the first fit)
snap.append(("import pandas", rss_now()))
import numpy as np
""" + _WORKLOAD_CODE + """
w = make_workload(nn, np, NAME, N)
trainer, loader = make_trainer(nn, w, 0)
snap.append(("data + model built", rss_now()))
with NumbaCompileProfiler() as prof:
    trainer.fit(loader, epochs=1, n_iter_no_change=None, verbose=False)
snap.append(("first fit, 1 epoch (loads compiled code)", rss_now()))
trainer.fit(loader, epochs=EPOCHS, n_iter_no_change=None, verbose=False)
snap.append((f"second fit, {EPOCHS} epoch{'s' if EPOCHS > 1 else ''}", rss_now()))
p = trainer.program
c = prof.summary()
emit_result(dict(
    snapshots=snap, n_compiles=c["n_compiles"], cache_loads=c["cache_loads"],
    arena_bytes=p.values.nbytes + p.grads.nbytes,
    optimizer_bytes=trainer.optimizer.state.nbytes, best_copy_bytes=trainer._best.nbytes,
    data_bytes=loader.features(np.float32).nbytes + w["y"].nbytes,
    n_params=int(p.n_params), n_rows=len(w["X"]),
))
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


#: Pause after ``gc.collect()`` before a timed two-thread run. On the 2-vCPU VM this was built
#: on, the 20-50 ms after a collection ran two threads slower: a compute-only nogil loop in two
#: threads took 28.5 ms instead of 22.7 ms right after ``gc.collect()``, 22.7 ms after 50 ms
#: (measured alone; inside this benchmark ~25 ms two-thread runs remain noisy regardless).
SETTLE_S = 0.05


def _settle() -> None:
    """Collect garbage from earlier runs, then let the machine settle before the timing."""
    gc.collect()
    time.sleep(SETTLE_S)


def _fit(trainer, loader, epochs, val=None):
    return trainer.fit(loader, epochs=epochs, val=val, n_iter_no_change=None, verbose=False)


# -- 1. NRT allocations --------------------------------------------------------------------------
def nrt_section(nn, workloads: dict) -> dict:
    cases = {"Digits 64-64-10, batch 16": ("digits", False),
             "Digits 64-64-10, batch 16, with validation": ("digits", True),
             "784-256-256-10, batch 128": ("mlp784", False)}
    out = {}
    for label, (name, with_val) in cases.items():
        w = workloads[name]
        trainer, loader = make_trainer(nn, w, 0)
        val = (w["X_val"], w["y_val"]) if with_val else None
        _fit(trainer, loader, 1, val)  # compile / load, lay out
        two, twelve = count_nrt_allocations(lambda k: _fit(trainer, loader, k, val), (2, 12))
        out[label] = dict(alloc_2=two["alloc"], alloc_12=twelve["alloc"], free_2=two["free"],
                          free_12=twelve["free"],
                          per_epoch=(twelve["alloc"] - two["alloc"]) / 10,
                          n_rows=len(w["X"]))
        log(f"   {label}: {out[label]['per_epoch']} allocations per epoch")
    return out


# -- 2. peak RSS ---------------------------------------------------------------------------------
def rss_section(runs: int, n_784: int, epochs: dict) -> dict:
    # Keep this process's numba cache (the warm-up filled it), drop other numba knobs.
    env = child_env(NUMBA_CACHE_DIR=os.environ.get("NUMBA_CACHE_DIR"))
    out = {}
    for name in ("digits", "mlp784"):
        code = f"NAME = {name!r}\nN = {n_784}\nEPOCHS = {epochs[name]}\n" + RSS_CHILD
        results = []
        for i in range(runs):
            r = run_child(code, env=env)
            r.pop("_launch_monotonic")
            r["process_wall_s"] = r.pop("_wall_s")
            results.append(r)
            log(f"   {name} child {i + 1}/{runs}: peak RSS "
                f"{r['snapshots'][-1][1]['peak'] / 2**20:.1f} MiB, "
                f"{r['n_compiles']} functions compiled")
        stages = [s for s, _ in results[0]["snapshots"]]
        table = []
        for k, stage in enumerate(stages):
            table.append(dict(stage=stage,
                              rss=summarize(r["snapshots"][k][1]["rss"] for r in results),
                              peak=summarize(r["snapshots"][k][1]["peak"] for r in results),
                              ru_maxrss=summarize(r["snapshots"][k][1]["ru_maxrss"]
                                                  for r in results)))
        first = results[0]
        out[name] = dict(label=WORKLOAD_LABELS[name], epochs_second_fit=epochs[name],
                         stages=table, n_rows=first["n_rows"], n_params=first["n_params"],
                         arena_bytes=first["arena_bytes"], optimizer_bytes=first["optimizer_bytes"],
                         best_copy_bytes=first["best_copy_bytes"], data_bytes=first["data_bytes"],
                         n_compiles=summarize(r["n_compiles"] for r in results),
                         cache_loads=summarize(r["cache_loads"] for r in results),
                         runs=results)
    return out


# -- 3. two trainers in two threads --------------------------------------------------------------
def _run_pair(work, parallel: bool) -> tuple[float, float]:
    """``work(0)`` and ``work(1)`` one after the other, or in two threads released together;
    returns (wall seconds, process CPU seconds) of the pair."""
    if parallel:
        barrier = threading.Barrier(3)

        def wait_then(k):
            barrier.wait()
            work(k)

        threads = [threading.Thread(target=wait_then, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        c0 = time.process_time()
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
    else:
        c0 = time.process_time()
        t0 = time.perf_counter()
        work(0)
        work(1)
    return time.perf_counter() - t0, time.process_time() - c0


def _pair_runner(nn, w, epochs: int, parallel: bool):
    def run(r: int) -> dict:
        pair = [make_trainer(nn, w, 1000 + 2 * r + k) for k in range(2)]
        per_fit = [None, None]
        histories = [None, None]

        def work(k):
            t0 = time.perf_counter()
            histories[k] = _fit(*pair[k], epochs)
            per_fit[k] = time.perf_counter() - t0

        _settle()
        wall, cpu = _run_pair(work, parallel)
        epoch_s = statistics.median(float(s) for h in histories for s in h["seconds"])
        return dict(wall_s=wall, cpu_s=cpu, cpu_per_wall=cpu / wall, fit_s=per_fit,
                    epoch_median_s=epoch_s)
    return run


_SPIN = None


def _spin(n: int) -> float:
    """``n`` steps of a dependent floating-point chain in compiled code without the GIL."""
    global _SPIN
    if _SPIN is None:
        import numba

        @numba.njit(nogil=True)
        def spin(n):
            x = 0.0
            for _ in range(n):
                x = x * 0.999999 + 1.0
            return x

        _SPIN = spin
    return _SPIN(n)


def _reference_runner(n: int, parallel: bool):
    """Two calls of :func:`_spin` one after the other or in two threads: no memory traffic, no
    BLAS, no Python in between, so its throughput ratio is what the machine offers right now."""
    def run(r: int) -> dict:
        _settle()  # as before the trainers
        wall, cpu = _run_pair(lambda k: _spin(n), parallel)
        return dict(wall_s=wall, cpu_per_wall=cpu / wall)
    return run


def _calibrate_spin(seconds: float) -> int:
    _spin(1000)
    n = 1_000_000
    t0 = time.perf_counter()
    _spin(n)
    per_step = max(time.perf_counter() - t0, 1e-6) / n
    return max(1000, int(seconds / per_step))


def threads_section(nn, workloads: dict, cases: dict) -> dict:
    """``cases``: key -> (workload name, epochs per trainer, repeats)."""
    out = {}
    for key, (name, n_epochs, repeats) in cases.items():
        w = workloads[name]
        label = f"{WORKLOAD_LABELS[name]}, {n_epochs} epochs"
        _fit(*make_trainer(nn, w, 0), 1)  # warm-up
        one = _pair_runner(nn, w, n_epochs, False)(0)["wall_s"] / 2  # one fit, for the reference
        n_spin = _calibrate_spin(min(one, 0.5))
        contenders = {"one after the other": _pair_runner(nn, w, n_epochs, False),
                      "two threads": _pair_runner(nn, w, n_epochs, True),
                      "reference, one after the other": _reference_runner(n_spin, False),
                      "reference, two threads": _reference_runner(n_spin, True)}
        log(f"3. {label}: 2 trainers, {repeats} repeats, alternating")
        raw = alternate(contenders, repeats,
                        lambda c, r, o: log(f"   repeat {r + 1} {c}: {fmt_time(o['wall_s'])}"))
        seq, par = raw["one after the other"], raw["two threads"]
        entry = {"label": label, "workload": name, "epochs_each": n_epochs,
                 "n_rows": len(w["X"]), "repeats": repeats}
        for how, outs in (("sequential", seq), ("threads", par)):
            entry[how] = {k: summarize(o[k] for o in outs)
                          for k in ("wall_s", "cpu_s", "cpu_per_wall", "epoch_median_s")}
            entry[how]["runs"] = outs
        entry["ratio_per_repeat"] = summarize(s["wall_s"] / p["wall_s"] for s, p in zip(seq, par))
        entry["ratio_of_medians"] = ratio(entry["sequential"]["wall_s"]["median"],
                                          entry["threads"]["wall_s"]["median"])
        # > 1 when each epoch itself ran slower with two trainers at once (shared cache, memory
        # bandwidth, another process on the CPU), as opposed to time spent outside compiled code.
        entry["epoch_slowdown_in_threads"] = ratio(entry["threads"]["epoch_median_s"]["median"],
                                                   entry["sequential"]["epoch_median_s"]["median"])
        rs, rp = raw["reference, one after the other"], raw["reference, two threads"]
        entry["reference"] = {
            "what": "two nogil numba loops (a dependent float chain, about as long as one fit), "
                    "one after the other vs in two threads, alternated with the trainers",
            "steps": n_spin,
            "sequential": {k: summarize(o[k] for o in rs) for k in ("wall_s", "cpu_per_wall")},
            "threads": {k: summarize(o[k] for o in rp) for k in ("wall_s", "cpu_per_wall")},
            "ratio_per_repeat": summarize(s["wall_s"] / p["wall_s"] for s, p in zip(rs, rp)),
        }
        out[key] = entry
    return out


def blas_inside_threaded_fits(nn, w) -> dict:
    """BLAS thread counts seen by a callback inside fits, in the main thread and in two threads.

    nnjit pins BLAS to 1 thread during a fit; a pin that does not take effect in a worker thread
    (e.g. refused by the BLAS controller because another thread "owns" the limit) lets both
    trainers run multi-threaded GEMMs at once: on 2 cores that oversubscribes the CPU.
    """
    from nnjit.train.threads import blas_thread_counts

    seen = {"main thread": [], "thread 1": [], "thread 2": []}

    def fit(key, seed):
        trainer, loader = make_trainer(nn, w, seed)
        trainer.fit(loader, epochs=2, n_iter_no_change=None, verbose=False,
                    callbacks=[lambda h: seen[key].append(blas_thread_counts())])

    fit("main thread", 0)
    threads = [threading.Thread(target=fit, args=(f"thread {k}", k)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seen["outside fits"] = blas_thread_counts()
    return seen


# -- report --------------------------------------------------------------------------------------
def _mib(x) -> str:
    return "-" if x is None else f"{x / 2**20:.1f} MiB"


def print_report(res: dict) -> None:
    env = res["environment"]
    print(f"nnjit memory and threads benchmark ({env['cpu_model']}, {env['cpu_affinity']} usable "
          f"cores)\n", flush=True)
    rows = [[k, fmt_num(v["alloc_2"]), fmt_num(v["alloc_12"]), fmt_num(v["per_epoch"])]
            for k, v in res["nrt"].items()]
    print_table(["fit", "allocs, 2 epochs", "allocs, 12 epochs", "per epoch"], rows,
                "1. NRT allocations (numba allocation statistics, in-process; after a warm-up "
                "fit)")

    for name, e in res["rss"].items():
        rows = []
        prev = None
        for s in e["stages"]:
            peak = s["peak"]["median"]
            rows.append([s["stage"], _mib(s["rss"]["median"]), _mib(peak),
                         "" if prev is None else _mib(peak - prev),
                         _mib(s["ru_maxrss"]["median"])])
            prev = peak
        rows.append(["nnjit arrays: arena values + grads", _mib(e["arena_bytes"]), "", ""])
        rows.append(["  Adam state + best-weights copy",
                     _mib(e["optimizer_bytes"] + e["best_copy_bytes"]), "", ""])
        rows.append(["training data (float32 X + y)", _mib(e["data_bytes"]), "", ""])
        n = e["stages"][0]["peak"]["n"]
        print_table(["after", "RSS", "peak RSS", "peak grew by", "ru_maxrss"], rows,
                    f"2. Peak RSS, {e['label']}, {e['n_rows']} rows, {e['n_params']} parameters "
                    f"(fresh process, medians of {n}; functions compiled: "
                    f"{fmt_num(e['n_compiles']['max'])})")

    rows = []
    for e in res["threads"].values():
        for key, label in (("sequential", "one after the other"), ("threads", "two threads")):
            s = e[key]
            first = e["label"] if key == "sequential" else f"  {e['repeats']} repeats"
            rows.append([first, label,
                         fmt_time(s["wall_s"]["median"], "ms"), fmt_time(s["wall_s"]["min"], "ms"),
                         fmt_time(s["wall_s"]["max"], "ms"),
                         fmt_num(s["cpu_per_wall"]["median"], 2),
                         fmt_time(s["epoch_median_s"]["median"], "ms"),
                         "" if key == "sequential" else
                         f"{fmt_ratio(e['ratio_per_repeat']['median'])} "
                         f"({fmt_ratio(e['ratio_per_repeat']['min'])}-"
                         f"{fmt_ratio(e['ratio_per_repeat']['max'])})"])
        ref = e["reference"]
        rr = ref["ratio_per_repeat"]
        rows.append(["", "reference: nogil loop x 2",
                     fmt_time(ref["threads"]["wall_s"]["median"], "ms"),
                     fmt_time(ref["threads"]["wall_s"]["min"], "ms"),
                     fmt_time(ref["threads"]["wall_s"]["max"], "ms"),
                     fmt_num(ref["threads"]["cpu_per_wall"]["median"], 2), "",
                     f"{fmt_ratio(rr['median'])} ({fmt_ratio(rr['min'])}-"
                     f"{fmt_ratio(rr['max'])})"])
    print_table(["workload", "how", "wall", "min", "max", "CPU/wall", "epoch", "throughput"],
                rows, "3. Two trainers, same total work, medians over the repeats "
                "(throughput = sequential wall / threaded wall per repeat, median "
                "(min-max); epoch = median compiled epoch time; reference = two compute-only "
                "nogil loops as long as one fit, in threads: what the machine offered)")

    blas = res["blas_threads_inside_fits"]
    rows = [[k, str(v)] for k, v in blas.items()]
    print_table(["where", "BLAS threads (numpy's, scipy's OpenBLAS) per epoch"], rows,
                "   BLAS threads seen inside fits (callback after each epoch; nnjit pins 1)",
                align="ll")

    v = env["versions"]
    rows = [["python / numba / numpy", f"{env['python']} / {env['numba']} / {env['numpy']}"],
            ["pandas / scipy", f"{v.get('pandas')} / {v.get('scipy')}"],
            ["CPU", f"{env['cpu_model']} ({env['cpu_count']} logical, "
                    f"{env['cpu_affinity']} usable)"],
            *load_rows(env),
            ["BLAS libraries",
             ", ".join(f"{x.get('internal_api')} {x.get('version')} ({x.get('architecture')})"
                       for x in env.get("blas_libraries", [])) or "-"],
            ["OPENBLAS_CORETYPE", str(env.get("openblas_coretype"))],
            *revision_rows(res)]
    print_table(["item", "value"], rows, "Environment", align="ll")
    for w in res.get("warnings", []):
        print(f"WARNING: {w}", flush=True)


def _warnings(res: dict) -> list[str]:
    out = []
    env = res["environment"]
    busy = load_warning(env, "other processes competed for the CPU (two threads need both "
                             "cores)")
    if busy:
        out.append(busy)
    for where, counts in res["blas_threads_inside_fits"].items():
        if where != "outside fits" and any(set(c) != {1} for c in counts):
            out.append(f"BLAS was not single-threaded inside fits ({where}: {counts}): "
                       "concurrent trainers then oversubscribe the CPU")
    for k, v in res["nrt"].items():
        if v["per_epoch"] != 0:
            out.append(f"NRT allocations per epoch ({k}): {v['per_epoch']} (expected 0)")
    for name, e in res["rss"].items():
        if (e["n_compiles"]["max"] or 0) > 0:
            out.append(f"the RSS child ({name}) compiled functions: its peak includes compilation")
    if res["config"]["quick"]:
        out.append("--quick: tiny sizes and 1 repeat; the numbers mean nothing")
        return out
    for name, e in res["threads"].items():
        r = e["ratio_per_repeat"]["median"]
        ref = e["reference"]["ratio_per_repeat"]["median"]
        if r is not None and r < TARGET_THREAD_RATIO:
            note = "" if ref is None or ref >= TARGET_THREAD_RATIO else (
                f"; the compute-only reference reached only {ref:.2f}x: the machine did not "
                "offer two free cores")
            out.append(f"target missed: two threads gave {r:.2f}x on {e['label']} "
                       f"(target {TARGET_THREAD_RATIO}x){note}")
    return out


# -- main ----------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, 1 repeat: checks that the benchmark runs (smoke test)")
    p.add_argument("--repeats", type=int, default=None,
                   help="repeats of the 784-256-256-10 thread comparison (default 7)")
    p.add_argument("--digits-repeats", type=int, default=None,
                   help="repeats of the Digits thread comparison (default 21: its fits take "
                        "about 25 ms, so a few ms of another process matter)")
    p.add_argument("--rss-runs", type=int, default=None, help="RSS child processes (default 3)")
    p.add_argument("--samples", type=int, default=None,
                   help="synthetic rows for 784-256-256-10 (default 10000)")
    p.add_argument("--digits-epochs", type=int, default=None,
                   help="epochs per Digits trainer in the thread comparison (default 30)")
    p.add_argument("--digits-long-epochs", type=int, default=None,
                   help="epochs per Digits trainer in the long thread comparison (default 300; "
                        "0 skips it)")
    p.add_argument("--mlp-epochs", type=int, default=None,
                   help="epochs per 784-256-256-10 trainer in the thread comparison (default 3)")
    p.add_argument("--out", default="memory",
                   help="results name, .json path or directory (default memory)")
    args = p.parse_args(argv)
    q = args.quick
    args.repeats = args.repeats or (1 if q else 7)
    args.digits_repeats = args.digits_repeats or (1 if q else 21)
    args.rss_runs = args.rss_runs or (1 if q else 3)
    args.samples = args.samples or (512 if q else 10_000)
    cases = {"digits": ("digits", args.digits_epochs or (2 if q else 30), args.digits_repeats),
             "digits_long": ("digits", 4 if q else (300 if args.digits_long_epochs is None
                                                    else args.digits_long_epochs),
                             args.repeats),
             "mlp784": ("mlp784", args.mlp_epochs or (1 if q else 3), args.repeats)}
    cases = {k: v for k, v in cases.items() if v[1] > 0}

    t_start = time.perf_counter()
    load_before = loadavg()
    import nnjit as nn

    res: dict = {"benchmark": "memory",
                 "config": dict(quick=q, repeats=args.repeats,
                                digits_repeats=args.digits_repeats, rss_runs=args.rss_runs,
                                samples=args.samples, thread_cases=cases, lr=LR,
                                dtype="float32")}
    workloads = {"digits": make_workload(nn, np, "digits", 0),
                 "mlp784": make_workload(nn, np, "mlp784", args.samples)}
    nrt_workloads = dict(workloads, mlp784=make_workload(nn, np, "mlp784", 256 if q else 2048))
    log("   warm-up (fills the numba cache the children use)")
    for w in workloads.values():
        _fit(*make_trainer(nn, w, 0), 1)
    log(f"2. peak RSS ({args.rss_runs} fresh processes per workload)")
    res["rss"] = rss_section(args.rss_runs, args.samples,
                             {"digits": 2 if q else 10, "mlp784": 1 if q else 3})
    res["threads"] = threads_section(nn, workloads, cases)
    res["blas_threads_inside_fits"] = blas_inside_threaded_fits(nn, workloads["digits"])
    log("1. NRT allocations (in-process statistics)")
    res["nrt"] = nrt_section(nn, nrt_workloads)
    versions = package_versions("pandas", "scipy", "threadpoolctl")
    res["environment"] = environment_info(loadavg_before=load_before, loadavg_after=loadavg(),
                                          blas_libraries=blas_info(), versions=versions,
                                          openblas_coretype=os.environ.get("OPENBLAS_CORETYPE"))
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    return finish(res, out_path(args.out, "memory"), _warnings, print_report)


if __name__ == "__main__":
    main()
