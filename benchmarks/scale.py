"""Scale benchmark: a matmul-bound MLP against the machine's 1-thread GEMM peak, and batch size.

Run from the repository root::

    python -m benchmarks.scale            # full run (about 1 minute): tables + results/scale.json
    python -m benchmarks.scale --quick    # tiny sizes, 1 repeat, no PyTorch (smoke test)

1. GEMM peak: float32 ``1024^3`` matrix products with BLAS pinned to 1 thread (numba's ``np.dot``,
   the call nnjit's dense kernels make; NumPy's ``matmul``; SciPy's ``sgemm``), best of several,
   and the same products at the layer shapes of one training step of the MLP below, in the
   layouts nnjit uses ("attainable at these shapes").
2. ``Linear(784, 256) - ReLU - Linear(256, 256) - ReLU - Linear(256, 10)``, cross-entropy, Adam
   lr 0.001, batch 128, 10,000 samples: synthetic (standard normal X, random labels) and
   Fashion-MNIST (the first 10,000 training images / 255, from ``../shared/data``) when present.
   nnjit and PyTorch (1 thread) alternate; each run is a fresh model trained for one warm-up
   epoch plus ``--epochs`` timed epochs. GFLOP/s counts 3x the forward matmul FLOPs.
3. Digits ``64-64-10`` at batch sizes 16, 64 and 256: time per epoch and per sample.

See ``benchmarks/README.md`` ("benchmarks.scale") for every column.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import time

import numpy as np

from benchmarks.peers import torch_train_epoch
from benchmarks._common import (
    Stopwatch,
    alternate,
    blas_info,
    environment_info,
    finish,
    fmt_num,
    fmt_ratio,
    fmt_time,
    import_torch_single_thread,
    load_rows,
    load_warning,
    loadavg,
    mlp_forward_flops,
    out_path,
    package_versions,
    print_table,
    ratio,
    revision_rows,
    shared_data_path,
    summarize,
)

SIZES = (784, 256, 256, 10)
BATCH = 128
N_SAMPLES = 10_000
LR = 0.001
DIGITS_SIZES = (64, 64, 10)
SWEEP_BATCHES = (16, 64, 256)
#: Target of issue 3: the 784-256-256-10 epoch at >= 80% of the 1-thread GEMM peak (3x fwd).
TARGET_FRACTION = 0.80


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- 1. GEMM -------------------------------------------------------------------------------------
_KERNELS = None


def _kernels():
    """numba loops around ``np.dot`` in the three layouts of nnjit's dense kernels."""
    global _KERNELS
    if _KERNELS is None:
        import numba

        @numba.njit(nogil=True)
        def dot_nt(a, b, out, reps):  # out (m, n) = a (m, k) @ b (n, k).T   (dense forward)
            for _ in range(reps):
                np.dot(a, b.T, out)

        @numba.njit(nogil=True)
        def dot_tn(a, b, out, reps):  # out (m, n) = a (k, m).T @ b (k, n)   (weight gradient)
            for _ in range(reps):
                np.dot(a.T, b, out)

        @numba.njit(nogil=True)
        def dot_nn(a, b, out, reps):  # out (m, n) = a (m, k) @ b (k, n)     (input gradient)
            for _ in range(reps):
                np.dot(a, b, out)

        _KERNELS = {"nt": dot_nt, "tn": dot_tn, "nn": dot_nn}
    return _KERNELS


def _operands(kind: str, m: int, k: int, n: int, rng):
    shape_a = {"nt": (m, k), "tn": (k, m), "nn": (m, k)}[kind]
    shape_b = {"nt": (n, k), "tn": (k, n), "nn": (k, n)}[kind]
    a = rng.standard_normal(shape_a, dtype=np.float32)
    b = rng.standard_normal(shape_b, dtype=np.float32)
    return a, b, np.empty((m, n), dtype=np.float32)


def _best_seconds(call, trials: int, min_trial_s: float) -> float:
    """Best seconds per repetition of ``call(reps)`` over ``trials`` trials of >= min_trial_s."""
    call(1)  # warm caches (and compile)
    t0 = time.perf_counter()
    call(1)
    one = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, int(math.ceil(min_trial_s / one)))
    best = math.inf
    for _ in range(trials):
        t0 = time.perf_counter()
        call(reps)
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def gemm_peak(size: int, trials: int, min_trial_s: float, torch=None) -> dict:
    """``size^3`` float32 GEMM, 1 thread, by several routes; GFLOP/s of each (best of trials)."""
    from scipy.linalg import blas as sblas

    rng = np.random.default_rng(0)
    flops = 2.0 * size ** 3
    a, b, c = _operands("nn", size, size, size, rng)
    af, bf, cf = np.asfortranarray(a), np.asfortranarray(b), np.asfortranarray(c)
    dot_nn = _kernels()["nn"]

    def numpy_call(reps):
        for _ in range(reps):
            np.matmul(a, b, out=c)

    def scipy_call(reps):
        for _ in range(reps):
            sblas.sgemm(1.0, af, bf, c=cf, overwrite_c=1)

    routes = {"numba np.dot (nnjit's call)": lambda reps: dot_nn(a, b, c, reps),
              "numpy matmul": numpy_call, "scipy sgemm": scipy_call}
    out = {name: flops / _best_seconds(fn, trials, min_trial_s) / 1e9
           for name, fn in routes.items()}
    ref = None
    if torch is not None:  # PyTorch's own BLAS (MKL), for reference only: not part of the peak
        ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))

        def torch_call(reps):
            for _ in range(reps):
                torch.mm(ta, tb, out=tc)

        ref = flops / _best_seconds(torch_call, trials, min_trial_s) / 1e9
    return {"size": size, "routes_gflops": out, "peak_gflops": max(out.values()),
            "best_route": max(out, key=out.get), "torch_mm_gflops": ref}


def step_gemms(sizes, batch: int) -> list[dict]:
    """The matrix products of one training step of an MLP, as nnjit's dense kernels call them.

    Per layer (in, out): forward ``x @ W.T`` (batch x in x out), weight gradient ``dy.T @ x``
    (out x batch x in), and, except for the first layer (nobody needs the input's gradient),
    input gradient ``dy @ W`` (batch x out x in). ``m x k x n`` = ``(m, k) @ (k, n)``.
    """
    rows = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        rows.append(dict(name=f"L{i} forward      x @ W.T", kind="nt", m=batch, k=fan_in,
                         n=fan_out))
        rows.append(dict(name=f"L{i} weight grad  dy.T @ x", kind="tn", m=fan_out, k=batch,
                         n=fan_in))
        if i > 1:
            rows.append(dict(name=f"L{i} input grad   dy @ W", kind="nn", m=batch, k=fan_out,
                             n=fan_in))
    return rows


def gemm_at_shapes(sizes, batch: int, trials: int, min_trial_s: float) -> dict:
    rng = np.random.default_rng(1)
    kernels = _kernels()
    rows = step_gemms(sizes, batch)
    for row in rows:
        a, b, c = _operands(row["kind"], row["m"], row["k"], row["n"], rng)
        fn = kernels[row["kind"]]
        s = _best_seconds(lambda reps, fn=fn, a=a, b=b, c=c: fn(a, b, c, reps), trials,
                          min_trial_s)
        row["flops"] = 2 * row["m"] * row["k"] * row["n"]
        row["seconds"] = s
        row["gflops"] = row["flops"] / s / 1e9
    step_s = sum(r["seconds"] for r in rows)
    step_flops = sum(r["flops"] for r in rows)
    nominal = 3 * batch * mlp_forward_flops(sizes)
    return {"sizes": list(sizes), "batch": batch, "gemms": rows, "step_seconds": step_s,
            "step_flops_executed": step_flops, "step_flops_nominal": nominal,
            "attainable_gflops": step_flops / step_s / 1e9,
            "attainable_gflops_nominal": nominal / step_s / 1e9}


def gemm_section(args, torch) -> dict:
    from nnjit.train.threads import blas_thread_counts, single_threaded_blas

    size = 128 if args.quick else 1024
    trials, min_s = (1, 0.002) if args.quick else (7, 0.1)
    with single_threaded_blas():
        threads = blas_thread_counts()
        peak = gemm_peak(size, trials, min_s, torch)
        shapes = gemm_at_shapes(SIZES, BATCH, 1 if args.quick else 5, min_s / 2)
    return {"peak_start": peak, "shapes": shapes, "blas_threads_during": threads,
            "blas_libraries": blas_info()}


def gemm_recheck(args, res: dict) -> None:
    """Measure the peak again at the end: the peak used is the best of start and end."""
    from nnjit.train.threads import single_threaded_blas

    g = res["gemm"]
    if args.quick:
        g["peak_end"] = None
    else:
        with single_threaded_blas():
            g["peak_end"] = gemm_peak(1024, 7, 0.1)
    candidates = [p["peak_gflops"] for p in (g["peak_start"], g["peak_end"]) if p]
    g["peak_gflops"] = max(candidates)


# -- 2 and 3. training ---------------------------------------------------------------------------
def _nnjit_runner(nn, X, y, sizes, batch: int, epochs: int, warmup: int = 1):
    def run(r: int) -> dict:
        nn.set_seed(r)
        layers = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
        trainer = nn.Trainer(nn.Sequential(*layers), nn.Adam(lr=LR), nn.CrossEntropyLoss())
        loader = nn.DataLoader(X, y, batch_size=batch)
        gc.collect()
        with Stopwatch() as sw:
            h = trainer.fit(loader, epochs=warmup + epochs, n_iter_no_change=None, verbose=False)
        times = [float(t) for t in h["seconds"].to_numpy()[warmup:]]
        return dict(epoch_s=statistics.median(times), epoch_times=times, wall_s=sw.seconds,
                    cpu_per_wall=sw.cpu / sw.seconds, first_epoch_s=float(h["seconds"].iloc[0]),
                    final_train_loss=float(h["train_loss"].iloc[-1]))
    return run


def _torch_runner(torch, X, y, sizes, batch: int, epochs: int, warmup: int = 1):
    Xt = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
    yt = torch.from_numpy(np.asarray(y, dtype=np.int64))

    def run(r: int) -> dict:
        torch.manual_seed(r)
        layers = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers += [torch.nn.Linear(a, b)] + ([torch.nn.ReLU()] if i < len(sizes) - 2 else [])
        model = torch.nn.Sequential(*layers)
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        loss_fn = torch.nn.CrossEntropyLoss()
        n = len(Xt)
        times, loss_sum = [], 0.0
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(warmup + epochs):
            te = time.perf_counter()
            loss_sum = torch_train_epoch(model, opt, loss_fn, Xt, yt, batch)
            times.append(time.perf_counter() - te)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        return dict(epoch_s=statistics.median(times[warmup:]), epoch_times=times[warmup:],
                    wall_s=wall, cpu_per_wall=cpu / wall, first_epoch_s=times[0],
                    final_train_loss=loss_sum / n)
    return run


def _summarize_runs(outs: list[dict]) -> dict:
    return {k: summarize(o[k] for o in outs)
            for k in ("epoch_s", "wall_s", "cpu_per_wall", "first_epoch_s", "final_train_loss")} | {
        "runs": outs}


def load_datasets(n: int, quick: bool) -> tuple[dict, dict]:
    rng = np.random.default_rng(0)
    data = {"synthetic": (rng.standard_normal((n, SIZES[0]), dtype=np.float32),
                          rng.integers(0, SIZES[-1], n).astype(np.int64))}
    skipped = {}
    path = shared_data_path("fashion_mnist.npz")
    if path is None:
        skipped["fashion_mnist"] = "skipped: fashion_mnist.npz not found in ../shared/data"
    else:
        with np.load(path) as f:
            X = f["x_train"][:n].reshape(n, -1).astype(np.float32) / np.float32(255.0)
            y = f["y_train"][:n].astype(np.int64)
        data["fashion_mnist"] = (np.ascontiguousarray(X), y)
    return data, skipped


def scale_section(args, nn, torch, torch_skip) -> dict:
    n = args.samples
    data, skipped = load_datasets(n, args.quick)
    fwd = mlp_forward_flops(SIZES)
    out = {"sizes": list(SIZES), "batch": BATCH, "n_samples": n, "epochs": args.epochs,
           "warmup_epochs": 1, "repeats": args.repeats, "steps_per_epoch": -(-n // BATCH),
           "forward_flops_per_sample": fwd, "nominal_flops_per_epoch": 3 * fwd * n,
           "skipped": dict(skipped), "datasets": {}}
    if torch is None:
        out["skipped"]["PyTorch"] = torch_skip
    for name, (X, y) in data.items():
        contenders = {"nnjit": _nnjit_runner(nn, X, y, SIZES, BATCH, args.epochs)}
        if torch is not None:
            contenders["PyTorch"] = _torch_runner(torch, X, y, SIZES, BATCH, args.epochs)
        log(f"2. {name}: {n} samples, {args.repeats} repeats x (1 + {args.epochs}) epochs, "
            f"alternating {' / '.join(contenders)}")
        raw = alternate(contenders, args.repeats,
                        lambda c, r, o: log(f"   repeat {r + 1} {c}: "
                                            f"{fmt_time(o['epoch_s'], 'ms')}/epoch"))
        out["datasets"][name] = {c: _summarize_runs(v) for c, v in raw.items()}
    return out


def batch_sweep(args, nn, torch) -> dict:
    X, y = nn.datasets.load_digits()
    X_train, _, y_train, _ = nn.datasets.train_test_split(X, y, 0.2, seed=0)
    X_train = nn.datasets.standardize(X_train)
    n = len(X_train)
    epochs = 2 if args.quick else args.sweep_epochs
    contenders = {}
    for b in SWEEP_BATCHES:
        contenders[("nnjit", b)] = _nnjit_runner(nn, X_train, y_train, DIGITS_SIZES, b, epochs)
        if torch is not None:
            contenders[("PyTorch", b)] = _torch_runner(torch, X_train, y_train, DIGITS_SIZES, b,
                                                       epochs)
    log(f"3. Digits batch sweep: {args.repeats} repeats x (1 + {epochs}) epochs, alternating")
    raw = alternate(contenders, args.repeats)
    fwd = mlp_forward_flops(DIGITS_SIZES)
    rows = []
    for (name, b), outs in raw.items():
        s = _summarize_runs(outs)
        med = s["epoch_s"]["median"]
        rows.append({"contender": name, "batch": b, "steps_per_epoch": -(-n // b),
                     "epoch_s": s["epoch_s"], "per_sample_s": med / n,
                     "per_step_s": med / -(-n // b), "gflops": 3 * fwd * n / med / 1e9,
                     "final_train_loss": s["final_train_loss"], "runs": outs})
    for r in rows:  # cost per sample relative to the same contender's largest batch
        big = next(o for o in rows if o["contender"] == r["contender"]
                   and o["batch"] == max(SWEEP_BATCHES))
        r["per_sample_vs_largest_batch"] = ratio(r["per_sample_s"], big["per_sample_s"])
    return {"sizes": list(DIGITS_SIZES), "n_train": n, "epochs": epochs, "warmup_epochs": 1,
            "repeats": args.repeats, "forward_flops_per_sample": fwd, "rows": rows}


def blas_inside_fit(nn) -> list:
    from nnjit.train.threads import blas_thread_counts

    X, y = nn.datasets.load_digits()
    seen = []
    nn.Trainer(nn.Sequential(nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 10))).fit(
        nn.DataLoader(X[:256], y[:256], batch_size=64), epochs=2, verbose=False,
        callbacks=[lambda h: seen.append(blas_thread_counts())])
    return seen


# -- derived numbers, report ---------------------------------------------------------------------
def derive(res: dict) -> None:
    """GFLOP/s, fraction of the GEMM peak and of the GEMM-only epoch for every contender."""
    peak = res["gemm"]["peak_gflops"]
    sh = res["gemm"]["shapes"]
    s = res["scale"]
    n = s["n_samples"]
    gemm_epoch = sh["step_seconds"] * n / BATCH  # bare GEMMs of one epoch at measured speeds
    s["gemm_only_epoch_s"] = gemm_epoch
    for name, per in s["datasets"].items():
        base = per["nnjit"]["epoch_s"]["median"]
        for c, e in per.items():
            med = e["epoch_s"]["median"]
            e["gflops"] = s["nominal_flops_per_epoch"] / med / 1e9
            e["gflops_executed"] = sh["step_flops_executed"] * n / BATCH / med / 1e9
            e["fraction_of_peak"] = e["gflops"] / peak
            e["gemm_only_fraction"] = gemm_epoch / med
            e["vs_nnjit"] = ratio(med, base)


def print_report(res: dict) -> None:
    env = res["environment"]
    g = res["gemm"]
    print(f"nnjit scale benchmark ({env['cpu_model']}, {env['cpu_affinity']} usable cores, "
          f"BLAS 1 thread)\n", flush=True)
    rows = []
    for label, p in (("start", g["peak_start"]), ("end", g.get("peak_end"))):
        if not p:
            continue
        for route, v in p["routes_gflops"].items():
            rows.append([f"{p['size']}^3 {route} ({label})", fmt_num(v, 1)])
        if p.get("torch_mm_gflops"):
            rows.append([f"{p['size']}^3 torch.mm, MKL, reference only ({label})",
                         fmt_num(p["torch_mm_gflops"], 1)])
    rows.append(["peak used below (best OpenBLAS route, start/end)",
                 fmt_num(g["peak_gflops"], 1)])
    print_table(["float32 GEMM, 1 thread, best of trials", "GFLOP/s"], rows,
                f"1. GEMM peak (BLAS threads while measuring: {g['blas_threads_during']})")
    sh = g["shapes"]
    rows = [[r["name"], f"{r['m']}x{r['k']}x{r['n']}", fmt_time(r["seconds"], "µs"),
             fmt_num(r["gflops"], 1), f"{r['gflops'] / g['peak_gflops']:.0%}"]
            for r in sh["gemms"]]
    rows.append(["one step, all of the above", "", fmt_time(sh["step_seconds"], "µs"),
                 fmt_num(sh["attainable_gflops"], 1),
                 f"{sh['attainable_gflops'] / g['peak_gflops']:.0%}"])
    rows.append(["  same time, counted as 3x forward", "", "",
                 fmt_num(sh["attainable_gflops_nominal"], 1),
                 f"{sh['attainable_gflops_nominal'] / g['peak_gflops']:.0%}"])
    print_table(["GEMM of one step (numba np.dot, nnjit's layouts)", "m x k x n", "time",
                 "GFLOP/s", "of peak"], rows,
                f"   Attainable at these shapes: {'-'.join(map(str, SIZES))}, batch {BATCH}")

    s = res["scale"]
    rows = []
    for name, per in s["datasets"].items():
        for c, e in per.items():
            ep = e["epoch_s"]
            rows.append([name, c, fmt_time(ep["median"], "ms"), fmt_time(ep["min"], "ms"),
                         fmt_time(ep["max"], "ms"), fmt_num(e["gflops"], 1),
                         fmt_num(e["gflops_executed"], 1),
                         f"{e['fraction_of_peak']:.0%}", f"{e['gemm_only_fraction']:.0%}",
                         fmt_ratio(e["vs_nnjit"]), fmt_num(e["cpu_per_wall"]["median"], 2),
                         fmt_num(e["final_train_loss"]["median"])])
    for name, msg in s["skipped"].items():
        rows.append([name, msg])
    print_table(["data", "contender", "epoch", "min", "max", "GFLOP/s", "executed", "of peak",
                 "GEMM-only", "vs nnjit", "CPU/wall", "train loss"], rows,
                f"2. {'-'.join(map(str, SIZES))}, batch {BATCH}, {s['n_samples']} samples, "
                f"{s['steps_per_epoch']} steps/epoch: median over {s['repeats']} repeats of the "
                f"median of {s['epochs']} epochs after 1 warm-up (GFLOP/s = 3x forward = "
                f"{s['nominal_flops_per_epoch'] / 1e9:.2f} GFLOP/epoch; GEMM-only epoch "
                f"{fmt_time(s['gemm_only_epoch_s'], 'ms')})")

    b = res["batch_sweep"]
    rows = [[r["contender"], r["batch"], r["steps_per_epoch"],
             fmt_time(r["epoch_s"]["median"], "ms"), fmt_time(r["epoch_s"]["min"], "ms"),
             fmt_time(r["epoch_s"]["max"], "ms"), fmt_time(r["per_step_s"], "µs"),
             fmt_time(r["per_sample_s"], "µs"), fmt_ratio(r["per_sample_vs_largest_batch"]),
             fmt_num(r["gflops"], 2)]
            for r in sorted(b["rows"], key=lambda r: (r["contender"] != "nnjit", r["batch"]))]
    print_table(["contender", "batch", "steps", "epoch", "min", "max", "per step",
                 "per sample", "vs batch 256", "GFLOP/s"], rows,
                f"3. Digits {'-'.join(map(str, b['sizes']))}, {b['n_train']} train rows: median "
                f"over {b['repeats']} repeats of the median of {b['epochs']} epochs after 1 "
                f"warm-up")

    v = env["versions"]
    rows = [["python / numba / numpy", f"{env['python']} / {env['numba']} / {env['numpy']}"],
            ["torch / scipy", f"{v.get('torch')} / {v.get('scipy')}"],
            ["PyTorch threads (intra / inter-op)", str(env.get("torch_threads"))],
            ["CPU", f"{env['cpu_model']} ({env['cpu_count']} logical, "
                    f"{env['cpu_affinity']} usable)"],
            *load_rows(env),
            ["BLAS threads inside nnjit fit", str(env.get("blas_inside_fit"))],
            ["BLAS libraries",
             ", ".join(f"{x.get('internal_api')} {x.get('version')} ({x.get('architecture')})"
                       for x in g["blas_libraries"]) or "-"],
            ["OPENBLAS_CORETYPE", str(env.get("openblas_coretype"))],
            *revision_rows(res)]
    print_table(["item", "value"], rows, "Environment", align="ll")
    for w in res.get("warnings", []):
        print(f"WARNING: {w}", flush=True)


def _warnings(res: dict) -> list[str]:
    out = []
    env = res["environment"]
    busy = load_warning(env)
    if busy:
        out.append(busy)
    if any(set(c) != {1} for c in env.get("blas_inside_fit") or []):
        out.append(f"BLAS was not single-threaded inside fit: {env['blas_inside_fit']}")
    if any(set(c) != {1} for c in [res["gemm"]["blas_threads_during"]]):
        out.append(f"BLAS was not single-threaded while measuring the GEMM peak: "
                   f"{res['gemm']['blas_threads_during']}")
    if res["config"]["quick"]:
        out.append("--quick: tiny sizes and 1 repeat; the numbers mean nothing")
        return out
    for name, per in res["scale"]["datasets"].items():
        for c, e in per.items():
            share = e["cpu_per_wall"]["min"]
            if share is not None and share < 0.9:
                out.append(f"{c} on {name} got only {share:.0%} of a CPU in some run (CPU time / "
                           "wall time): other processes competed for the cores")
    for name, per in res["scale"]["datasets"].items():
        f = per["nnjit"]["fraction_of_peak"]
        if f < TARGET_FRACTION:
            out.append(f"target missed: nnjit on {name} at {f:.0%} of the 1-thread GEMM peak "
                       f"(target {TARGET_FRACTION:.0%})")
    return out


# -- main ----------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, 1 repeat, no PyTorch: checks that the benchmark runs "
                        "(smoke test)")
    p.add_argument("--epochs", type=int, default=None,
                   help="timed epochs per run after 1 warm-up epoch (default 6)")
    p.add_argument("--repeats", type=int, default=None, help="repeats per contender (default 5)")
    p.add_argument("--samples", type=int, default=None, help="samples (default 10000)")
    p.add_argument("--sweep-epochs", type=int, default=20,
                   help="timed epochs per Digits batch-sweep run (default 20)")
    p.add_argument("--no-peers", action="store_true", help="skip PyTorch")
    p.add_argument("--out", default="scale",
                   help="results name, .json path or directory (default scale)")
    args = p.parse_args(argv)
    args.epochs = args.epochs or (1 if args.quick else 6)
    args.repeats = args.repeats or (1 if args.quick else 5)
    args.samples = args.samples or (512 if args.quick else N_SAMPLES)

    t_start = time.perf_counter()
    load_before = loadavg()
    import nnjit as nn

    if args.quick:  # a smoke test of nnjit's side: PyTorch's import alone costs ~2 s
        args.no_peers = True
    torch, torch_skip = (None, f"skipped: {'--quick' if args.quick else '--no-peers'}") \
        if args.no_peers else import_torch_single_thread()
    if torch_skip:
        log(f"PyTorch: {torch_skip}")
    res: dict = {"benchmark": "scale",
                 "config": dict(quick=args.quick, epochs=args.epochs, repeats=args.repeats,
                                samples=args.samples, sweep_epochs=args.sweep_epochs,
                                peers=not args.no_peers, sizes=list(SIZES), batch=BATCH, lr=LR,
                                sweep_batches=list(SWEEP_BATCHES), dtype="float32")}
    log("1. GEMM peak and layer shapes (1 thread)")
    res["gemm"] = gemm_section(args, torch)

    # Warm-up: load nnjit's compiled code from the cache (or compile it), first-call costs.
    rng = np.random.default_rng(0)
    Xw = rng.standard_normal((2 * BATCH, SIZES[0]), dtype=np.float32)
    yw = rng.integers(0, 10, 2 * BATCH)
    _nnjit_runner(nn, Xw, yw, SIZES, BATCH, 1)(0)
    if torch is not None:
        _torch_runner(torch, Xw, yw, SIZES, BATCH, 1)(0)

    res["scale"] = scale_section(args, nn, torch, torch_skip)
    res["batch_sweep"] = batch_sweep(args, nn, torch)
    log("   GEMM peak again")
    gemm_recheck(args, res)
    derive(res)
    versions = package_versions("torch", "scipy", "threadpoolctl", "scikit-learn")
    torch_threads = None if torch is None else [torch.get_num_threads(),
                                                torch.get_num_interop_threads()]
    res["environment"] = environment_info(loadavg_before=load_before, loadavg_after=loadavg(),
                                          blas_inside_fit=blas_inside_fit(nn),
                                          torch_threads=torch_threads, versions=versions,
                                          openblas_coretype=os.environ.get("OPENBLAS_CORETYPE"))
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    return finish(res, out_path(args.out, "scale"), _warnings, print_report)


if __name__ == "__main__":
    main()
