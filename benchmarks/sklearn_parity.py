"""How close nnjit.sklearn's float64 fits follow scikit-learn's: a sweep of same-seed fits.

Run from the repository root::

    python -m benchmarks.sklearn_parity            # 144 fits per side, about 2-4 minutes
    python -m benchmarks.sklearn_parity --quick    # Iris only, 2 configurations (smoke run)

Sweep: Iris, Digits and breast cancer, each standardised and as loaded (unscaled) x the solvers
(adam; sgd with the constant, invscaling and adaptive rates) x ``batch_size`` 7, 32 and "auto"
(200) x ``early_stopping`` off and on; ``MLPClassifier(hidden_layer_sizes=(16,),
max_iter=30, random_state=0)``, every other parameter at scikit-learn's default, nnjit with
``dtype=np.float64``. Per fit: whether ``n_iter_`` agrees, the largest relative difference of
the loss curves (and of the validation scores), and of the weights. Reported: how many fits are
within 1e-15, 1e-14, 1e-12 and 1e-10 (loss curves), and the worst fits.

Both sides compute the same formulas but round differently in places (the products' summation
order: NumPy's and SciPy's OpenBLAS builds, and nnjit's own loops for small shapes; the order of
the penalty and update arithmetic), and training amplifies a difference of one rounding over the
steps: small batches (many steps) and unscaled data (large gradients) part most.
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

from benchmarks._common import environment_info, finish, loadavg, out_path, print_table

THRESHOLDS = (1e-15, 1e-14, 1e-12, 1e-10)
SOLVERS = {"adam": {"solver": "adam"},
           "sgd constant": {"solver": "sgd", "learning_rate": "constant"},
           "sgd invscaling": {"solver": "sgd", "learning_rate": "invscaling"},
           "sgd adaptive": {"solver": "sgd", "learning_rate": "adaptive"}}


def _data(quick: bool) -> dict:
    from sklearn import datasets

    out = {}
    for name in (("iris",) if quick else ("iris", "digits", "breast_cancer")):
        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        out[f"{name}, unscaled"] = (X, y)
        out[f"{name}, standardised"] = ((X - X.mean(0)) / (X.std(0) + 1e-12), y)
    return out


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    scale = np.maximum(np.abs(b), np.finfo(np.float64).tiny)
    return float(np.max(np.abs(a - b) / scale))


def sweep(quick: bool) -> list[dict]:
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier as Theirs

    from nnjit.sklearn import MLPClassifier as Ours

    warnings.simplefilter("ignore", ConvergenceWarning)
    solvers = dict(list(SOLVERS.items())[:2]) if quick else SOLVERS
    rows = []
    for (data, (X, y)), (solver, skw), batch, es in itertools.product(
            _data(quick).items(), solvers.items(), (7, 32, "auto"), (False, True)):
        kw = {"hidden_layer_sizes": (16,), "max_iter": 30, "random_state": 0,
              "batch_size": batch, "early_stopping": es, **skw}
        ours = Ours(dtype=np.float64, **kw).fit(X, y)
        theirs = Theirs(**kw).fit(X, y)
        scores = (_rel(ours.validation_scores_, theirs.validation_scores_) if es else 0.0)
        rows.append({"data": data, "solver": solver, "batch_size": batch, "early_stopping": es,
                     "n_iter_equal": ours.n_iter_ == theirs.n_iter_, "epochs": theirs.n_iter_,
                     "loss_curve": _rel(ours.loss_curve_, theirs.loss_curve_),
                     "validation_scores": scores,
                     "weights": max(_rel(a, b) for a, b in zip(ours.coefs_ + ours.intercepts_,
                                                                theirs.coefs_
                                                                + theirs.intercepts_))})
    return rows


def summarise(rows: list[dict]) -> dict:
    counts = {f"{t:.0e}": sum(r["loss_curve"] <= t for r in rows) for t in THRESHOLDS}
    worst = sorted(rows, key=lambda r: -r["loss_curve"])[:8]
    return {"fits": len(rows), "loss_curve_within": counts,
            "n_iter_equal": sum(r["n_iter_equal"] for r in rows),
            "worst_loss_curve": worst[0]["loss_curve"] if worst else None,
            "worst_weights": max((r["weights"] for r in rows), default=None), "worst": worst}


def print_report(res: dict) -> None:
    s = res["summary"]
    rows = [[f"<= {k}", f"{v} of {s['fits']}"] for k, v in s["loss_curve_within"].items()]
    rows.append(["n_iter_ equal", f"{s['n_iter_equal']} of {s['fits']}"])
    rows.append(["worst loss curve / weights (relative)",
                 f"{s['worst_loss_curve']:.1e} / {s['worst_weights']:.1e}"])
    print_table(["float64 loss curves vs scikit-learn", "fits"], rows,
                "nnjit.sklearn.MLPClassifier(dtype=float64) against scikit-learn, same seed",
                align="ll")
    rows = [[r["data"], r["solver"], str(r["batch_size"]), str(r["early_stopping"]),
             str(r["epochs"]), f"{r['loss_curve']:.1e}", f"{r['weights']:.1e}"]
            for r in s["worst"]]
    print_table(["data", "solver", "batch", "early stop", "epochs", "loss curve", "weights"],
                rows, "The fits that part most (relative differences)")


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sklearn_parity", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="Iris only, 2 solvers (smoke run)")
    p.add_argument("--out", default="sklearn_parity",
                   help="results name, .json path or directory (default sklearn_parity)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    load_before = loadavg()
    res = {"benchmark": "sklearn_parity", "config": {"quick": args.quick}}
    res["fits"] = sweep(args.quick)
    res["summary"] = summarise(res["fits"])
    res["environment"] = environment_info(loadavg_before=load_before, loadavg_after=loadavg())
    res["benchmark_wall_s"] = time.perf_counter() - t0
    return finish(res, out_path(args.out, "sklearn_parity"), lambda r: [], print_report)


if __name__ == "__main__":
    main()
