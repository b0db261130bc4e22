"""Cold start: what the first fit of each architecture costs on an empty numba cache, per dtype,
with and without ``nnjit warmup`` (issue 21's targets).

``python -m benchmarks.cold_start [--dtype float32|float64|both] [--quick] [--out PATH.json]``

Every measurement is a fresh ``python -c`` process (CPU seconds of the whole process: interpreter
start, import, tracing, compiling, one epoch) in a chain that shares one empty cache:

1. **Families one at a time**: the MLP (the training loop), then a model adding one family each
   (conv, + pooling, + batch norm, embedding + joining + dropout, a GCN): each first fit pays for
   the pieces it is the first to need, and no more.
2. **Combinations**: with those cached, models mixing the same families another way (a conv net
   without batch norm, a CNN with average pooling and LayerNorm, a GraphSAGE and a GAT): their
   first fits compile nothing.
3. **After warmup**: a new empty cache, ``nnjit warmup --dtype D`` (CPU seconds), then every
   architecture's first fit: nothing compiles.

The compile notice's own count (``compile_seconds()``, wall seconds of the pieces really
compiled) is reported beside the CPU seconds. Numbers are comparable only on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time

from benchmarks._common import (
    REPO_ROOT,
    child_env,
    environment_info,
    finish,
    fmt_num,
    load_rows,
    load_warning,
    print_environment,
    print_table,
    revision_rows,
    run_child,
    temp_dir,
)

# name -> the model (and data) a first fit trains; each runs in a child (see CHILD)
ARCHITECTURES = {
    "MLP": "nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)), (X, y)",
    "conv": "nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), "
            "nn.Linear(256, 10)), (images, y)",
    "conv + max pool": "nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), "
                       "nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10)), (images, y)",
    "conv + BatchNorm2d + max pool": "nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), "
                                     "nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), "
                                     "nn.Linear(64, 10)), (images, y)",
    "embedding + cat + dropout": "Tabular(), nn.DataLoader((X[:, :63], cats), y, batch_size=32)",
    "GCN (Cora)": "graph_net('graph_conv'), cora",
    # combinations of families already compiled
    "conv + BatchNorm2d (no pool)": "nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), "
                                    "nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), "
                                    "nn.Linear(256, 10)), (images, y)",
    "conv + avg pool + LayerNorm + dropout": "nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), "
                                             "nn.AvgPool2d(2), nn.Flatten(), nn.LayerNorm(36), "
                                             "nn.Dropout(0.1), nn.Linear(36, 10)), (images, y)",
    "GraphSAGE (Cora)": "graph_net('graph_sage'), cora",
    "GAT (Cora)": "graph_net('graph_att'), cora",
}
ONE_AT_A_TIME = ("MLP", "conv", "conv + max pool", "conv + BatchNorm2d + max pool",
                 "embedding + cat + dropout", "GCN (Cora)")
COMBINATIONS = ("conv + BatchNorm2d (no pool)", "conv + avg pool + LayerNorm + dropout",
                "GraphSAGE (Cora)", "GAT (Cora)")

CHILD = textwrap.dedent("""
    import time
    import numpy as np
    import nnjit as nn
    from benchmarks._common import emit_result
    from nnjit.engine.compile_notice import compile_seconds

    DTYPE = {dtype!r}
    X, y = nn.datasets.load_digits()
    X = nn.datasets.standardize(np.asarray(X, np.float32)); y = np.asarray(y)
    images, cats = X.reshape(-1, 1, 8, 8), (np.arange(len(X)) % 10).reshape(-1, 1)

    class Tabular(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.flat = nn.Embedding(10, 3), nn.Flatten()
            self.num, self.drop, self.out = nn.Linear(63, 16), nn.Dropout(0.1), nn.Linear(19, 10)

        def forward(self, x_num, x_cat):
            h = nn.functional.cat([self.num(x_num), self.flat(self.emb(x_cat))], dim=1)
            return self.out(self.drop(h))

    def graph_net(kind):
        from nnjit.experiment.config import NetConfig
        return NetConfig(kind=kind, in_dim=cora.num_features, out_dim=cora.num_classes,
                         hidden_dims=[16]).build()

    if "Cora" in {name!r}:
        from nnjit.experiment.data import graph_from_dataset
        cora = graph_from_dataset(nn.datasets.load_cora())
    model, data = {model}
    trainer = nn.Trainer(model, nn.Adam(lr=1e-3), seed=0, dtype=DTYPE)
    trainer.fit(data, epochs=1, verbose=False)
    emit_result(dict(cpu_s=time.process_time(), compile_s=compile_seconds()))
""")


def _env(cache: str) -> dict:
    """A child's environment: this checkout first on the path, the numba cache ``cache``."""
    return child_env(NUMBA_CACHE_DIR=cache, NNJIT_COMPILE_NOTICE=0,
                     PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))


def first_fit(name: str, dtype: str, cache: str) -> dict:
    """One fresh process's first fit of architecture ``name`` on the numba cache ``cache``."""
    return run_child(CHILD.format(dtype=dtype, name=name, model=ARCHITECTURES[name]), _env(cache))


def warmup(dtype: str, cache: str) -> dict:
    """``nnjit warmup --dtype D`` on ``cache``: its CPU seconds (the child's, from rusage)."""
    env = _env(cache)
    before = os.times()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nnjit", "warmup", "--dtype", dtype],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=3600)
    after = os.times()
    if proc.returncode != 0:
        raise RuntimeError(f"nnjit warmup failed:\n{proc.stderr[-3000:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system
                                                          - before.children_system)
    return dict(cpu_s=cpu, wall_s=time.monotonic() - start, lines=proc.stdout.splitlines())


def measure(dtype: str, quick: bool) -> dict:
    out = {"chain": {}, "after_warmup": {}}
    names = ONE_AT_A_TIME + COMBINATIONS
    if quick:
        names = ("MLP", "conv", "conv + BatchNorm2d (no pool)")
    with temp_dir("nnjit-cold-") as cache:
        for name in names:
            r = first_fit(name, dtype, cache)
            out["chain"][name] = {"cpu_s": r["cpu_s"], "compile_s": r["compile_s"]}
            print(f"  {dtype} {name}: {r['cpu_s']:.1f} s CPU ({r['compile_s']:.1f} s compiling)",
                  file=sys.stderr, flush=True)
    if quick:
        return out
    with temp_dir("nnjit-warm-") as cache:
        w = warmup(dtype, cache)
        out["warmup"] = w
        print(f"  {dtype} nnjit warmup: {w['cpu_s']:.1f} s CPU", file=sys.stderr, flush=True)
        for name in names:
            r = first_fit(name, dtype, cache)
            out["after_warmup"][name] = {"cpu_s": r["cpu_s"], "compile_s": r["compile_s"]}
    return out


def report(res: dict) -> None:
    for dtype, r in res["dtypes"].items():
        rows = []
        for name, cold in r["chain"].items():
            warm = r["after_warmup"].get(name)
            rows.append([name, "first to need its pieces" if name in ONE_AT_A_TIME
                         else "families already cached", fmt_num(cold["cpu_s"], 2),
                         fmt_num(cold["compile_s"], 2),
                         fmt_num(warm["cpu_s"], 2) if warm else "-",
                         fmt_num(warm["compile_s"], 2) if warm else "-"])
        print_table(["first fit of", "in the chain", "CPU s", "compiling s",
                     "after warmup: CPU s", "compiling s"], rows,
                    f"Cold start, {dtype} (fresh processes, one shared empty numba cache)",
                    align="llrrrr")
        if "warmup" in r:
            print(f"nnjit warmup --dtype {dtype} on an empty cache: "
                  f"{r['warmup']['cpu_s']:.1f} s CPU ({r['warmup']['wall_s']:.1f} s wall)")
    rows = [*load_rows(res["environment"]), *revision_rows(res)]
    print_environment(rows, res, "Environment")


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", choices=["float32", "float64", "both"], default="float32")
    p.add_argument("--quick", action="store_true", help="smoke test: 3 first fits, no warmup")
    p.add_argument("--out", default="cold_start", help="NAME or PATH.json")
    args = p.parse_args(argv)
    start = time.monotonic()
    res = {"environment": environment_info(loadavg_before=os.getloadavg()), "dtypes": {}}
    for dtype in (("float32", "float64") if args.dtype == "both" else (args.dtype,)):
        res["dtypes"][dtype] = measure(dtype, args.quick)
    res["environment"]["loadavg_after"] = os.getloadavg()
    res["benchmark_wall_s"] = time.monotonic() - start
    return finish(res, args.out, lambda r: [load_warning(r["environment"])], report)


if __name__ == "__main__":
    main()
