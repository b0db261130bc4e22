"""User-defined op family benchmark: SiLU three ways, per epoch on Digits.

Run from the repository root::

    python -m benchmarks.custom_ops            # 100 epochs x 9 repeats (about 1 minute)
    python -m benchmarks.custom_ops --quick    # smoke test: 2 epochs, 1 repeat

The same MLP ``Linear(64, 64) - SiLU - Linear(64, 10)``, cross-entropy, batch 16, Adam lr 0.001,
float32, with its SiLU (``x * sigmoid(x)``) made three ways:

- *user family*: the SiLU op family of ``benchmarks/_custom_silu.py``, defined outside the
  package with ``nnjit.ops`` as ``docs/custom-ops.md`` describes (numba kernels, one ``OpSpec``,
  two dispatchers), compiled into the training loop;
- *built-in composition*: ``x * nn.functional.sigmoid(x)``, i.e. the built-in SIGMOID then MUL
  records (two ops and one more slot, all compiled in the core build);
- *Python nn.Op*: the same arithmetic in NumPy in an ``nn.Op`` (the compiled loop returns to
  Python at the op, forward and backward, every batch).

Contenders alternate (A B C A B C ...), repeat r uses seed r for every one of them; the per-epoch
time is the median of ``history["seconds"]`` (timed inside the compiled loop) of each fit, and the
table shows the median, min and max of those over the repeats. Issue 12's target: the user family
within 10% of the built-in composition. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

from benchmarks._common import (
    Stopwatch,
    alternate,
    blas_info,
    environment_info,
    finish,
    fmt_num,
    fmt_ratio,
    fmt_time,
    load_rows,
    load_warning,
    loadavg,
    package_versions,
    print_environment,
    print_table,
    ratio,
    revision_rows,
    summarize,
)

HIDDEN, BATCH, LR = 64, 16, 0.001
#: Issue 12: a user-defined family runs at the speed of a built-in op of the same arithmetic.
TARGET_RATIO = 1.10
#: The control is the built-in composition again: its ratio to the first is run-to-run noise.
CONTENDERS = ("user family", "built-in composition", "Python nn.Op", "control: built-in again")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def silu_modules():
    """The three SiLU modules, by contender name (imports nnjit and the user family)."""
    import numpy as np

    import nnjit as nn
    from benchmarks._custom_silu import silu

    class UserSiLU(nn.Module):
        """SiLU recorded by the user family's recorder: one compiled op."""

        def forward(self, x):
            return silu(x)

    class ComposedSiLU(nn.Module):
        """x * sigmoid(x) from built-in ops: SIGMOID then MUL, both compiled."""

        def forward(self, x):
            return x * nn.functional.sigmoid(x)

    class SiLUOp(nn.Op):
        """SiLU in NumPy on the arena's views (the compiled loop yields to Python here)."""

        def __init__(self, tape, x):
            super().__init__()
            self.x = x
            self.out = tape.alloc_tensor(x.rows, x.cols, True)

        def forward(self):
            x = self.x.data
            np.multiply(x, 0.5 * (1.0 + np.tanh(0.5 * x)), out=self.out.data)

        def backward(self):
            x = self.x.data
            s = 0.5 * (1.0 + np.tanh(0.5 * x))
            self.x.grad[:] += self.out.grad * s * (1.0 + x * (1.0 - s))

    class PythonSiLU(nn.Module):
        def forward(self, x):
            return SiLUOp(x.tape, x).out

    return {"user family": UserSiLU, "built-in composition": ComposedSiLU,
            "Python nn.Op": PythonSiLU, "control: built-in again": ComposedSiLU}


def load_data():
    import nnjit as nn

    X, y = nn.datasets.load_digits()
    X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, 0.2, seed=0)
    X_train, X_test = nn.datasets.standardize(X_train, X_test)
    return X_train, X_test, y_train, y_test


def make_mlp(activation, seed: int):
    import nnjit as nn

    nn.set_seed(seed)
    return nn.Sequential(nn.Linear(64, HIDDEN), activation(), nn.Linear(HIDDEN, 10))


def compile_and_check(modules: dict, data) -> dict:
    """First fit of each contender (compile or cache load, timed apart from the steady state),
    and the user family's outputs against the built-in composition's on the same weights."""
    import numpy as np

    import nnjit as nn

    X_train, X_test, y_train, _ = data
    out = {"first_fit_s": {}}
    models = {}
    for name, activation in modules.items():
        model = make_mlp(activation, 0)
        trainer = nn.Trainer(model, nn.Adam(lr=LR), nn.CrossEntropyLoss())
        with Stopwatch() as sw:
            trainer.fit(nn.DataLoader(X_train, y_train, batch_size=BATCH), epochs=1,
                        verbose=False)
        out["first_fit_s"][name] = sw.seconds
        log(f"  first fit of {name}: {fmt_time(sw.seconds)}")
        models[name] = model
    # Same weights in all three: the outputs must agree (float32 rounding apart).
    reference = models["built-in composition"]
    outputs = {}
    for name, model in models.items():
        model.load_state_dict(reference.state_dict())
        outputs[name] = model.predict(X_test)
    base = outputs["built-in composition"]
    out["max_abs_output_difference"] = {name: float(np.max(np.abs(o - base)))
                                        for name, o in outputs.items()}
    return out


def steady_state(modules: dict, data, epochs: int, repeats: int) -> dict:
    import numpy as np

    import nnjit as nn

    X_train, X_test, y_train, y_test = data

    def contender(activation):
        def run(r: int) -> dict:
            model = make_mlp(activation, r)
            trainer = nn.Trainer(model, nn.Adam(lr=LR), nn.CrossEntropyLoss(), seed=r)
            loader = nn.DataLoader(X_train, y_train, batch_size=BATCH)
            gc.collect()
            with Stopwatch() as sw:
                h = trainer.fit(loader, epochs=epochs, n_iter_no_change=None, verbose=False)
            assert len(h) == epochs, len(h)
            return dict(epoch_median_s=float(h["seconds"].median()),
                        per_epoch_s=sw.seconds / epochs, wall_s=sw.seconds,
                        accuracy=float(np.mean(trainer.predict(X_test) == y_test)),
                        final_train_loss=float(h["train_loss"].iloc[-1]))
        return run

    def progress(name, r, out):
        log(f"  repeat {r + 1}/{repeats} {name}: {fmt_time(out['epoch_median_s'])}/epoch")

    raw = alternate({name: contender(modules[name]) for name in CONTENDERS}, repeats, progress)
    results = {"epochs": epochs, "repeats": repeats, "n_train": len(X_train),
               "steps_per_epoch": -(-len(X_train) // BATCH), "order": list(CONTENDERS),
               "contenders": {}}
    for name, outs in raw.items():
        results["contenders"][name] = {
            k: summarize(o[k] for o in outs)
            for k in ("epoch_median_s", "per_epoch_s", "wall_s", "accuracy", "final_train_loss")}
    return results


def ratios(steady: dict) -> dict:
    """Per-epoch medians of each contender over the built-in composition's, and the user
    family's ratio in each repeat (the contenders alternate, so a repeat is a fair pair)."""
    c = steady["contenders"]

    def median(name, key="epoch_median_s"):
        return c[name][key]["median"]

    base = "built-in composition"

    def per_repeat(name):
        return summarize(ratio(u, b) for u, b in zip(c[name]["epoch_median_s"]["values"],
                                                     c[base]["epoch_median_s"]["values"]))

    user = ratio(median("user family"), median(base))
    return {
        "user_vs_builtin": user,
        "user_vs_builtin_per_repeat": per_repeat("user family"),
        "user_vs_builtin_fastest": ratio(c["user family"]["epoch_median_s"]["min"],
                                         c[base]["epoch_median_s"]["min"]),
        "control_vs_builtin": ratio(median("control: built-in again"), median(base)),
        "control_vs_builtin_per_repeat": per_repeat("control: built-in again"),
        "user_vs_builtin_wall": ratio(median("user family", "per_epoch_s"),
                                      median(base, "per_epoch_s")),
        "python_vs_builtin": ratio(median("Python nn.Op"), median(base)),
        "python_vs_user": ratio(median("Python nn.Op"), median("user family")),
        "target": TARGET_RATIO,
        "status": None if user is None else ("PASS" if user <= TARGET_RATIO else "MISS"),
    }


# -- report --------------------------------------------------------------------------------------
def print_report(res: dict) -> None:
    env = res["environment"]
    print(f"nnjit custom ops benchmark -- Digits 64-{HIDDEN}-10 with SiLU, batch {BATCH}, Adam lr "
          f"{LR}, float32 ({env['cpu_model']}, {env['cpu_affinity']} usable cores)\n", flush=True)
    s = res["steady_state"]
    base = s["contenders"]["built-in composition"]["epoch_median_s"]["median"]
    rows = []
    for name, e in s["contenders"].items():
        em = e["epoch_median_s"]
        rows.append([name, fmt_time(em["median"], "ms"), fmt_time(em["min"], "ms"),
                     fmt_time(em["max"], "ms"), fmt_time(e["per_epoch_s"]["median"], "ms"),
                     fmt_ratio(ratio(em["median"], base)), fmt_num(e["accuracy"]["median"]),
                     fmt_num(e["final_train_loss"]["median"], 4)])
    print_table(["SiLU as", "epoch", "min", "max", "wall/epoch", "vs built-in", "test acc",
                 "train loss"], rows,
                f"1. Per epoch: {s['epochs']} epochs x {s['repeats']} repeats, alternating, "
                f"medians ({s['n_train']} train rows, {s['steps_per_epoch']} steps/epoch)")
    r = res["ratios"]
    pr, cr = r["user_vs_builtin_per_repeat"], r["control_vs_builtin_per_repeat"]
    rows = [["user family / built-in composition (epoch medians)", fmt_ratio(r["user_vs_builtin"])],
            ["  the same per repeat: median (min-max)",
             f"{fmt_ratio(pr['median'])} ({fmt_ratio(pr['min'])}-{fmt_ratio(pr['max'])})"],
            ["  the same on wall time per epoch", fmt_ratio(r["user_vs_builtin_wall"])],
            ["  the same on the fastest repeat of each", fmt_ratio(r["user_vs_builtin_fastest"])],
            ["control (built-in again) / built-in: the noise", fmt_ratio(r["control_vs_builtin"])],
            ["  per repeat: median (min-max)",
             f"{fmt_ratio(cr['median'])} ({fmt_ratio(cr['min'])}-{fmt_ratio(cr['max'])})"],
            ["Python nn.Op / built-in composition", fmt_ratio(r["python_vs_builtin"])],
            ["Python nn.Op / user family", fmt_ratio(r["python_vs_user"])],
            [f"target: user family <= {r['target']:.2f}x built-in", str(r["status"])]]
    print_table(["ratio", "value"], rows, "2. Ratios", align="lr")
    c = res["compile"]
    rows = [[name, fmt_time(t)] for name, t in c["first_fit_s"].items()]
    rows += [[f"max |output - built-in output|, {name}", f"{d:.2e}"]
             for name, d in c["max_abs_output_difference"].items()]
    print_table(["", "value"], rows,
                "3. First fit of each (compile or cache load, 1 epoch) and output agreement on "
                "the same weights", align="lr")
    rows = [["python / numba / numpy", f"{env['python']} / {env['numba']} / {env['numpy']}"],
            *load_rows(env),
            *revision_rows(res)]
    print_environment(rows, res, "4. Environment")


def _warnings(res: dict) -> list[str]:
    out = []
    busy = load_warning(res["environment"], "other processes may have competed for the CPU: "
                                            "compare the min columns and the per-repeat ratios")
    if busy:
        out.append(busy)
    for name, d in res["compile"]["max_abs_output_difference"].items():
        if d > 1e-4:
            out.append(f"{name}: outputs differ from the built-in composition's by {d:.2e}")
    if res["ratios"]["status"] == "MISS":
        out.append(f"the user family took {res['ratios']['user_vs_builtin']:.2f}x the built-in "
                   f"composition's epoch (target <= {TARGET_RATIO:.2f}x)")
    if res["config"]["quick"]:
        out.append("--quick: a smoke run (2 epochs, 1 repeat); the numbers mean nothing")
    return out


# -- main ----------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.custom_ops", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=100, help="epochs per fit (default 100)")
    p.add_argument("--repeats", type=int, default=9, help="repeats of each contender (default 9)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test, the numbers mean nothing: 2 epochs, 1 repeat")
    p.add_argument("--out", default="custom_ops",
                   help="results name or .json path (default custom_ops)")
    args = p.parse_args(argv)
    if args.quick:
        args.epochs, args.repeats = 2, 1
    if args.epochs < 1 or args.repeats < 1:
        p.error("--epochs and --repeats must be at least 1")

    t_start = time.perf_counter()
    load_before = loadavg()
    res: dict = {"benchmark": "custom_ops",
                 "config": dict(quick=args.quick, epochs=args.epochs, repeats=args.repeats,
                                hidden=HIDDEN, batch=BATCH, lr=LR, dtype="float32")}
    from nnjit.train.threads import blas_thread_counts

    modules = silu_modules()
    data = load_data()
    log("1. first fit of each contender (compile or load the builds)")
    res["compile"] = compile_and_check(modules, data)
    log(f"2. steady state ({args.repeats} repeats x {args.epochs} epochs, alternating)")
    res["steady_state"] = steady_state(modules, data, args.epochs, args.repeats)
    res["ratios"] = ratios(res["steady_state"])
    res["environment"] = environment_info(
        loadavg_before=load_before, loadavg_after=loadavg(),
        blas_threads=dict(outside_fit=blas_thread_counts(), libraries=blas_info()),
        versions=package_versions("threadpoolctl", "scipy", "pandas"))
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    return finish(res, args.out, _warnings, print_report)


if __name__ == "__main__":
    main()
