"""Sparse X: peak memory and fit time of nnjit.sklearn's MLPClassifier against scikit-learn's, in
the same run.

Run from the repository root::

    python -m benchmarks.sklearn_sparse           # 20,000 x 200,000, 400k non-zeros; ~3 minutes
    python -m benchmarks.sklearn_sparse --quick   # 2,000 x 20,000 (smoke test; numbers meaningless)

Data: a TF-IDF-like CSR matrix (each row 20 term ids drawn from a Zipf-like distribution over
the columns, counts times an idf weight, rows L2-normalised, float64 as ``TfidfVectorizer``
gives it; duplicate draws merge, so slightly fewer than 400k non-zeros) and 5 classes from a
random projection of it. Model: ``MLPClassifier(hidden_layer_sizes=(100,), max_iter=E,
random_state=0)``, every other parameter at scikit-learn's default (adam, batch 200); E epochs
(``--epochs``, 2).

Contenders, each fitted in its own fresh process (``--runs`` each, alternating): scikit-learn on
the float64 matrix (what a vectorizer gives) and on a float32 copy; nnjit given the float64
matrix, with its float32 default and with ``dtype=np.float64``. nnjit fits the CSR matrix without
densifying it (its first layer reads each batch row's non-zeros). Reported per contender: the
process's peak RSS (``VmHWM``: the number a user's machine must have), its RSS before the fit and
the growth, the fit's wall time, the loss curve. A warm-up process fills the numba cache first:
the measured nnjit processes load compiled code, as every fit after a first one does.

Targets (issue 23): nnjit's default fit peaks within 1.2x scikit-learn's peak (on the float64
matrix, and on its float32 copy) and is faster than it; the float64 loss curves agree.
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks._common import (
    child_env,
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
    print_environment,
    print_table,
    ratio,
    revision_rows,
    run_child,
    summarize,
)

#: Peak RSS of nnjit's default fit over scikit-learn's on the same data, at most.
TARGET_MEMORY_RATIO = 1.2

CONTENDERS = {
    "scikit-learn, float64 X": ("sklearn", "float64", None),
    "scikit-learn, float32 X": ("sklearn", "float32", None),
    "nnjit (float32 default), float64 X": ("nnjit", "float64", None),
    "nnjit dtype=float64, float64 X": ("nnjit", "float64", "float64"),
}
NNJIT_DEFAULT = "nnjit (float32 default), float64 X"
PEERS = ("scikit-learn, float64 X", "scikit-learn, float32 X")


def make_tfidf(np, sp, rows, cols, per_row, seed=0):
    """A TF-IDF-like CSR matrix (float64) and 5 class labels (see the module docstring)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / (np.arange(cols) + 10.0)  # Zipf-like term frequencies
    terms = rng.choice(cols, size=rows * per_row, p=weights / weights.sum())
    X = sp.csr_matrix((np.ones(rows * per_row), terms, np.arange(0, rows * per_row + 1, per_row)),
                      shape=(rows, cols))
    X.sum_duplicates()  # (term counts)
    df = np.bincount(X.indices, minlength=cols)
    X.data *= np.log((1.0 + rows) / (1.0 + df[X.indices])) + 1.0
    norms = np.sqrt(np.add.reduceat(X.data ** 2, X.indptr[:-1]))
    X.data /= np.repeat(norms, np.diff(X.indptr))
    y = np.argmax(X @ rng.standard_normal((cols, 5)), axis=1)
    return X, y


CHILD = """
import time, warnings
from benchmarks._common import NumbaCompileProfiler, emit_result, rss_now
import numpy as np
import scipy.sparse as sp
LIBRARY, X_DTYPE, DTYPE = {library!r}, {x_dtype!r}, {dtype!r}
if LIBRARY == "nnjit":
    from nnjit.sklearn import MLPClassifier
    kw = {{}} if DTYPE is None else {{"dtype": np.dtype(DTYPE)}}
else:
    from sklearn.neural_network import MLPClassifier
    kw = {{}}
""" + "\n" + "__MAKE__" + """
X, y = make_tfidf(np, sp, {rows}, {cols}, {per_row})
X = X.astype(X_DTYPE)
est = MLPClassifier(hidden_layer_sizes=(100,), max_iter={epochs}, random_state=0, **kw)
before = rss_now()
warnings.simplefilter("ignore")
with NumbaCompileProfiler() as prof:
    t0 = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t0
after = rss_now()
emit_result(dict(before=before, after=after, fit_s=seconds, loss_curve=list(est.loss_curve_),
                 nnz=int(X.nnz), n_compiles=prof.summary()["n_compiles"]))
"""


def _child_code(name: str, sizes: dict, epochs: int) -> str:
    import inspect

    library, x_dtype, dtype = CONTENDERS[name]
    code = CHILD.format(library=library, x_dtype=x_dtype, dtype=dtype, epochs=epochs, **sizes)
    return code.replace("__MAKE__", inspect.getsource(make_tfidf))


def _warm_up(env) -> None:
    """Fill the numba cache the measured processes load (both dtypes' sparse builds)."""
    run_child("""
import warnings
import numpy as np, scipy.sparse as sp
from benchmarks._common import emit_result
from nnjit.sklearn import MLPClassifier
warnings.simplefilter("ignore")
X = sp.random(60, 40, density=0.1, random_state=0, format="csr")
for dtype in (np.float32, np.float64):
    MLPClassifier((4,), max_iter=1, dtype=dtype).fit(X, np.arange(60) % 3)
emit_result({})
""", env=env)


def log(msg: str) -> None:
    import sys

    print(msg, file=sys.stderr, flush=True)


def measure(sizes: dict, epochs: int, runs: int) -> dict:
    env = child_env(NUMBA_CACHE_DIR=os.environ.get("NUMBA_CACHE_DIR"))
    log("   warm-up process (numba cache)")
    _warm_up(env)
    out = {name: [] for name in CONTENDERS}
    for r in range(runs):  # alternating: a drift of the machine hits every contender
        for name in CONTENDERS:
            result = run_child(_child_code(name, sizes, epochs), env=env, timeout=3600)
            result.pop("_launch_monotonic")
            out[name].append(result)
            log(f"   run {r + 1}/{runs} {name}: peak {result['after']['peak'] / 2**20:.0f} MiB, "
                f"fit {result['fit_s']:.1f} s")
    return out


def summarise(raw: dict) -> dict:
    rows = {}
    for name, results in raw.items():
        rows[name] = {
            "peak": summarize(r["after"]["peak"] for r in results),
            "before": summarize(r["before"]["rss"] for r in results),
            "growth": summarize(r["after"]["peak"] - r["before"]["rss"] for r in results),
            "fit_s": summarize(r["fit_s"] for r in results),
            "loss_curve": results[0]["loss_curve"], "nnz": results[0]["nnz"],
            "n_compiles": max(r["n_compiles"] for r in results)}
    ours = rows[NNJIT_DEFAULT]
    targets = []
    for peer in PEERS:
        mem = ratio(ours["peak"]["median"], rows[peer]["peak"]["median"])
        speed = ratio(rows[peer]["fit_s"]["median"], ours["fit_s"]["median"])
        targets.append({"what": f"peak RSS, nnjit default / {peer}", "measured": mem,
                            "target": f"<= {TARGET_MEMORY_RATIO}",
                            "met": mem is not None and mem <= TARGET_MEMORY_RATIO})
        targets.append({"what": f"fit time, {peer} / nnjit default", "measured": speed,
                            "target": "> 1", "met": speed is not None and speed > 1.0})
    a = rows["nnjit dtype=float64, float64 X"]["loss_curve"]
    b = rows["scikit-learn, float64 X"]["loss_curve"]
    parity = max((abs(x - z) / abs(z) for x, z in zip(a, b)), default=None)
    return {"contenders": rows, "targets": targets, "float64_loss_curve_max_rel_diff": parity}


def print_report(res: dict) -> None:
    cfg = res["config"]
    s = res["summary"]
    rows = []
    for name, row in s["contenders"].items():
        rows.append([name, f"{row['peak']['median'] / 2**20:.0f} MiB",
                     f"{row['before']['median'] / 2**20:.0f} MiB",
                     f"{row['growth']['median'] / 2**20:.0f} MiB",
                     fmt_time(row["fit_s"]["median"]),
                     fmt_time(row["fit_s"]["median"] / cfg["epochs"]),
                     fmt_num(row["loss_curve"][-1], 6), str(row["n_compiles"])])
    first = next(iter(s["contenders"].values()))
    print_table(["contender", "peak RSS", "RSS before fit", "fit's growth", "fit", "fit / epoch",
                 "last loss", "compiled"], rows,
                f"MLPClassifier((100,)) on a {cfg['rows']:,} x {cfg['cols']:,} CSR matrix, "
                f"{first['nnz']:,} non-zeros, {cfg['epochs']} epochs (fresh process each, medians "
                f"of {cfg['runs']})")
    rows = [[t["what"], fmt_ratio(t["measured"]), t["target"],
             "PASS" if t["met"] else "MISS"] for t in s["targets"]]
    parity = s["float64_loss_curve_max_rel_diff"]
    rows.append(["float64 loss curves, nnjit vs scikit-learn (max relative difference)",
                 "-" if parity is None else f"{parity:.1e}", "", "INFO"])
    print_table(["target", "measured", "target", ""], rows, "Targets (issue 23)", align="llll")
    env = res["environment"]
    v = env["versions"]
    print_environment([["python / numba / numpy", (f"{env['python']} / {env['numba']} / "
                                                  f"{env['numpy']}")],
                       ["scikit-learn / scipy", f"{v.get('scikit-learn')} / {v.get('scipy')}"],
                       ["CPU", f"{env['cpu_model']} ({env['cpu_affinity']} usable cores)"],
                       *load_rows(env), *revision_rows(res)], res, "Environment")


def _warnings(res: dict) -> list[str]:
    out = []
    busy = load_warning(res["environment"])
    if busy:
        out.append(busy)
    if res["config"]["quick"]:
        out.append("--quick: small sizes and 1 run; the numbers mean nothing")
        return out
    for t in res["summary"]["targets"]:
        if not t["met"]:
            out.append(f"target missed: {t['what']} = {fmt_ratio(t['measured'])} "
                       f"(target {t['target']})")
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sklearn_sparse", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="2,000 x 20,000 rows, 1 epoch, 1 run: checks that the benchmark runs")
    p.add_argument("--runs", type=int, default=None, help="processes per contender (default 1)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per fit (default 2)")
    p.add_argument("--out", default="sklearn_sparse",
                   help="results name, .json path or directory (default sklearn_sparse)")
    args = p.parse_args(argv)
    q = args.quick
    sizes = ({"rows": 2_000, "cols": 20_000, "per_row": 20} if q
             else {"rows": 20_000, "cols": 200_000, "per_row": 20})
    epochs = args.epochs or (1 if q else 2)
    runs = args.runs or 1
    t0 = time.perf_counter()
    load_before = loadavg()
    res = {"benchmark": "sklearn_sparse",
           "config": dict(quick=q, runs=runs, epochs=epochs, **sizes)}
    res["raw"] = measure(sizes, epochs, runs)
    res["summary"] = summarise(res["raw"])
    res["environment"] = environment_info(
        loadavg_before=load_before, loadavg_after=loadavg(),
        versions=package_versions("scikit-learn", "scipy"))
    res["benchmark_wall_s"] = time.perf_counter() - t0
    return finish(res, out_path(args.out, "sklearn_sparse"), _warnings, print_report)


if __name__ == "__main__":
    main()
