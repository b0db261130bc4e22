"""The seed table: nnjit against scikit-learn's MLPClassifier, PyTorch eager and JAX.

Run from the repository root::

    python -m benchmarks.seed_table            # full run (about 3-5 minutes on 2 cores)
    python -m benchmarks.seed_table --quick    # smoke run: Iris only, 1 repeat, 5 epochs
    python -m benchmarks.seed_table --help

The inspiring engine's comparison with scikit-learn, with its exact protocol (issue 3, item 1):
Iris, Digits (scikit-learn's loaders) and Olivetti faces; seeds 42 / 43 / 44 (one per data set,
as the original, and all three on each); stratified 80/20 split; validation fraction
``max(0.1, (n_classes + 5) / n_train)`` split stratified from the training part; StandardScaler
fit on the training part; one hidden ReLU layer of 16 / 128 / 128 units, batch 16 / 32 / 32,
Adam lr 0.01 / 0.001 / 0.001, at most 100 epochs, tol 1e-4, n_iter_no_change 10, L2 1e-4.

Contenders, alternated A B C ... in every repeat, each a freshly built model/estimator:

* scikit-learn ``MLPClassifier(early_stopping=True, validation_fraction=f)`` (validation accuracy,
  its own L2 ``alpha``; BLAS pinned to one thread and checked);
* nnjit, own rule: ``monitor='val_loss'``, ``L2Regularizer`` (the original engine's rule);
* nnjit, scikit-learn's rule: ``monitor='val_accuracy'``, ``SklearnL2Regularizer``;
* nnjit, same work: exactly as many epochs as scikit-learn ran (validated every epoch);
* PyTorch eager and JAX (whole fit in one jitted call) with the validation-loss rule
  (:mod:`benchmarks.peers`).

Then Digits 64-64-10 at batch 16, time per epoch (nnjit vs JAX vs PyTorch eager), and a table of
every target in the issue with PASS / MISS. The whole process is pinned to one CPU (XLA ignores its
thread flags); every table shows CPU time / wall time. See ``benchmarks/README.md`` for every
column.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

from benchmarks._common import (
    NumbaCompileProfiler,
    RESULTS_DIR,
    Stopwatch,
    alternate,
    environment_info,
    finish,
    fmt_num,
    fmt_ratio,
    fmt_time,
    load_warning,
    loadavg,
    package_versions,
    pin_to_one_cpu,
    print_table,
    ratio,
    revision_rows,
    shared_data_path,
    summarize,
    thread_affinities,
)

#: Per data set: hidden units, batch size, Adam learning rate, and the original's seed.
DATASETS = {
    "Iris": dict(hidden=16, batch=16, lr=0.01, seed=42),
    "Digits": dict(hidden=128, batch=32, lr=0.001, seed=43),
    "Olivetti": dict(hidden=128, batch=32, lr=0.001, seed=44),
}
SEEDS = (42, 43, 44)
MAX_EPOCHS, TOL, PATIENCE, L2 = 100, 1e-4, 10, 1e-4
TEST_SIZE = 0.2

# Contender names (the order of the alternation).
SK = "scikit-learn"
OWN = "nnjit, own rule"
SKR = "nnjit, sklearn's rule"
SAME = "nnjit, same work"
TORCH = "PyTorch eager"
JAX = "JAX whole fit"
LABELS = {
    SK: "scikit-learn (val accuracy)",
    OWN: "nnjit, own rule (val loss)",
    SKR: "nnjit, sklearn's rule (val acc)",
    SAME: "nnjit, same work",
    TORCH: "PyTorch eager (val loss)",
    JAX: "JAX whole fit (val loss)",
}

# Digits 64-64-10 per-epoch comparison (the targets table's row; the core benchmark's workload).
D64 = dict(hidden=64, batch=16, lr=0.001, seed=42)

# The issues' targets (Digits and Olivetti: issue 22's; the own rule's 4.3x on Olivetti is the
# inspiring engine's claim).
SAME_WORK_TARGET = {"Iris": 50.0, "Digits": 15.0, "Olivetti": 5.0}
OWN_RULE_TARGET = {"Iris": 16.4, "Digits": 6.0, "Olivetti": 4.3}
OLIVETTI_ACC_POINTS = 1.5


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- data ----------------------------------------------------------------------------------------
def load_dataset(name: str):
    """(X, y) as a user gets them: scikit-learn's loaders (float64) for Iris and Digits, the
    shared Olivetti archive (float32, the arrays of ``fetch_olivetti_faces``) otherwise."""
    import numpy as np

    if name == "Iris":
        from sklearn.datasets import load_iris
        return load_iris(return_X_y=True)
    if name == "Digits":
        from sklearn.datasets import load_digits
        return load_digits(return_X_y=True)
    if name == "Olivetti":
        path = shared_data_path("olivetti_faces.npz")
        if path is not None:
            with np.load(path, allow_pickle=False) as d:
                return d["data"], d["target"]
        import nnjit as nn  # the same arrays, bundled with nnjit
        X, y = nn.datasets.load_olivetti_faces()
        return X, y
    raise ValueError(f"unknown data set {name!r}; valid: {', '.join(DATASETS)}")


def validation_fraction(n_classes: int, n_train: int) -> float:
    return max(0.1, (n_classes + 5) / n_train)


def prepare(name: str, seed: int) -> dict:
    """Split, scale and cast one (data set, seed) as the protocol says."""
    import numpy as np
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_dataset(name)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=TEST_SIZE, stratify=y, random_state=seed)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    n_classes = len(np.unique(y))
    frac = validation_fraction(n_classes, len(X_train))
    # nnjit, PyTorch and JAX get the same stratified validation part; scikit-learn gets the whole
    # training part and splits the same fraction off itself (stratified, with its random_state).
    X_fit, X_val, y_fit, y_val = train_test_split(
        X_train, y_train, test_size=frac, stratify=y_train, random_state=seed)
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    return dict(name=name, seed=seed, n_features=X.shape[1], n_classes=n_classes,
                val_fraction=frac, sklearn_dtype=str(X_train.dtype),
                X_train=X_train, y_train=y_train, X_test_sk=X_test,
                X_fit=f32(X_fit), y_fit=i64(y_fit), X_val=f32(X_val), y_val=i64(y_val),
                X_test=f32(X_test), y_test=i64(y_test),
                sizes=dict(train=len(X_train), fit=len(X_fit), val=len(X_val), test=len(X_test)))


# -- contenders ----------------------------------------------------------------------------------
class Contenders:
    """Builds the timed fit of every contender for one (data set, seed)."""

    def __init__(self, d: dict, cfg: dict, max_epochs: int, peers: dict):
        self.d, self.cfg, self.max_epochs, self.peers = d, cfg, max_epochs, peers
        self.sk_epochs = None  # set by the warm-up run of scikit-learn
        self.jax_fit = None
        self.jax_args = None

    # scikit-learn
    def sklearn(self, r: int = 0) -> dict:
        import numpy as np
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPClassifier

        d, c = self.d, self.cfg
        clf = MLPClassifier(hidden_layer_sizes=(c["hidden"],), activation="relu", solver="adam",
                            alpha=L2, batch_size=c["batch"], learning_rate_init=c["lr"],
                            max_iter=self.max_epochs, tol=TOL, n_iter_no_change=PATIENCE,
                            early_stopping=True, validation_fraction=d["val_fraction"],
                            shuffle=True, random_state=d["seed"])
        gc.collect()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            with Stopwatch() as sw:
                clf.fit(d["X_train"], d["y_train"])
        acc = float(np.mean(clf.predict(d["X_test_sk"]) == d["y_test"]))
        return dict(fit_s=sw.seconds, cpu_s=sw.cpu, epochs=int(clf.n_iter_), accuracy=acc,
                    per_epoch_s=sw.seconds / clf.n_iter_,
                    best_epoch=int(np.argmax(clf.validation_scores_)) + 1)

    # nnjit
    def nnjit(self, mode: str, r: int = 0) -> dict:
        import numpy as np

        import nnjit as nn

        d, c = self.d, self.cfg
        with Stopwatch() as build:
            nn.set_seed(d["seed"])
            model = nn.Sequential(nn.Linear(d["n_features"], c["hidden"]), nn.ReLU(),
                                  nn.Linear(c["hidden"], d["n_classes"]))
            reg = nn.L2Regularizer(L2) if mode == OWN else nn.SklearnL2Regularizer(L2)
            trainer = nn.Trainer(model, nn.Adam(lr=c["lr"]), nn.CrossEntropyLoss(),
                                 regularizer=reg)
            loader = nn.DataLoader(d["X_fit"], d["y_fit"], batch_size=c["batch"])
        kw = dict(epochs=self.max_epochs, n_iter_no_change=PATIENCE,
                  monitor="val_loss" if mode == OWN else "val_accuracy")
        if mode == SAME:
            kw.update(epochs=self.sk_epochs, n_iter_no_change=None)
        val = (d["X_val"], d["y_val"])
        gc.collect()
        with Stopwatch() as sw:
            h = trainer.fit(loader, val=val, tol=TOL, verbose=False, **kw)
        if mode == SAME:
            assert len(h) == self.sk_epochs, (len(h), self.sk_epochs)
        compiled = float(h["seconds"].sum())
        acc = float(np.mean(trainer.predict(d["X_test"]) == d["y_test"]))
        return dict(fit_s=sw.seconds, cpu_s=sw.cpu, build_s=build.seconds, epochs=len(h),
                    accuracy=acc,
                    per_epoch_s=sw.seconds / len(h), compiled_s=compiled,
                    epoch_compiled_s=float(h["seconds"].median()),
                    outside_s=sw.seconds - compiled, best_epoch=h.attrs.get("best_epoch"))

    # PyTorch eager
    def torch(self, r: int = 0) -> dict:
        import numpy as np

        from benchmarks import peers

        d, c = self.d, self.cfg
        t = self.peers["torch_data"]
        gc.collect()
        with Stopwatch() as sw:
            out = peers.torch_fit((d["n_features"], c["hidden"], d["n_classes"]), *t["fit"],
                                  *t["val"], batch_size=c["batch"], lr=c["lr"], weight_decay=L2,
                                  epochs=self.max_epochs, tol=TOL, n_iter_no_change=PATIENCE,
                                  seed=d["seed"])
        acc = float(np.mean(peers.torch_predict(out["model"], t["test"]) == d["y_test"]))
        return dict(fit_s=sw.seconds, cpu_s=sw.cpu, epochs=out["epochs"], accuracy=acc,
                    per_epoch_s=sw.seconds / out["epochs"],
                    epoch_timer_s=statistics.median(out["epoch_s"]),
                    best_epoch=out["best_epoch"])

    # JAX
    def jax_compile(self) -> float:
        from benchmarks import peers

        d, c = self.d, self.cfg
        self.jax_fit = peers.JaxFit((d["n_features"], c["hidden"], d["n_classes"]),
                                    len(d["X_fit"]), len(d["X_val"]), batch_size=c["batch"],
                                    lr=c["lr"], weight_decay=L2, epochs=self.max_epochs, tol=TOL,
                                    n_iter_no_change=PATIENCE)
        seconds = self.jax_fit.compile(d["X_fit"], d["y_fit"], d["X_val"], d["y_val"], d["seed"])
        self.jax_args = self.jax_fit.device_args(d["X_fit"], d["y_fit"], d["X_val"], d["y_val"],
                                                 d["seed"])
        return seconds

    def jax(self, r: int = 0) -> dict:
        import numpy as np

        gc.collect()
        with Stopwatch() as sw:
            out = self.jax_fit.run(self.jax_args)
        acc = float(np.mean(self.jax_fit.predict(out["params"], self.d["X_test"])
                            == self.d["y_test"]))
        return dict(fit_s=sw.seconds, cpu_s=sw.cpu, epochs=out["epochs"], accuracy=acc,
                    per_epoch_s=sw.seconds / out["epochs"])

    def table(self, have_torch: bool, have_jax: bool) -> dict:
        fns = {SK: self.sklearn, OWN: lambda r: self.nnjit(OWN, r),
               SKR: lambda r: self.nnjit(SKR, r), SAME: lambda r: self.nnjit(SAME, r)}
        if have_torch:
            fns[TORCH] = self.torch
        if have_jax:
            fns[JAX] = self.jax
        return fns


def jax_key(d: dict, cfg: dict, max_epochs: int) -> tuple:
    return (d["n_features"], cfg["hidden"], d["n_classes"], len(d["X_fit"]), len(d["X_val"]),
            cfg["batch"], cfg["lr"], max_epochs)


def run_seed_table(datasets, seeds, repeats: int, max_epochs: int, have: dict) -> dict:
    """Every (data set, seed): warm-ups, then ``repeats`` alternating rounds of all contenders."""
    import nnjit as nn  # noqa: F401  (imported before the profiler below is installed)

    from benchmarks import peers

    results, warmup = {}, {}
    jax_cache = {}
    first_nnjit = True
    for name in datasets:
        cfg = DATASETS[name]
        warm = warmup.setdefault(name, {})
        for seed in seeds:
            d = prepare(name, seed)
            peer_data = {}
            if have["torch"]:
                peer_data["torch_data"] = dict(fit=peers.torch_tensors(d["X_fit"], d["y_fit"]),
                                               val=peers.torch_tensors(d["X_val"], d["y_val"]),
                                               test=peers.torch_tensors(d["X_test"],
                                                                        d["y_test"])[0])
            c = Contenders(d, cfg, max_epochs, peer_data)
            log(f"{name} seed {seed}: {d['sizes']}, validation fraction {d['val_fraction']:.6g}")

            # Warm-ups (not recorded as repeats): scikit-learn's run also fixes the number of
            # epochs of the same-work mode (it is deterministic given random_state).
            sk0 = c.sklearn()
            c.sk_epochs = sk0["epochs"]
            if first_nnjit:
                with NumbaCompileProfiler() as prof:
                    w = c.nnjit(OWN)
                warm["nnjit_first_fit_in_process"] = dict(fit_s=w["fit_s"], **prof.summary(3))
                first_nnjit = False
            w = c.nnjit(OWN)
            warm.setdefault("nnjit_warmup_fit_s", []).append(w["fit_s"])
            for mode in (SKR, SAME):
                c.nnjit(mode)
            if have["torch"]:
                warm.setdefault("torch_first_fit_s", []).append(c.torch()["fit_s"])
            if have["jax"]:
                key = jax_key(d, cfg, max_epochs)
                if key in jax_cache:
                    c.jax_fit = jax_cache[key]
                    c.jax_args = c.jax_fit.device_args(d["X_fit"], d["y_fit"], d["X_val"],
                                                       d["y_val"], seed)
                else:
                    secs = c.jax_compile()
                    jax_cache[key] = c.jax_fit
                    warm.setdefault("jax_compile_s", []).append(secs)
                    log(f"  JAX compile {fmt_time(secs)}")
                warm.setdefault("jax_first_fit_s", []).append(c.jax()["fit_s"])

            def progress(who, r, out):
                log(f"  repeat {r + 1}/{repeats} {who}: {fmt_time(out['fit_s'])}, "
                    f"{out['epochs']} epochs, acc {out['accuracy']:.3f}")

            raw = alternate(c.table(have["torch"], have["jax"]), repeats, progress)
            results[f"{name}/{seed}"] = summarize_combo(d, cfg, raw, sk0)
    return {"combos": results, "warmup": warmup}


def summarize_combo(d: dict, cfg: dict, raw: dict, sk_warmup: dict) -> dict:
    entry = {"dataset": d["name"], "seed": d["seed"], "sizes": d["sizes"],
             "val_fraction": d["val_fraction"], "sklearn_dtype": d["sklearn_dtype"],
             "config": cfg, "contenders": {}}
    sk_fit = statistics.median(o["fit_s"] for o in raw[SK])
    own = raw.get(OWN)
    own_pe = statistics.median(o["per_epoch_s"] for o in own) if own else None
    own_fit = statistics.median(o["fit_s"] for o in own) if own else None
    for who, outs in raw.items():
        keys = sorted({k for o in outs for k in o if isinstance(o[k], (int, float))
                       and not isinstance(o[k], bool)})
        e = {k: summarize(o.get(k) for o in outs) for k in keys}
        fit = e["fit_s"]["median"]
        e["speedup_vs_sklearn"] = ratio(sk_fit, fit)  # sklearn time / contender time
        e["epochs_run"] = sorted({o["epochs"] for o in outs})
        e["cpu_per_wall"] = summarize(o["cpu_s"] / o["fit_s"] for o in outs)
        if who in (TORCH, JAX):
            e["time_vs_nnjit_own"] = ratio(fit, own_fit)
            e["per_epoch_vs_nnjit_own"] = ratio(e["per_epoch_s"]["median"], own_pe)
        entry["contenders"][who] = e
    entry["sklearn_epochs"] = sk_warmup["epochs"]
    return entry


# -- Digits 64-64-10, batch 16, per epoch --------------------------------------------------------
def run_digits64(epochs: int, repeats: int, have: dict) -> dict:
    """Time per epoch of a fixed number of epochs, no validation, no regularisation."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    import nnjit as nn

    from benchmarks import peers

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=TEST_SIZE, stratify=y,
                                              random_state=D64["seed"])
    sc = StandardScaler().fit(X_tr)
    X_tr = np.ascontiguousarray(sc.transform(X_tr), dtype=np.float32)
    X_te = np.ascontiguousarray(sc.transform(X_te), dtype=np.float32)
    y_tr, y_te = y_tr.astype(np.int64), y_te.astype(np.int64)
    sizes = (64, D64["hidden"], 10)
    seed, batch, lr = D64["seed"], D64["batch"], D64["lr"]

    def run_nnjit(r: int) -> dict:
        nn.set_seed(seed)
        trainer = nn.Trainer(nn.Sequential(nn.Linear(64, D64["hidden"]), nn.ReLU(),
                                           nn.Linear(D64["hidden"], 10)),
                             nn.Adam(lr=lr), nn.CrossEntropyLoss())
        loader = nn.DataLoader(X_tr, y_tr, batch_size=batch)
        gc.collect()
        with Stopwatch() as sw:
            h = trainer.fit(loader, epochs=epochs, n_iter_no_change=None, verbose=False)
        assert len(h) == epochs
        return dict(fit_s=sw.seconds, cpu_s=sw.cpu, per_epoch_s=sw.seconds / epochs,
                    epoch_timer_s=float(h["seconds"].median()),
                    accuracy=float(np.mean(trainer.predict(X_te) == y_te)))

    fns = {"nnjit": run_nnjit}
    extra = {}
    if have["jax"]:
        jf = peers.JaxFit(sizes, len(X_tr), 0, batch_size=batch, lr=lr, epochs=epochs)
        extra["jax_compile_s"] = jf.compile(X_tr, y_tr, seed=seed)
        args = jf.device_args(X_tr, y_tr, seed=seed)

        def run_jax(r: int) -> dict:
            gc.collect()
            with Stopwatch() as sw:
                out = jf.run(args)
            assert out["epochs"] == epochs
            return dict(fit_s=sw.seconds, cpu_s=sw.cpu, per_epoch_s=sw.seconds / epochs,
                        epoch_timer_s=None,
                        accuracy=float(np.mean(jf.predict(out["params"], X_te) == y_te)))

        fns["JAX whole fit"] = run_jax
    if have["torch"]:
        Xt, yt = peers.torch_tensors(X_tr, y_tr)
        Xtt = peers.torch_tensors(X_te, y_te)[0]

        def run_torch(r: int) -> dict:
            gc.collect()
            with Stopwatch() as sw:
                out = peers.torch_fit(sizes, Xt, yt, batch_size=batch, lr=lr, epochs=epochs,
                                      n_iter_no_change=None, seed=seed)
            return dict(fit_s=sw.seconds, cpu_s=sw.cpu, per_epoch_s=sw.seconds / epochs,
                        epoch_timer_s=statistics.median(out["epoch_s"]),
                        accuracy=float(np.mean(peers.torch_predict(out["model"], Xtt) == y_te)))

        fns["PyTorch eager"] = run_torch
    for fn in fns.values():  # warm-up
        fn(-1)
    raw = alternate(fns, repeats, lambda who, r, o: log(
        f"  repeat {r + 1}/{repeats} {who}: {fmt_time(o['per_epoch_s'])}/epoch"))
    out = {"epochs": epochs, "repeats": repeats, "n_train": len(X_tr), "batch": batch,
           "steps_per_epoch": -(-len(X_tr) // batch), "lr": lr, "sizes": sizes,
           "contenders": {}, **extra}
    base = statistics.median(o["per_epoch_s"] for o in raw["nnjit"])
    for who, outs in raw.items():
        e = {k: summarize(o[k] for o in outs)
             for k in ("fit_s", "cpu_s", "per_epoch_s", "epoch_timer_s", "accuracy")}
        e["cpu_per_wall"] = summarize(o["cpu_s"] / o["fit_s"] for o in outs)
        e["per_epoch_vs_nnjit"] = ratio(e["per_epoch_s"]["median"], base)
        out["contenders"][who] = e
    return out


# -- profile of nnjit's per-fit Python cost (optional) -------------------------------------------
def profile_fit(name: str, seed: int, mode: str, n: int, top: int = 12) -> dict:
    """cProfile of ``n`` same-work fits: where the time outside the compiled loop goes."""
    import cProfile
    import pstats

    cfg = DATASETS[name]
    d = prepare(name, seed)
    c = Contenders(d, cfg, MAX_EPOCHS, {})
    c.sk_epochs = c.sklearn()["epochs"]
    c.nnjit(mode)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        c.nnjit(mode)
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, func), (cc, nc, tt, ct, _) in stats.stats.items():
        rows.append([f"{Path(file).name}:{line}({func})", nc / n, tt / n, ct / n])
    rows.sort(key=lambda r: -r[3])
    return {"dataset": name, "seed": seed, "mode": mode, "fits": n,
            "top_cumulative": rows[:top],
            "top_self": sorted(rows, key=lambda r: -r[2])[:top]}


# -- targets -------------------------------------------------------------------------------------
def _geo(values):
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def per_dataset_summary(combos: dict) -> dict:
    """Mean accuracy / epochs and geometric-mean speed-up over the seeds of each data set."""
    out = {}
    for key, e in combos.items():
        ds = out.setdefault(e["dataset"], {})
        for who, c in e["contenders"].items():
            s = ds.setdefault(who, {"seeds": [], "accuracy": [], "epochs": [], "speedup": [],
                                    "fit_s": [], "per_epoch_s": []})
            s["seeds"].append(e["seed"])
            s["accuracy"].append(c["accuracy"]["median"])
            s["epochs"].append(c["epochs"]["median"])
            s["speedup"].append(c["speedup_vs_sklearn"])
            s["fit_s"].append(c["fit_s"]["median"])
            s["per_epoch_s"].append(c["per_epoch_s"]["median"])
    for ds in out.values():
        for s in ds.values():
            s["mean_accuracy"] = statistics.fmean(s["accuracy"])
            s["mean_epochs"] = statistics.fmean(s["epochs"])
            s["geomean_speedup"] = _geo(s["speedup"])
            s["min_speedup"] = min((v for v in s["speedup"] if v), default=None)
            s["max_speedup"] = max((v for v in s["speedup"] if v), default=None)
    return out


def _load_other(name: str, beside=None) -> dict | None:
    """Another benchmark's JSON: ``<name>.json`` next to ``beside`` (this run's output, e.g. the
    suite's --out-dir) if it is there, else in benchmarks/results/."""
    import json

    places = ([Path(beside).parent] if beside is not None and Path(beside).suffix == ".json"
              else []) + [RESULTS_DIR]
    for folder in places:
        path = folder / f"{name}.json"
        if path.exists():
            try:
                return json.loads(path.read_text())
            except (OSError, ValueError):
                return None
    return None


def evaluate_targets(res: dict, beside=None) -> list[dict]:
    """One row per target of the issue: measured value and PASS / MISS (or INFO / not run)."""
    rows = []

    def add(bench, target, measured, ok, note=""):
        status = "not run" if ok is None and measured == "-" else (
            "INFO" if ok is None else ("PASS" if ok else "MISS"))
        rows.append(dict(benchmark=bench, target=target, measured=measured, status=status,
                         note=note))

    combos = res.get("seed_table", {}).get("combos", {})
    summ = res.get("seed_table_summary", {})

    def orig(ds):
        return combos.get(f"{ds}/{DATASETS[ds]['seed']}")

    for ds, tgt in SAME_WORK_TARGET.items():
        e = orig(ds)
        v = e["contenders"][SAME]["speedup_vs_sklearn"] if e else None
        add(f"seed table, same work, {ds} (seed {DATASETS[ds]['seed']})", f">= {tgt:g}x",
            fmt_ratio(v), None if v is None else v >= tgt,
            f"{e['sklearn_epochs']} epochs each" if e else "")
        s = summ.get(ds, {}).get(SAME)
        if s:
            g = s["geomean_speedup"]
            add(f"seed table, same work, {ds} (3 seeds, geo-mean)", f">= {tgt:g}x",
                fmt_ratio(g), g >= tgt,
                f"per seed {', '.join(fmt_ratio(v) for v in s['speedup'])}")
    for ds, tgt in OWN_RULE_TARGET.items():
        e = orig(ds)
        v = e["contenders"][OWN]["speedup_vs_sklearn"] if e else None
        add(f"seed table, own rule, {ds} (seed {DATASETS[ds]['seed']})", f">= {tgt:g}x",
            fmt_ratio(v), None if v is None else v >= tgt,
            (f"epochs nnjit {fmt_num(e['contenders'][OWN]['epochs']['median'])} vs "
             f"sklearn {e['sklearn_epochs']}") if e else "")
        s = summ.get(ds, {}).get(OWN)
        if s:
            g = s["geomean_speedup"]
            add(f"seed table, own rule, {ds} (3 seeds, geo-mean)", f">= {tgt:g}x", fmt_ratio(g),
                g >= tgt, f"per seed {', '.join(fmt_ratio(v) for v in s['speedup'])}")
    for ds in DATASETS:
        s = summ.get(ds)
        if not s or OWN not in s:
            continue
        a, b = s[OWN]["mean_accuracy"], s[SK]["mean_accuracy"]
        n = len(s[OWN]["accuracy"])
        if ds == "Olivetti":
            add(f"seed table, own rule, Olivetti accuracy (mean of {n} seeds)",
                f"within {OLIVETTI_ACC_POINTS:g} points of sklearn", f"{a:.4f} vs {b:.4f}",
                a >= b - OLIVETTI_ACC_POINTS / 100, f"difference {100 * (a - b):+.2f} points")
        else:
            add(f"seed table, own rule, {ds} accuracy (mean of {n} seeds)", ">= sklearn's",
                f"{a:.4f} vs {b:.4f}", a >= b, f"difference {100 * (a - b):+.2f} points")

    d64 = res.get("digits64")
    if d64:
        c = d64["contenders"]
        nj = c["nnjit"]["per_epoch_s"]["median"]
        if "JAX whole fit" in c:
            jx = c["JAX whole fit"]["per_epoch_s"]["median"]
            add("Digits 64-64-10 b16, per epoch vs JAX", "nnjit <= JAX",
                f"{fmt_time(nj, 'ms')} vs {fmt_time(jx, 'ms')}", nj <= jx,
                f"JAX / nnjit = {fmt_ratio(ratio(jx, nj))}")
        else:
            add("Digits 64-64-10 b16, per epoch vs JAX", "nnjit <= JAX", "-", None,
                "JAX not installed")
        if "PyTorch eager" in c:
            tv = c["PyTorch eager"]["per_epoch_vs_nnjit"]
            add("Digits 64-64-10 b16, per epoch vs PyTorch eager", ">= 10x faster",
                fmt_ratio(tv), tv >= 10, "PyTorch time / nnjit time")
    else:
        add("Digits 64-64-10 b16, per epoch", "<= JAX; >= 10x PyTorch", "-", None,
            "not run (--quick or --no-digits64)")

    # Targets measured by other benchmarks: read their latest results when present.
    core = _load_other("core", beside)
    src = f"benchmarks.core, {core.get('written_at')}" if core else "run benchmarks.core"
    cold = (core or {}).get("cold_compile")
    if cold:
        v = cold["compile_s"]["median"]
        add("cold compile of the core", "<= 10 s", fmt_time(v), v <= 10, src)
    else:
        add("cold compile of the core", "<= 10 s", "-", None, src)
    warm = (core or {}).get("warm_first_fit")
    if warm:
        v = warm["import_plus_first_fit_s"]["median"]
        add("warm first fit in a fresh process incl. import", "<= 1 s", fmt_time(v), v <= 1, src)
    else:
        add("warm first fit in a fresh process incl. import", "<= 1 s", "-", None, src)
    nrt = (core or {}).get("nrt")
    if nrt:
        per = max(v["per_epoch"] for v in nrt.values() if isinstance(v, dict))
        add("NRT allocations per epoch, steady state", "0", fmt_num(per), per == 0, src)
    else:
        add("NRT allocations per epoch, steady state", "0", "-", None, src)
    scale = _load_other("scale", beside)
    src = f"benchmarks.scale, {scale.get('written_at')}" if scale else "run benchmarks.scale"
    try:
        fracs = {name: per["nnjit"]["fraction_of_peak"]
                 for name, per in scale["scale"]["datasets"].items()}
    except (KeyError, TypeError):
        fracs = {}
    if fracs and not scale.get("config", {}).get("quick"):
        worst = min(fracs.values())
        add("784-256-256-10 batch 128, fraction of 1-thread GEMM peak", ">= 80%",
            ", ".join(f"{k} {v:.0%}" for k, v in fracs.items()), worst >= 0.8, src)
    else:
        add("784-256-256-10 batch 128, fraction of 1-thread GEMM peak", ">= 80%", "-", None, src)
    mem = _load_other("memory", beside)
    src = f"benchmarks.memory, {mem.get('written_at')}" if mem else "run benchmarks.memory"
    try:
        thr = {name: e["ratio_per_repeat"]["median"] for name, e in mem["threads"].items()}
    except (KeyError, TypeError):
        thr = {}
    if thr and not mem.get("config", {}).get("quick"):
        add("two trainers in two threads", ">= 1.8x one after the other",
            ", ".join(f"{k} {fmt_ratio(v)}" for k, v in thr.items()),
            min(thr.values()) >= 1.8, src)
    else:
        add("two trainers in two threads", ">= 1.8x one after the other", "-", None, src)
    return rows


# -- report --------------------------------------------------------------------------------------
def _pm(s: dict, unit=None) -> str:
    return f"{fmt_time(s['median'], unit)} [{fmt_time(s['min'], unit)}-{fmt_time(s['max'], unit)}]"


def print_report(res: dict) -> None:
    st = res.get("seed_table", {})
    combos = st.get("combos", {})
    env = res["environment"]
    pin = env.get("pinned")
    where = f", every contender pinned to CPU {pin['cpu']}" if pin else ""
    print(f"nnjit seed table -- {env['cpu_model']}, {env['cpu_affinity']} usable cores{where}; "
          f"{res['config']['repeats']} repeats, medians [min-max]; speed-up = scikit-learn fit "
          f"time / contender fit time\n", flush=True)

    # 1. original seeds
    rows = []
    for ds, cfg in DATASETS.items():
        e = combos.get(f"{ds}/{cfg['seed']}")
        if not e:
            continue
        first = True
        for who, c in e["contenders"].items():
            label = LABELS[who] + (f" ({e['sklearn_epochs']} ep)" if who == SAME else "")
            rows.append([f"{ds} ({cfg['seed']})" if first else "", label,
                         _pm(c["fit_s"], "ms"), fmt_time(c["per_epoch_s"]["median"], "ms"),
                         fmt_num(c["epochs"]["median"]), fmt_num(c["accuracy"]["median"], 4),
                         fmt_ratio(c["speedup_vs_sklearn"]),
                         fmt_num(c["cpu_per_wall"]["median"], 2)])
            first = False
    if rows:
        print_table(["data set (seed)", "contender", "fit time [min-max]", "per epoch", "epochs",
                     "test acc", "speed-up", "CPU/wall"], rows,
                    "1. Seed table, the original's seeds (Iris 42, Digits 43, Olivetti 44): "
                    "fit only, fresh model each repeat", align="llrrrrrr")

    # 2. every seed
    rows = []
    for key, e in combos.items():
        c = e["contenders"]
        sk = c[SK]
        row = [e["dataset"], str(e["seed"]), fmt_time(sk["fit_s"]["median"], "ms"),
               fmt_num(sk["epochs"]["median"]), fmt_num(sk["accuracy"]["median"], 3)]
        for who in (OWN, SKR):
            row += [fmt_ratio(c[who]["speedup_vs_sklearn"]), fmt_num(c[who]["epochs"]["median"]),
                    fmt_num(c[who]["accuracy"]["median"], 3)]
        row.append(fmt_ratio(c[SAME]["speedup_vs_sklearn"]))
        for who in (TORCH, JAX):
            if who in c:
                row += [fmt_ratio(c[who]["speedup_vs_sklearn"]),
                        fmt_num(c[who]["epochs"]["median"]),
                        fmt_num(c[who]["accuracy"]["median"], 3)]
            else:
                row += ["-", "-", "-"]
        rows.append(row)
    if rows:
        print_table(["data", "seed", "sk time", "ep", "acc", "own x", "ep", "acc", "skrule x",
                     "ep", "acc", "same x", "torch x", "ep", "acc", "jax x", "ep", "acc"], rows,
                    "2. All three seeds on each data set (x = speed-up vs scikit-learn; "
                    "ep = epochs; acc = test accuracy)")

    # 3. three-seed summary
    summ = res.get("seed_table_summary", {})
    rows = []
    for ds, s in summ.items():
        first = True
        for who, v in s.items():
            rows.append([ds if first else "", LABELS[who], fmt_num(v["mean_accuracy"], 4),
                         f"{v['mean_epochs']:.1f}", fmt_ratio(v["geomean_speedup"]),
                         f"{fmt_ratio(v['min_speedup'])}-{fmt_ratio(v['max_speedup'])}",
                         fmt_time(statistics.median(v["per_epoch_s"]), "ms")])
            first = False
    if rows:
        print_table(["data set", "contender", "mean acc", "mean ep", "speed-up (geo)",
                     "min-max", "per epoch"], rows,
                    f"3. Summary over seeds {', '.join(map(str, res['config']['seeds']))}",
                    align="llrrrrr")

    # 4. where nnjit's time goes
    rows = []
    for ds, cfg in DATASETS.items():
        e = combos.get(f"{ds}/{cfg['seed']}")
        if not e:
            continue
        sk = e["contenders"][SK]
        for who in (OWN, SKR, SAME):
            c = e["contenders"][who]
            fit, inside = c["fit_s"]["median"], c["compiled_s"]["median"]
            outside = c["outside_s"]["median"]
            rows.append([f"{ds} ({cfg['seed']})", LABELS[who], fmt_time(fit, "ms"),
                         fmt_time(inside, "ms"), fmt_time(outside, "ms"),
                         f"{100 * outside / fit:.0f}%",
                         fmt_time(c["epoch_compiled_s"]["median"], "ms"),
                         fmt_time(sk["per_epoch_s"]["median"], "ms"),
                         fmt_ratio(ratio(sk["fit_s"]["median"], inside)),
                         fmt_time(c["build_s"]["median"], "ms")])
    if rows:
        print_table(["data set", "nnjit mode", "fit", "compiled epochs", "outside loop",
                     "share", "epoch (compiled)", "sklearn epoch", "x if outside=0",
                     "build model"], rows,
                    "4. Where nnjit's fit time goes (medians): compiled epochs = sum of "
                    "history['seconds']; outside loop = per-fit Python (trace, layout, checks, "
                    "BLAS pin, history)", align="llrrrrrrrr")

    # 5. warm-up and compile
    rows = []
    for ds, w in st.get("warmup", {}).items():
        ff = w.get("nnjit_first_fit_in_process")
        if ff:
            how = (f"compiled {ff['n_compiles']} functions in {fmt_time(ff['compile_s'])}"
                   if ff["n_compiles"] else
                   f"loaded {ff['cache_loads']} from the numba cache in "
                   f"{fmt_time(ff['cache_load_s'])}")
            rows.append([ds, "nnjit first fit in this process", fmt_time(ff["fit_s"]), how])
        rows.append([ds, "nnjit warm-up fit (per seed)",
                     ", ".join(fmt_time(v) for v in w.get("nnjit_warmup_fit_s", [])), ""])
        if w.get("jax_compile_s"):
            rows.append([ds, "JAX trace + lower + compile",
                         ", ".join(fmt_time(v) for v in w["jax_compile_s"]),
                         "once per data set (same shapes for every seed)"])
        if w.get("torch_first_fit_s"):
            rows.append([ds, "PyTorch first fit (per seed)",
                         ", ".join(fmt_time(v) for v in w["torch_first_fit_s"]), ""])
    d64 = res.get("digits64")
    if d64 and d64.get("jax_compile_s"):
        rows.append(["Digits 64", "JAX trace + lower + compile", fmt_time(d64["jax_compile_s"]),
                     ""])
    if rows:
        print_table(["data set", "what", "time", "note"], rows,
                    "5. Warm-up and compilation (not part of any fit time above)", align="llrl")

    # 6. Digits 64-64-10
    if d64:
        rows = []
        for who, c in d64["contenders"].items():
            rows.append([who, _pm(c["per_epoch_s"], "ms"),
                         fmt_time(c["epoch_timer_s"]["median"], "ms"),
                         fmt_ratio(c["per_epoch_vs_nnjit"]), fmt_num(c["accuracy"]["median"], 4),
                         fmt_num(c["cpu_per_wall"]["median"], 2)])
        print_table(["contender", "per epoch (fit / epochs) [min-max]", "epoch timer",
                     "vs nnjit", "test acc", "CPU/wall"], rows,
                    f"6. Digits 64-{d64['sizes'][1]}-10, batch {d64['batch']} "
                    f"({d64['steps_per_epoch']} steps/epoch), Adam lr {d64['lr']}, "
                    f"{d64['epochs']} epochs, no validation, 1 thread", align="lrrrrr")

    # 7. targets
    rows = [[t["benchmark"], t["target"], t["measured"], t["status"], t["note"]]
            for t in res["targets"]]
    print_table(["benchmark", "target", "measured", "status", "note"], rows, "7. Targets",
                align="lllll")

    # 8. environment
    v = env["versions"]
    blas = env.get("blas", {})
    rows = [["python / numba / numpy", f"{env['python']} / {env['numba']} / {env['numpy']}"],
            ["scikit-learn / torch / jax",
             f"{v.get('scikit-learn')} / {v.get('torch')} / {v.get('jax')}"],
            ["CPU", f"{env['cpu_model']} ({env['cpu_count']} logical, "
                    f"{env['cpu_affinity']} usable)"],
            ["load average before / after",
             " ".join(f"{x:.2f}" for x in env["loadavg_before"] or []) + "  /  "
             + " ".join(f"{x:.2f}" for x in env["loadavg_after"] or [])],
            ["BLAS threads (all libraries), start / end",
             f"{blas.get('threads_start')} / {blas.get('threads_end')}"],
            ["BLAS libraries (kernel)",
             ", ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')})"
                       for b in blas.get("libraries", [])) or "-"],
            ["pinned to CPU", "no (--no-pin)" if not env.get("pinned") else
             f"{env['pinned']['cpu']} (of {env['pinned']['previous']}); CPUs of the "
             f"{env.get('n_threads')} threads at the end: {env.get('thread_cpus')}"],
            ["PyTorch threads", str(env.get("torch_threads"))],
            ["XLA_FLAGS", str((env.get("jax") or {}).get("xla_flags"))],
            ["skipped", "; ".join(f"{k}: {m}" for k, m in res.get("skipped", {}).items()) or "-"],
            *revision_rows(res)]
    print_table(["item", "value"], rows, "8. Environment", align="ll")

    prof = res.get("profile")
    if prof:
        rows = [[n, f"{calls:g}", fmt_time(tt), fmt_time(ct)]
                for n, calls, tt, ct in prof["top_cumulative"]]
        print_table(["function", "calls/fit", "self/fit", "cumulative/fit"], rows,
                    f"9. cProfile of {prof['fits']} nnjit fits ({prof['dataset']} seed "
                    f"{prof['seed']}, {prof['mode']}), per fit", align="lrrr")
    for w in res.get("warnings", []):
        print(f"WARNING: {w}", flush=True)


# -- main ----------------------------------------------------------------------------------------
def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.seed_table", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per contender (5)")
    p.add_argument("--datasets", default=",".join(DATASETS),
                   help="comma-separated subset of Iris,Digits,Olivetti")
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                   help="comma-separated seeds (default 42,43,44)")
    p.add_argument("--max-epochs", type=int, default=MAX_EPOCHS, help="epoch limit (100)")
    p.add_argument("--digits64-epochs", type=int, default=30,
                   help="epochs of the Digits 64-64-10 per-epoch row (30; 0 skips it)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    p.add_argument("--no-jax", action="store_true", help="skip JAX")
    p.add_argument("--cpu", type=int, default=None,
                   help="pin the process to this CPU (default: the highest-numbered usable CPU)")
    p.add_argument("--no-pin", action="store_true",
                   help="do not pin the process to one CPU (XLA then uses more than one thread)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="also cProfile N same-work Iris fits of nnjit (default 0: off)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: Iris, seed 42, 1 repeat, 5 epochs, 1-epoch Digits row")
    p.add_argument("--out", default="seed_table", help="results name or .json path")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.datasets, args.seeds, args.max_epochs = 1, "Iris", "42", 5
        args.digits64_epochs = min(args.digits64_epochs, 1)
    datasets = [s.strip() for s in args.datasets.split(",") if s.strip()]
    for ds in datasets:
        if ds not in DATASETS:
            p.error(f"unknown data set {ds!r}; valid: {', '.join(DATASETS)}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.repeats < 1:
        p.error("--repeats must be >= 1")

    t_start = time.perf_counter()
    load_before = loadavg()
    # One CPU for the whole process, before any library starts a thread pool: every contender is
    # meant to run single-threaded, and XLA does not honour its thread flags.
    pinned = None if args.no_pin else pin_to_one_cpu(args.cpu)
    # Load every BLAS before limiting it: numpy's and scipy's (which numba's np.dot calls), then
    # the peers' libraries.
    import numpy  # noqa: F401
    import scipy.linalg.cython_blas  # noqa: F401
    import sklearn.neural_network  # noqa: F401
    from threadpoolctl import threadpool_limits

    import nnjit  # noqa: F401

    from benchmarks import peers

    skipped = {}
    have = {"torch": False, "jax": False}
    if not args.no_torch:
        why = peers.torch_missing()
        if why:
            skipped["PyTorch"] = why
        else:
            have["torch"] = True
    else:
        skipped["PyTorch"] = "--no-torch"
    if not args.no_jax:
        why = peers.jax_missing()
        if why:
            skipped["JAX"] = why
        else:
            have["jax"] = True
    else:
        skipped["JAX"] = "--no-jax"
    for k, m in skipped.items():
        log(f"{k}: skipped ({m})")
    torch_threads = peers.torch_setup_threads() if have["torch"] else None
    if have["jax"]:
        import jax  # noqa: F401  (loads XLA's libraries before the limit)

    res: dict = {"benchmark": "seed_table",
                 "config": dict(repeats=args.repeats, datasets=datasets, seeds=seeds,
                                max_epochs=args.max_epochs, tol=TOL, n_iter_no_change=PATIENCE,
                                l2=L2, test_size=TEST_SIZE, per_dataset=DATASETS,
                                digits64=dict(D64, epochs=args.digits64_epochs),
                                pin=not args.no_pin, quick=args.quick),
                 "skipped": skipped}
    with threadpool_limits(limits=1, user_api="blas"):
        threads_start = _blas_threads()
        if any(t != 1 for t in threads_start):
            raise RuntimeError(f"BLAS not limited to one thread: {threads_start}")
        st = run_seed_table(datasets, seeds, args.repeats, args.max_epochs, have)
        res["seed_table"] = st
        res["seed_table_summary"] = per_dataset_summary(st["combos"])
        if args.digits64_epochs > 0:
            log(f"Digits 64-{D64['hidden']}-10 batch {D64['batch']}: "
                f"{args.digits64_epochs} epochs per fit")
            res["digits64"] = run_digits64(args.digits64_epochs, args.repeats, have)
        if args.profile > 0:
            log(f"cProfile of {args.profile} nnjit fits")
            res["profile"] = profile_fit("Iris", DATASETS["Iris"]["seed"], SAME, args.profile)
        threads_end = _blas_threads()
    affinities = thread_affinities()

    from benchmarks._common import blas_info

    versions = package_versions("scikit-learn", "torch", "jax", "jaxlib", "threadpoolctl",
                                "scipy", "pandas")
    res["environment"] = environment_info(
        loadavg_before=load_before, loadavg_after=loadavg(), versions=versions,
        blas=dict(threads_start=threads_start, threads_end=threads_end, libraries=blas_info()),
        torch_threads=torch_threads, jax=peers.jax_versions() if have["jax"] else None,
        pinned=pinned, thread_cpus=sorted({c for cpus in affinities.values() for c in cpus}),
        n_threads=len(affinities))
    if pinned:  # the machine's usable cores, not the one this process was pinned to
        res["environment"]["cpu_affinity"] = len(pinned["previous"])
    res["targets"] = evaluate_targets(res, args.out)
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    return finish(res, args.out, _warnings, print_report)


def _warnings(res: dict) -> list[str]:
    out = []
    env = res["environment"]
    busy = load_warning(env)
    if busy:
        out.append(busy)
    blas = env.get("blas", {})
    if any(t != 1 for t in blas.get("threads_start", []) + blas.get("threads_end", [])):
        out.append(f"BLAS was not single-threaded: {blas}")
    ff = next((w.get("nnjit_first_fit_in_process")
               for w in res.get("seed_table", {}).get("warmup", {}).values()
               if w.get("nnjit_first_fit_in_process")), None)
    if ff and ff["n_compiles"]:
        out.append(f"nnjit's first fit compiled {ff['n_compiles']} functions (empty numba cache); "
                   "the timed fits ran afterwards with compiled code in memory")
    many, starved = [], []
    combos = res.get("seed_table", {}).get("combos", {})
    cells = [(f"{who} on {key}", c) for key, e in combos.items()
             for who, c in e["contenders"].items()]
    cells += [(f"{who} on Digits 64", c)
              for who, c in (res.get("digits64") or {}).get("contenders", {}).items()]
    for where, c in cells:
        cw = c.get("cpu_per_wall", {}).get("median")
        if cw is not None and cw > 1.15:
            many.append(f"{where}: {cw:.2f}")
        elif cw is not None and cw < 0.9:
            starved.append(f"{where}: {cw:.2f}")
    if many:
        out.append("CPU time / wall time above 1 (more than one thread busy): " + "; ".join(many))
    if starved:
        out.append("CPU time / wall time below 0.9 (another process shared the CPU; those times "
                   "are inflated): " + "; ".join(starved))
    if res["config"]["quick"]:
        out.append("--quick: a smoke run, the numbers mean nothing")
    return out


if __name__ == "__main__":
    main()
