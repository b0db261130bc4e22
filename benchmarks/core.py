"""Core benchmark: compile time, first-fit latency, steady-state epoch time, NRT allocations.

Run from the repository root::

    python -m benchmarks.core            # full run (about 1-2 minutes), table + results/core.json
    python -m benchmarks.core --help     # fewer runs, skip parts, another output path

Workload throughout: Digits (``nnjit.datasets.load_digits()``, 80/20 stratified split, seed 0,
standardised with the training statistics), ``Linear(64, 64) - ReLU - Linear(64, 10)``,
cross-entropy, batch 16, Adam lr 0.001, float32. See ``benchmarks/README.md`` for every column.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import warnings

from benchmarks._common import (
    Stopwatch,
    alternate,
    blas_info,
    child_env,
    dir_size,
    environment_info,
    finish,
    fmt_num,
    fmt_ratio,
    fmt_time,
    import_profile,
    load_rows,
    load_warning,
    loadavg,
    package_versions,
    print_environment,
    print_table,
    ratio,
    revision_rows,
    run_child,
    summarize,
    summary_cells,
    temp_dir,
)

HIDDEN, BATCH, LR = 64, 16, 0.001

# The data and model every part uses (also pasted into the child scripts below).
_SETUP = """
X, y = nn.datasets.load_digits()
X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, 0.2, seed=0)
X_train, X_test = nn.datasets.standardize(X_train, X_test)
nn.set_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
trainer = nn.Trainer(model, nn.Adam(lr=0.001), nn.CrossEntropyLoss())
loader = nn.DataLoader(X_train, y_train, batch_size=16)
"""

# A fresh interpreter: import nnjit, then the first fit (1 epoch), then a second one.
# Cold when NUMBA_CACHE_DIR is empty, warm when it is populated.
FIRST_FIT_CHILD = """
import time
T_START = time.monotonic()
_t0 = time.perf_counter()
import nnjit as nn
_t1 = time.perf_counter()
_c1 = time.process_time()
from benchmarks._common import NumbaCompileProfiler, emit_result
""" + _SETUP + """
_t2 = time.perf_counter()
_c2 = time.process_time()
with NumbaCompileProfiler() as prof:
    history = trainer.fit(loader, epochs=1, verbose=False)
_t3 = time.perf_counter()
T_END = time.monotonic()
_c3 = time.process_time()
trainer.fit(loader, epochs=1, verbose=False)
_t4 = time.perf_counter()
emit_result(dict(
    start_monotonic=T_START, end_first_fit_monotonic=T_END,
    import_s=_t1 - _t0, setup_s=_t2 - _t1, first_fit_s=_t3 - _t2, second_fit_s=_t4 - _t3,
    cpu_import_s=_c1, cpu_first_fit_s=_c3 - _c2, cpu_total_s=_c3,
    epoch_s=float(history["seconds"].iloc[0]), compile=prof.summary(),
    nnjit_file=nn.__file__,
))
"""

# NUMBA_NRT_STATS=1: NRT allocations of a 2-epoch fit and of a 12-epoch fit (after a compile fit).
NRT_CHILD = """
import nnjit as nn
from numba.core.runtime import rtsys
from benchmarks._common import emit_result
""" + _SETUP + """
result = {}
for name, val in (("with_val", (X_test, y_test)), ("no_val", None)):
    trainer.fit(loader, epochs=1, val=val, verbose=False, n_iter_no_change=None)  # compile/load
    counts = {}
    for epochs in (2, 12):
        s0 = rtsys.get_allocation_stats()
        trainer.fit(loader, epochs=epochs, val=val, verbose=False, n_iter_no_change=None)
        s1 = rtsys.get_allocation_stats()
        counts[epochs] = dict(alloc=s1.alloc - s0.alloc, free=s1.free - s0.free)
    result[name] = dict(
        alloc_2=counts[2]["alloc"], alloc_12=counts[12]["alloc"],
        free_2=counts[2]["free"], free_12=counts[12]["free"],
        per_epoch=(counts[12]["alloc"] - counts[2]["alloc"]) / 10,
    )
emit_result(result)
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- 1 and 2: cold compile and warm first fit ----------------------------------------------------
def first_fit_run(cache_dir: str | None) -> dict:
    """A fresh process's import and first fit with ``cache_dir`` as NUMBA_CACHE_DIR (None:
    numba's default cache, whose size is not reported)."""
    r = run_child(FIRST_FIT_CHILD, env=child_env(NUMBA_CACHE_DIR=cache_dir))
    launch = r.pop("_launch_monotonic")
    r["process_wall_s"] = r.pop("_wall_s")
    r["startup_s"] = r["start_monotonic"] - launch  # launch -> first line of the script
    r["import_plus_first_fit_s"] = r["end_first_fit_monotonic"] - launch
    r["cache_files"], r["cache_bytes"] = dir_size(cache_dir) if cache_dir else (None, None)
    return r


def cold_compile(workdir: str, runs: int, fresh: bool = True) -> tuple[dict, str | None]:
    """``runs`` first fits, each in a fresh process with an empty NUMBA_CACHE_DIR; with
    ``fresh=False`` (--quick: the code path, not the numbers) in numba's default cache."""
    results, last_cache = [], None
    for i in range(runs):
        cache = os.path.join(workdir, f"cold-cache-{i}") if fresh else None
        if fresh:
            os.makedirs(cache)
        r = first_fit_run(cache)
        log(f"  cold run {i + 1}/{runs}: import {fmt_time(r['import_s'])}, "
            f"first fit {fmt_time(r['first_fit_s'])}, "
            f"compile {fmt_time(r['compile']['compile_s'])}")
        results.append(r)
        last_cache = cache
    return _first_fit_summary(results), last_cache


def warm_first_fit(cache: str, runs: int) -> dict:
    results = []
    for i in range(runs):
        r = first_fit_run(cache)
        log(f"  warm run {i + 1}/{runs}: import {fmt_time(r['import_s'])}, "
            f"first fit {fmt_time(r['first_fit_s'])}, "
            f"total {fmt_time(r['import_plus_first_fit_s'])}")
        results.append(r)
    return _first_fit_summary(results)


def _first_fit_summary(runs: list[dict]) -> dict:
    keys = ("import_s", "setup_s", "first_fit_s", "second_fit_s", "epoch_s", "startup_s",
            "import_plus_first_fit_s", "process_wall_s", "cpu_import_s", "cpu_first_fit_s",
            "cpu_total_s")
    out = {k: summarize(r[k] for r in runs) for k in keys}
    comp = [r["compile"] for r in runs]
    out["compile_s"] = summarize(c["compile_s"] for c in comp)
    out["llvm_s"] = summarize(c["llvm_s"] for c in comp)
    out["frontend_s"] = summarize(c["compile_s"] - c["llvm_s"] for c in comp)
    out["outside_compile_s"] = summarize(r["first_fit_s"] - r["compile"]["compile_s"]
                                         for r in runs)
    for k in ("n_compiles", "cache_loads", "cache_load_s", "cache_saves", "cache_save_s"):
        out[k] = summarize(c[k] for c in comp)
    # Median over runs of each name's exclusive time (and LLVM part), top 6 by median.
    for key in ("top_functions", "top_passes"):
        names = {row[0] for c in comp for row in c[key]}
        rows = []
        for n in names:
            per_run = [next((row for row in c[key] if row[0] == n), None) for c in comp]
            cols = len(comp[0][key][0]) if comp[0][key] else 2
            rows.append([n] + [statistics.median([row[i] if row else 0.0 for row in per_run])
                               for i in range(1, cols)])
        out[key] = sorted(rows, key=lambda row: -row[1])[:6]
    out["cache_files"] = runs[-1]["cache_files"]
    out["cache_bytes"] = runs[-1]["cache_bytes"]
    out["nnjit_file"] = runs[-1]["nnjit_file"]
    out["runs"] = runs
    return out


def import_breakdown(cache: str, runs: int = 3) -> dict:
    """Where ``import nnjit`` spends its time, per top-level package (median of ``runs``)."""
    profiles = [import_profile("nnjit", child_env(NUMBA_CACHE_DIR=cache)) for _ in range(runs)]
    names = {n for p in profiles for n in p["packages"]}
    med = {n: statistics.median(p["packages"].get(n, 0.0) for p in profiles) for n in names}
    return {"total_s": summarize(p["total_s"] for p in profiles),
            "packages": dict(sorted(med.items(), key=lambda kv: -kv[1]))}


# -- 4: NRT allocations --------------------------------------------------------------------------
def nrt_allocations(cache: str | None) -> dict:
    env = child_env(NUMBA_NRT_STATS=1, NUMBA_CACHE_DIR=cache)
    r = run_child(NRT_CHILD, env=env)
    r.pop("_launch_monotonic")
    r["process_wall_s"] = r.pop("_wall_s")
    return r


# -- 3: steady state -----------------------------------------------------------------------------
def steady_state(epochs: int, repeats: int, peers: bool) -> tuple[dict, dict]:
    import numpy as np

    import nnjit as nn
    from nnjit.train.threads import blas_thread_counts

    X, y = nn.datasets.load_digits()
    X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, 0.2, seed=0)
    X_train, X_test = nn.datasets.standardize(X_train, X_test)

    def mlp():
        return nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))

    def make_nnjit(with_val: bool):
        def run(r: int, n_epochs: int = epochs) -> dict:
            nn.set_seed(r)
            trainer = nn.Trainer(mlp(), nn.Adam(lr=LR), nn.CrossEntropyLoss())
            loader = nn.DataLoader(X_train, y_train, batch_size=BATCH)
            val = (X_test, y_test) if with_val else None
            gc.collect()
            with Stopwatch() as sw:
                h = trainer.fit(loader, epochs=n_epochs, val=val, n_iter_no_change=None,
                                verbose=False)
            assert len(h) == n_epochs, len(h)
            return dict(wall_s=sw.seconds, per_epoch_s=sw.seconds / n_epochs,
                        epoch_median_s=float(h["seconds"].median()),
                        accuracy=float(np.mean(trainer.predict(X_test) == y_test)),
                        final_train_loss=float(h["train_loss"].iloc[-1]))
        return run

    contenders = {"nnjit": make_nnjit(False), "nnjit + val": make_nnjit(True)}
    skipped = {}
    versions = {}

    if peers:
        try:
            import sklearn
            from sklearn.exceptions import ConvergenceWarning
            from sklearn.neural_network import MLPClassifier
            from threadpoolctl import threadpool_limits
        except ImportError as e:
            skipped["scikit-learn"] = f"skipped: scikit-learn not installed ({e})"
        else:
            versions["scikit-learn"] = sklearn.__version__
            X64, Xt64 = X_train.astype(np.float64), X_test.astype(np.float64)

            def run_sklearn(r: int, n_epochs: int = epochs) -> dict:
                clf = MLPClassifier(hidden_layer_sizes=(HIDDEN,), batch_size=BATCH, solver="adam",
                                    learning_rate_init=LR, max_iter=n_epochs, tol=0.0,
                                    n_iter_no_change=1000, early_stopping=False, random_state=r)
                gc.collect()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    with threadpool_limits(limits=1, user_api="blas"), Stopwatch() as sw:
                        clf.fit(X64, y_train)
                assert clf.n_iter_ == n_epochs, clf.n_iter_
                return dict(wall_s=sw.seconds, per_epoch_s=sw.seconds / n_epochs,
                            epoch_median_s=None,
                            accuracy=float(np.mean(clf.predict(Xt64) == y_test)),
                            final_train_loss=float(clf.loss_curve_[-1]))

            contenders["scikit-learn"] = run_sklearn

        try:
            import torch

            from benchmarks.peers import torch_train_epoch
        except ImportError as e:
            skipped["PyTorch"] = f"skipped: PyTorch not installed ({e})"
        else:
            versions["torch"] = torch.__version__
            torch.set_num_threads(1)
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:
                pass
            Xt = torch.from_numpy(np.ascontiguousarray(X_train, dtype=np.float32))
            yt = torch.from_numpy(y_train.astype(np.int64))
            Xtt = torch.from_numpy(np.ascontiguousarray(X_test, dtype=np.float32))

            def run_torch(r: int, n_epochs: int = epochs) -> dict:
                torch.manual_seed(r)
                model = torch.nn.Sequential(torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(),
                                            torch.nn.Linear(HIDDEN, 10))
                opt = torch.optim.Adam(model.parameters(), lr=LR)
                loss_fn = torch.nn.CrossEntropyLoss()
                n = len(Xt)
                times, loss_sum = [], 0.0
                gc.collect()
                t0 = time.perf_counter()
                for _ in range(n_epochs):
                    te = time.perf_counter()
                    loss_sum = torch_train_epoch(model, opt, loss_fn, Xt, yt, BATCH)
                    times.append(time.perf_counter() - te)
                wall = time.perf_counter() - t0
                with torch.no_grad():
                    pred = model(Xtt).argmax(1).numpy()
                return dict(wall_s=wall, per_epoch_s=wall / n_epochs,
                            epoch_median_s=statistics.median(times),
                            accuracy=float(np.mean(pred == y_test)),
                            final_train_loss=loss_sum / n)

            contenders["PyTorch eager"] = run_torch

    for name, msg in skipped.items():
        log(f"  {name}: {msg}")

    # Warm-up: load compiled code from the cache, first-call costs of every peer.
    for fn in contenders.values():
        fn(0, 1)

    def progress(name, r, out):
        log(f"  repeat {r + 1}/{repeats} {name}: {fmt_time(out['per_epoch_s'])}/epoch")

    raw = alternate(contenders, repeats, progress)

    # BLAS thread counts inside and outside a fit (a callback runs between compiled epochs).
    inside = []
    nn.set_seed(0)
    tr = nn.Trainer(mlp(), nn.Adam(lr=LR))
    tr.fit(nn.DataLoader(X_train, y_train, batch_size=BATCH), epochs=2, verbose=False,
           callbacks=[lambda h: inside.append(blas_thread_counts())])
    blas = dict(inside_fit=inside, outside_fit=blas_thread_counts(), libraries=blas_info())

    results = {"epochs": epochs, "repeats": repeats, "n_train": len(X_train),
               "n_test": len(X_test), "steps_per_epoch": -(-len(X_train) // BATCH),
               "order": list(contenders), "skipped": skipped, "peer_versions": versions,
               "contenders": {}}
    base = statistics.median(o["per_epoch_s"] for o in raw["nnjit"])
    for name, outs in raw.items():
        entry = {k: summarize(o[k] for o in outs)
                 for k in ("per_epoch_s", "epoch_median_s", "wall_s", "accuracy",
                           "final_train_loss")}
        entry["ratio_vs_nnjit"] = ratio(entry["per_epoch_s"]["median"], base)
        results["contenders"][name] = entry
    if peers and "scikit-learn" in contenders:
        results["sklearn_params"] = dict(hidden_layer_sizes=[HIDDEN], batch_size=BATCH,
                                         solver="adam", learning_rate_init=LR, max_iter=epochs,
                                         tol=0.0, n_iter_no_change=1000, early_stopping=False,
                                         dtype="float64", blas_threads=1,
                                         alpha="default (0.0001)")
    return results, blas


# -- report --------------------------------------------------------------------------------------
def _first_fit_rows(s: dict, cold: bool) -> list[list[str]]:
    rows = [["import nnjit", *summary_cells(s["import_s"])],
            ["first fit, 1 epoch" + (" (incl. compile)" if cold else ""),
             *summary_cells(s["first_fit_s"])]]
    if cold:
        rows += [
            ["  numba compile, all functions", *summary_cells(s["compile_s"])],
            ["    LLVM optimise + codegen (llvm_lock)", *summary_cells(s["llvm_s"])],
            ["    numba front end (IR, typing, lowering)", *summary_cells(s["frontend_s"])],
            ["  outside compile (trace, cache write, run)", *summary_cells(s["outside_compile_s"])],
            ["  writing the numba cache (overlaps the above)", *summary_cells(s["cache_save_s"])],
            ["  functions compiled", *summary_cells(s["n_compiles"], fmt_num)],
            ["process CPU time (start -> end of fit)", *summary_cells(s["cpu_total_s"])],
            ["  CPU time of the first fit", *summary_cells(s["cpu_first_fit_s"])],
        ]
    else:
        rows += [
            ["  loading compiled code from the cache", *summary_cells(s["cache_load_s"])],
            ["  functions loaded from the cache", *summary_cells(s["cache_loads"], fmt_num)],
            ["  functions compiled (should be 0)", *summary_cells(s["n_compiles"], fmt_num)],
            ["import + first fit (process start -> end)",
             *summary_cells(s["import_plus_first_fit_s"])],
            ["  interpreter startup", *summary_cells(s["startup_s"])],
            ["  data + model setup", *summary_cells(s["setup_s"])],
            ["process CPU time (start -> end of fit)", *summary_cells(s["cpu_total_s"])],
            ["  of which up to the end of import", *summary_cells(s["cpu_import_s"])],
        ]
    rows += [["second fit, 1 epoch (same process)", *summary_cells(s["second_fit_s"])],
             ["  epoch time inside the first fit", *summary_cells(s["epoch_s"])]]
    return rows


def print_report(res: dict) -> None:
    env = res["environment"]
    print(f"nnjit core benchmark -- Digits 64-{HIDDEN}-10, batch {BATCH}, Adam lr {LR}, float32"
          f" ({env['cpu_model']}, {env['cpu_affinity']} usable cores)\n", flush=True)
    head = ["", "median", "min", "max"]
    if "cold_compile" in res:
        s = res["cold_compile"]
        cache = ("numba's default cache (--quick)" if s["cache_bytes"] is None else
                 f"cache afterwards: {s['cache_files']} files, {s['cache_bytes'] / 1e6:.1f} MB")
        print_table(head, _first_fit_rows(s, True),
                    f"1. Cold compile: fresh process, empty NUMBA_CACHE_DIR ({s['import_s']['n']}"
                    f" runs; {cache})")
        rows = [[n.replace("nnjit.", ""), fmt_time(t), fmt_time(llvm)]
                for n, t, llvm in s["top_functions"]]
        print_table(["function (exclusive of callees)", "compile", "of which LLVM"], rows,
                    "   Compile time by function (medians)")
        rows = [[n, fmt_time(t)] for n, t in s["top_passes"]]
        print_table(["numba pass [function] (exclusive)", "time"], rows,
                    "   Compile time by compiler pass (medians; native_lowering includes LLVM)")
    if "warm_first_fit" in res:
        s = res["warm_first_fit"]
        print_table(head, _first_fit_rows(s, False),
                    f"2. Warm first fit: fresh process, populated cache "
                    f"({s['import_s']['n']} runs)")
        ib = s.get("import_breakdown")
        if ib:
            rows = [[n, fmt_time(t)] for n, t in list(ib["packages"].items())[:6]]
            print_table(["package", "self time"], rows,
                        f"   import nnjit by package (-X importtime, median of "
                        f"{ib['total_s']['n']}; total {fmt_time(ib['total_s']['median'])})")
    if "steady_state" in res:
        s = res["steady_state"]
        rows = []
        for name, e in s["contenders"].items():
            pe = e["per_epoch_s"]
            rows.append([name, fmt_time(e["epoch_median_s"]["median"], "ms"),
                         fmt_time(pe["median"], "ms"), fmt_time(pe["min"], "ms"),
                         fmt_time(pe["max"], "ms"), fmt_ratio(e["ratio_vs_nnjit"]),
                         fmt_num(e["accuracy"]["median"])])
        for name, msg in s["skipped"].items():
            rows.append([name, msg])
        print_table(["contender", "epoch timer", "wall/epoch", "min", "max", "vs nnjit",
                     "test acc"], rows,
                    f"3. Steady state per epoch: {s['epochs']} epochs x {s['repeats']} repeats, "
                    f"medians ({s['n_train']} train rows, {s['steps_per_epoch']} steps/epoch)")
    if "nrt" in res:
        rows = [[k, fmt_num(v["alloc_2"]), fmt_num(v["alloc_12"]), fmt_num(v["per_epoch"])]
                for k, v in res["nrt"].items() if isinstance(v, dict)]
        print_table(["fit", "allocs, 2 epochs", "allocs, 12 epochs", "per epoch"], rows,
                    "4. NRT allocations (NUMBA_NRT_STATS=1)")
    blas = env.get("blas_threads", {})
    libs = ", ".join(f"{b.get('internal_api')} {b.get('version')}"
                     for b in blas.get("libraries", []))
    v = env["versions"]
    rows = [["python / numba / numpy", f"{env['python']} / {env['numba']} / {env['numpy']}"],
            ["scikit-learn / torch", f"{v.get('scikit-learn')} / {v.get('torch')}"],
            ["CPU", f"{env['cpu_model']} ({env['cpu_count']} logical, "
                    f"{env['cpu_affinity']} usable)"],
            *load_rows(env),
            ["BLAS threads inside fit", str(blas.get("inside_fit"))],
            ["BLAS threads outside fit", str(blas.get("outside_fit"))],
            ["BLAS libraries", libs or "-"],
            *revision_rows(res)]
    print_environment(rows, res, "5. Environment")


def _warnings(res: dict) -> list[str]:
    out = []
    env = res["environment"]
    busy = load_warning(env, "other processes may have competed for the CPU (compare CPU and "
                             "wall times)")
    if busy:
        out.append(busy)
    cold = res.get("cold_compile")
    if cold and cold["cpu_first_fit_s"]["median"] and cold["first_fit_s"]["median"]:
        share = cold["cpu_first_fit_s"]["median"] / cold["first_fit_s"]["median"]
        if share < 0.85:
            out.append(f"cold first fit got only {share:.0%} of a CPU (CPU time / wall time): "
                       "the machine was busy")
    warm = res.get("warm_first_fit")
    if warm and (warm["n_compiles"]["max"] or 0) > 0:
        out.append("the warm first fit compiled functions: the numba cache was not used")
    for name, v in (res.get("nrt") or {}).items():
        if isinstance(v, dict) and v["per_epoch"] != 0:
            out.append(f"NRT allocations per epoch ({name}): {v['per_epoch']} (expected 0)")
    inside = (env.get("blas_threads") or {}).get("inside_fit") or []
    if any(set(c) != {1} for c in inside):
        out.append(f"BLAS was not single-threaded inside fit: {inside}")
    if res["config"]["quick"]:
        out.append("--quick: a smoke run (no peers, 1 run of each part, the 'cold' process on "
                   "numba's default cache); the numbers mean nothing")
    return out


# -- main ----------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.core", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cold-runs", type=int, default=3, help="cold-compile processes (default 3)")
    p.add_argument("--warm-runs", type=int, default=5, help="warm first-fit processes (default 5)")
    p.add_argument("--epochs", type=int, default=50, help="epochs per steady-state fit (50)")
    p.add_argument("--repeats", type=int, default=5, help="steady-state repeats (default 5)")
    p.add_argument("--import-runs", type=int, default=3,
                   help="-X importtime processes for the import breakdown (default 3)")
    p.add_argument("--no-peers", action="store_true", help="skip scikit-learn and PyTorch")
    p.add_argument("--quick", action="store_true",
                   help="smoke test, the numbers mean nothing: 1 'cold' process (numba's default "
                        "cache, not an empty one) and 1 warm, 2 epochs, 1 repeat, 1 import "
                        "profile, no peers")
    p.add_argument("--out", default="core", help="results name or .json path (default core)")
    args = p.parse_args(argv)
    if args.quick:
        args.cold_runs, args.warm_runs, args.epochs, args.repeats = 1, 1, 2, 1
        args.import_runs, args.no_peers = 1, True

    t_start = time.perf_counter()
    load_before = loadavg()
    res: dict = {"benchmark": "core",
                 "config": dict(quick=args.quick, cold_runs=args.cold_runs,
                                warm_runs=args.warm_runs, epochs=args.epochs,
                                repeats=args.repeats, peers=not args.no_peers,
                                hidden=HIDDEN, batch=BATCH, lr=LR, dtype="float32")}
    with temp_dir() as work:
        cache = None
        if args.cold_runs > 0:
            log(f"1. cold compile ({args.cold_runs} fresh processes, empty cache each)")
            res["cold_compile"], cache = cold_compile(work, args.cold_runs, fresh=not args.quick)
        if cache is None and not args.quick:  # populate a cache for the warm runs (not recorded)
            cache = os.path.join(work, "cache")
            os.makedirs(cache)
            log("   populating a numba cache")
            first_fit_run(cache)
        if args.warm_runs > 0:
            log(f"2. warm first fit ({args.warm_runs} fresh processes, populated cache)")
            res["warm_first_fit"] = warm_first_fit(cache, args.warm_runs)
            log("   import breakdown (-X importtime)")
            res["warm_first_fit"]["import_breakdown"] = import_breakdown(cache,
                                                                         args.import_runs)
        log("4. NRT allocations")
        res["nrt"] = nrt_allocations(cache)
        # This process imports nnjit only now, and loads the compiled code from the same cache.
        if cache is not None:  # (--quick: numba's default cache, as the children used)
            os.environ["NUMBA_CACHE_DIR"] = cache
        for k in ("NUMBA_NRT_STATS", "NUMBA_DISABLE_JIT"):
            os.environ.pop(k, None)
        log(f"3. steady state ({args.repeats} repeats x {args.epochs} epochs, alternating)")
        res["steady_state"], blas = steady_state(args.epochs, args.repeats, not args.no_peers)
    versions = package_versions("scikit-learn", "torch", "threadpoolctl", "scipy", "pandas")
    res["environment"] = environment_info(loadavg_before=load_before, loadavg_after=loadavg(),
                                          blas_threads=blas, versions=versions)
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    return finish(res, args.out, _warnings, print_report)


if __name__ == "__main__":
    main()
