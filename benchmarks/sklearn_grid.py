"""GridSearchCV over nnjit.sklearn.MLPClassifier against scikit-learn's own, in the same run:
``python -m benchmarks.sklearn_grid [--quick] [--out FILE]``.

12 configurations (hidden layer (64,) or (128,) x alpha 1e-4, 1e-3, 1e-2 x learning_rate_init
1e-3, 1e-2) x 5 folds of ``StandardScaler() -> MLPClassifier(random_state=0)`` on Digits, every
other parameter at scikit-learn's default (adam, batch 200, up to 200 epochs, tol 1e-4). Rows:
scikit-learn with ``n_jobs=1``; nnjit (float32, its default; and float64) with ``n_jobs=1``; nnjit
float32 with ``n_jobs=2`` under joblib's threading backend (its fits release the GIL). BLAS is
pinned to one thread for the whole run (threadpoolctl), for both sides. Reported: wall seconds
of the whole search (median of the repeats), the speed-up against scikit-learn, and the mean CV
accuracy over the 12 configurations (and the best one's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings


def _search(estimator, grid, X, y, n_jobs, threading):
    from joblib import parallel_backend
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    search = GridSearchCV(make_pipeline(StandardScaler(), estimator), grid, cv=5, n_jobs=n_jobs)
    t0 = time.perf_counter()
    if threading:
        with parallel_backend("threading", n_jobs=n_jobs):
            search.fit(X, y)
    else:
        search.fit(X, y)
    seconds = time.perf_counter() - t0
    scores = search.cv_results_["mean_test_score"]
    return seconds, float(scores.mean()), float(search.best_score_)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 configurations, 1 repeat")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)

    import numpy as np
    import scipy.linalg.cython_blas  # noqa: F401  (load the BLAS before limiting it)
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier as SklearnMLP
    from threadpoolctl import threadpool_limits

    from nnjit.sklearn import MLPClassifier as NnjitMLP

    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y = load_digits(return_X_y=True)
    grid = {"mlpclassifier__hidden_layer_sizes": [(64,), (128,)],
            "mlpclassifier__alpha": [1e-4, 1e-3, 1e-2],
            "mlpclassifier__learning_rate_init": [1e-3, 1e-2]}
    repeats = args.repeats
    if args.quick:
        grid = {"mlpclassifier__alpha": [1e-4, 1e-2]}
        repeats = 1
    sides = [
        ("scikit-learn, n_jobs=1", lambda: SklearnMLP(random_state=0), 1, False),
        ("nnjit float32, n_jobs=1", lambda: NnjitMLP(random_state=0), 1, False),
        ("nnjit float64, n_jobs=1", lambda: NnjitMLP(random_state=0, dtype=np.float64), 1,
         False),
        ("nnjit float32, threading n_jobs=2", lambda: NnjitMLP(random_state=0), 2, True),
    ]
    with threadpool_limits(1, "blas"):
        # warm up nnjit's two builds (compiled or loaded from the cache) outside the clocks
        NnjitMLP(max_iter=1).fit(X[:50], y[:50])
        NnjitMLP(max_iter=1, dtype=np.float64).fit(X[:50], y[:50])
        times = {name: [] for name, *_ in sides}
        results = {}
        for _ in range(repeats):  # the sides alternate: drifts of the machine hit all of them
            for name, make, n_jobs, threading in sides:
                seconds, mean_acc, best_acc = _search(make(), grid, X, y, n_jobs, threading)
                times[name].append(seconds)
                results[name] = (mean_acc, best_acc)
    base = statistics.median(times[sides[0][0]])
    rows = []
    print(f"GridSearchCV, {len(list(_configs(grid)))} configurations x 5 folds, Digits "
          f"(median of {repeats})")
    print(f"{'side':36s} {'seconds':>8s} {'speed-up':>9s} {'mean acc':>9s} {'best acc':>9s}")
    for name, *_ in sides:
        t = statistics.median(times[name])
        mean_acc, best_acc = results[name]
        rows.append({"side": name, "seconds": t, "all_seconds": times[name],
                     "speedup_vs_sklearn": base / t, "mean_cv_accuracy": mean_acc,
                     "best_cv_accuracy": best_acc})
        print(f"{name:36s} {t:8.2f} {base / t:8.1f}x {mean_acc:9.4f} {best_acc:9.4f}")
    threaded = statistics.median(times[sides[3][0]])
    serial = statistics.median(times[sides[1][0]])
    print(f"threading n_jobs=2 against n_jobs=1 (nnjit float32): {serial / threaded:.2f}x")
    result = {"rows": rows, "threading_speedup": serial / threaded, "repeats": repeats}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return result


def _configs(grid):
    from sklearn.model_selection import ParameterGrid

    return ParameterGrid(grid)


if __name__ == "__main__":
    main()
