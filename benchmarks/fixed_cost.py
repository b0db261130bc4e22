"""A fit's fixed cost: the Python time of a small fit outside its compiled epochs (issue 23).

Run from the repository root::

    python -m benchmarks.fixed_cost                 # 3000 fits per case, about 1 minute
    python -m benchmarks.fixed_cost --fits 300      # smoke run

The seed table's Iris same-work fit (4-16-3, Adam 0.01, ``SklearnL2Regularizer(1e-4)``, batch 16,
the stratified validation split, ``monitor="val_accuracy"``), one epoch, float32 arrays. Each fit
is timed from ``fit``'s call to its return; the compiled epochs (``history["seconds"]``) are
subtracted. Cases:

* ``fresh``: a new model, Trainer and DataLoader for every fit, as the seed table and a grid
  search build them (:mod:`nnjit.train.fresh_fit`);
* ``same loader``: one trainer fitted again on the same loader (:mod:`nnjit.train.repeat_fit`);
* ``fit(X, y)``: one trainer fitted again on the arrays.

scikit-learn's ``MLPClassifier((16,), max_iter=1, batch_size=16, early_stopping=True)`` fit of the
same data runs in the same process, as the yardstick the issue's ratios use, and so does
``nnjit.sklearn``'s estimator with the same parameters (a fresh estimator per fit, its whole
``fit`` timed: scikit-learn's validation, labels and split are part of its fixed cost). The
process is pinned to one CPU (``--cpu``). Compare versions by running them alternately.
"""

from __future__ import annotations

import argparse
import gc
import time
import warnings

from benchmarks._common import (
    environment_info,
    finish,
    load_warning,
    loadavg,
    pin_to_one_cpu,
    print_table,
    summarize,
)
from benchmarks.seed_table import prepare

L2, LR, BATCH, HIDDEN = 1e-4, 0.01, 16, 16


def _cases(d: dict) -> dict:
    """``{name: fit()}``, each returning the seconds spent outside the compiled epochs."""
    import nnjit as nn

    def trainer():
        nn.set_seed(42)
        model = nn.Sequential(nn.Linear(d["n_features"], HIDDEN), nn.ReLU(),
                              nn.Linear(HIDDEN, d["n_classes"]))
        return nn.Trainer(model, nn.Adam(lr=LR), nn.CrossEntropyLoss(),
                          regularizer=nn.SklearnL2Regularizer(L2))

    kw = dict(val=(d["X_val"], d["y_val"]), epochs=1, tol=1e-4, n_iter_no_change=None,
              monitor="val_accuracy", verbose=False)

    def timed(t, *data, **more):
        start = time.perf_counter()
        h = t.fit(*data, **kw, **more)
        return time.perf_counter() - start - float(h["seconds"].sum())

    def fresh():
        return timed(trainer(), nn.DataLoader(d["X_fit"], d["y_fit"], batch_size=BATCH))

    same, loader = trainer(), nn.DataLoader(d["X_fit"], d["y_fit"], batch_size=BATCH)
    arrays = trainer()
    return {"fresh": fresh,
            "same loader": lambda: timed(same, loader),
            "fit(X, y)": lambda: timed(arrays, d["X_fit"], d["y_fit"], batch_size=BATCH)}


def _sklearn(d: dict, module: str = "sklearn.neural_network") -> float:
    """One fresh 1-epoch ``MLPClassifier`` fit of ``module`` (scikit-learn's, or nnjit's
    ``nnjit.sklearn``), in seconds."""
    import importlib

    from sklearn.exceptions import ConvergenceWarning

    classifier = importlib.import_module(module).MLPClassifier
    clf = classifier((HIDDEN,), batch_size=BATCH, learning_rate_init=LR, max_iter=1, alpha=L2,
                     random_state=42, early_stopping=True, validation_fraction=0.1,
                     n_iter_no_change=10**6)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(d["X_train"], d["y_train"])
    return time.perf_counter() - start


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fits", type=int, default=3000, help="timed fits per case (3000)")
    p.add_argument("--sklearn-fits", type=int, default=30, help="scikit-learn fits (30)")
    p.add_argument("--estimator-fits", type=int, default=300,
                   help="nnjit.sklearn estimator fits (300)")
    p.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: the last)")
    p.add_argument("--out", default="fixed_cost", help="results name or .json path")
    args = p.parse_args(argv)
    env = environment_info(loadavg_before=loadavg(), pinned=pin_to_one_cpu(args.cpu))
    d = prepare("Iris", 42)
    res = {"env": env, "fits": args.fits, "outside_s": {}}
    for name, fit in _cases(d).items():
        for _ in range(50):  # (warm: compiled, cached layout and records)
            fit()
        gc.collect()
        res["outside_s"][name] = summarize([fit() for _ in range(args.fits)])
    for _ in range(20):  # (warm, as the cases)
        _sklearn(d, "nnjit.sklearn")
    res["estimator_fit_s"] = summarize([_sklearn(d, "nnjit.sklearn")
                                        for _ in range(args.estimator_fits)])
    res["sklearn_fit_s"] = summarize([_sklearn(d) for _ in range(args.sklearn_fits)])
    env["loadavg_after"] = loadavg()

    def report(r):
        rows = [[name, f"{s['median'] * 1e6:.1f} us", f"{s['min'] * 1e6:.1f} us"]
                for name, s in r["outside_s"].items()]
        rows.append(["nnjit.sklearn 1-epoch fit (whole)",
                     f"{r['estimator_fit_s']['median'] * 1e6:.1f} us",
                     f"{r['estimator_fit_s']['min'] * 1e6:.1f} us"])
        rows.append(["scikit-learn 1-epoch fit", f"{r['sklearn_fit_s']['median'] * 1e3:.2f} ms",
                     f"{r['sklearn_fit_s']['min'] * 1e3:.2f} ms"])
        print_table(["Iris fit, outside the compiled epochs", "median", "min"], rows)

    return finish(res, args.out, lambda r: [load_warning(r["env"])], report)


if __name__ == "__main__":
    main()
