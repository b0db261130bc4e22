"""Recurrent layers (issue 26): nnjit against PyTorch eager on the issue's two targets.

Run from the repository root::

    python -m benchmarks.rnn            # full run: tables + results/rnn.json
    python -m benchmarks.rnn --quick    # tiny subsets, 1 epoch, no compile process (smoke)

Rows (each nnjit/PyTorch pair trains the same architecture from the SAME initial weights, nnjit's
copied into the torch module through the state dict, with Adam lr 1e-3 and the SAME batch order:
the torch loop replays the permutation nnjit's compiled loop draws; the contenders alternate
epoch by epoch, so machine drift spreads over both):

1. Text classification from token ids: ``Embedding(5000, 64) -> LSTM(64, 128) -> last state ->
   Linear(128, 2)``, sequences of 50 tokens, lengths variable (mean ~35: a normal(35, 9)
   clipped to 8..50), batch 32. nnjit takes ``(tokens, lengths)``; PyTorch packs each batch
   (``pack_padded_sequence(..., enforce_sorted=False)``), the way to give it variable lengths.
   Each sequence holds 3 or 5 sentiment words (of 25 positive, 25 negative) among random
   tokens; the label is their majority. Targets: >= 3x PyTorch per epoch, test accuracy within 2
   points.
2. One-step-ahead forecasting: ``GRU(8, 64) -> last state -> Linear(64, 8)`` on windows of 100
   steps of an 8-channel series (sums of sines with noise, standardised), batch 64, MSE.
   Target: >= 3x PyTorch per epoch; test MSE reported for both.
3. NRT allocations per epoch of each nnjit model (must be 0).
4. Compile: one fresh process with an empty ``NUMBA_CACHE_DIR`` fits an MLP (the core build),
   then the GRU forecaster (the recurrent family's float32 build, the core already compiled in
   that process), then the text classifier (adds the embedding family): process CPU seconds of
   each first fit.

Everything runs on one thread (BLAS, ``torch.set_num_threads(1)``) and the process is pinned to
one CPU. Each epoch's process CPU seconds are reported beside its wall time (and their ratio,
``cpu_speedup``): on a machine shared with other jobs the wall ratio moves with their load.
See ``benchmarks/README.md`` ("benchmarks.rnn").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

from benchmarks._common import (
    guarded,
    REPO_ROOT,
    RESULT_MARKER,
    Stopwatch,
    child_env,
    count_nrt_allocations,
    environment_info,
    finish,
    fmt_num,
    fmt_ratio,
    fmt_time,
    load_warning,
    loadavg,
    out_path,
    package_versions,
    pin_to_one_cpu,
    print_environment,
    print_table,
    ratio,
    revision_rows,
    summarize,
    temp_dir,
)

TEXT = {"vocab": 5000, "emb": 64, "hidden": 128, "steps": 50, "mean_length": 35, "batch": 32,
        "lr": 1e-3, "epochs": 5, "n_train": 4096, "n_test": 1024, "seed": 0}
FORECAST = {"channels": 8, "hidden": 64, "steps": 100, "batch": 64, "lr": 1e-3, "epochs": 5,
            "n_train": 2048, "n_test": 512, "seed": 0}
QUICK = {"n_train": 128, "n_test": 64, "epochs": 1}
SPEEDUP, ACC_POINTS = 3.0, 2.0
SECTIONS = ("text", "forecast", "compile")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- data ----------------------------------------------------------------------------------------
def text_data(n: int, seed: int, c=TEXT) -> dict:
    """Token ids (n, T) (0 after each sequence's length), lengths (n, 1) and labels: each
    sequence holds 3 or 5 sentiment words (of 25 positive and 25 negative ones) among random
    tokens, and its label is their majority."""
    words = np.random.default_rng(1234).permutation(np.arange(1, c["vocab"]))[:50]
    rng = np.random.default_rng(seed)
    steps = c["steps"]
    lengths = np.clip(np.round(rng.normal(c["mean_length"], 9, n)), 8, steps).astype(np.int64)
    tokens = rng.integers(1, c["vocab"], (n, steps))
    tokens[np.isin(tokens, words)] = 1
    y = np.zeros(n, np.int64)
    for b in range(n):
        picks = rng.integers(0, 50, rng.choice([3, 5]))
        tokens[b, rng.choice(lengths[b], len(picks), replace=False)] = words[picks]
        y[b] = int((picks < 25).sum() * 2 > len(picks))
    tokens[np.arange(steps)[None, :] >= lengths[:, None]] = 0
    return {"inputs": (tokens, lengths[:, None]), "y": y, "mean_length": float(lengths.mean())}


def series_data(n: int, seed: int, c=FORECAST) -> dict:
    """Windows (n, T, C) of a standardised C-channel series and each window's next step."""
    rng = np.random.default_rng(seed)
    length = n + c["steps"] + 1
    t = np.arange(length)[:, None]
    periods = rng.uniform(8, 60, (3, c["channels"]))
    phases = rng.uniform(0, 2 * np.pi, (3, c["channels"]))
    s = sum(np.sin(2 * np.pi * t / periods[k] + phases[k]) for k in range(3))
    s = s + rng.normal(0, 0.1, s.shape)
    s = ((s - s.mean(0)) / s.std(0)).astype(np.float32)
    idx = np.arange(n)[:, None] + np.arange(c["steps"])[None, :]
    return {"inputs": (np.ascontiguousarray(s[idx]),), "y": s[c["steps"]:c["steps"] + n]}


# -- models (nnjit and torch, the same attribute names so the state dicts map 1:1) ---------------
def nnjit_text(nj, c=TEXT):
    nn = nj.nn

    class TextLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(c["vocab"], c["emb"])
            self.rnn = nn.LSTM(c["emb"], c["hidden"], batch_first=True)
            self.fc = nn.Linear(c["hidden"], 2, init="torch")

        def forward(self, tokens, lengths):
            _, (h_n, _) = self.rnn(self.emb(tokens), lengths=lengths)
            return self.fc(h_n.view(-1, c["hidden"]))

    return TextLSTM()


def torch_text(c=TEXT):
    import torch

    class TextLSTM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(c["vocab"], c["emb"])
            self.rnn = torch.nn.LSTM(c["emb"], c["hidden"], batch_first=True)
            self.fc = torch.nn.Linear(c["hidden"], 2)

        def forward(self, tokens, lengths):
            packed = torch.nn.utils.rnn.pack_padded_sequence(
                self.emb(tokens), lengths.view(-1), batch_first=True, enforce_sorted=False)
            _, (h_n, _) = self.rnn(packed)
            return self.fc(h_n[-1])

    return TextLSTM()


def nnjit_forecaster(nj, c=FORECAST):
    nn = nj.nn

    class Forecaster(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(c["channels"], c["hidden"], batch_first=True)
            self.fc = nn.Linear(c["hidden"], c["channels"], init="torch")

        def forward(self, x):
            _, h_n = self.rnn(x)
            return self.fc(h_n.view(-1, c["hidden"]))

    return Forecaster()


def torch_forecaster(c=FORECAST):
    import torch

    class Forecaster(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(c["channels"], c["hidden"], batch_first=True)
            self.fc = torch.nn.Linear(c["hidden"], c["channels"])

        def forward(self, x):
            _, h_n = self.rnn(x)
            return self.fc(h_n[-1])

    return Forecaster()


# -- the paired runs -----------------------------------------------------------------------------
class Pair:
    """An nnjit trainer and a torch module with the same initial weights, trained epoch by epoch
    (alternating) on the same batches; ``classify``: cross-entropy, else MSE."""

    def __init__(self, nj, torch, model, tmodel, data: dict, c: dict, classify: bool):
        self.torch, self.batch, self.classify = torch, c["batch"], classify
        self.inputs, self.y = data["inputs"], data["y"]
        tmodel.load_state_dict({k: torch.from_numpy(np.array(v))
                                for k, v in model.state_dict().items()})
        loss = nj.CrossEntropyLoss() if classify else nj.MSELoss()
        self.trainer = nj.Trainer(model, nj.Adam(lr=c["lr"]), loss, seed=c["seed"])
        X = self.inputs if len(self.inputs) > 1 else self.inputs[0]
        self.loader = nj.DataLoader(X, self.y, batch_size=self.batch)
        self.tmodel = tmodel
        self.topt = torch.optim.Adam(tmodel.parameters(), lr=c["lr"])
        self.tloss = torch.nn.CrossEntropyLoss() if classify else torch.nn.MSELoss()
        self.tinputs = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in self.inputs)
        self.ty = torch.from_numpy(np.ascontiguousarray(self.y))
        from nnjit.kernels.rng import seed_state  # nnjit's per-epoch shuffle, replayed

        self.perm = np.arange(len(self.y), dtype=np.int64)
        self.rng = seed_state(c["seed"])
        self.same_order = []

    def nnjit_epoch(self) -> dict:
        with Stopwatch() as sw:
            h = self.trainer.fit(self.loader, epochs=1, n_iter_no_change=None, verbose=0)
        return {"epoch_s": sw.seconds, "cpu_s": sw.cpu, "loss": float(h["train_loss"].iloc[-1])}

    def torch_epoch(self) -> dict:
        from nnjit.kernels.rng import shuffle

        shuffle(self.perm, self.rng)
        if self.trainer._perm is not None:
            self.same_order.append(bool(np.array_equal(self.perm, self.trainer._perm)))
        perm, b, model = self.torch.from_numpy(self.perm.copy()), self.batch, self.tmodel
        model.train()
        loss_sum = 0.0
        with Stopwatch() as sw:
            for i in range(0, len(perm), b):
                idx = perm[i:i + b]
                self.topt.zero_grad(set_to_none=True)
                loss = self.tloss(model(*(a[idx] for a in self.tinputs)), self.ty[idx])
                loss.backward()
                self.topt.step()
                loss_sum += loss.item() * len(idx)
        return {"epoch_s": sw.seconds, "cpu_s": sw.cpu, "loss": loss_sum / len(perm)}

    def scores(self, test: dict) -> dict:
        """Test accuracy (classification) or MSE of both contenders."""
        torch = self.torch
        X = test["inputs"] if len(test["inputs"]) > 1 else test["inputs"][0]
        out = self.trainer.predict_outputs(X)
        self.tmodel.eval()
        with torch.no_grad():
            tout = self.tmodel(*(torch.from_numpy(np.ascontiguousarray(a))
                                 for a in test["inputs"])).numpy()
        if self.classify:
            return {k: float((o.argmax(1) == test["y"]).mean())
                    for k, o in (("nnjit", out), ("PyTorch", tout))}
        return {k: float(((o - test["y"]) ** 2).mean()) for k, o in (("nnjit", out),
                                                                    ("PyTorch", tout))}


def run_section(nj, torch, quick: bool, label: str, c: dict, make_data, nnjit_model,
                torch_model, classify: bool) -> dict:
    n_train = QUICK["n_train"] if quick else c["n_train"]
    n_test = QUICK["n_test"] if quick else c["n_test"]
    epochs = QUICK["epochs"] if quick else c["epochs"]
    train, test = make_data(n_train, c["seed"]), make_data(n_test, c["seed"] + 1)

    def make(rows=None):
        data = train if rows is None else {"inputs": tuple(a[:rows] for a in train["inputs"]),
                                           "y": train["y"][:rows]}
        with nj.seeded(c["seed"]):
            model = nnjit_model(nj)
        return Pair(nj, torch, model, torch_model(), data, c, classify)

    with Stopwatch() as sw:  # compile or cache load, torch's first calls
        warm = make(2 * c["batch"])
        warm.nnjit_epoch()
        warm.torch_epoch()
    log(f"  {label}: warm-up {fmt_time(sw.seconds)}")
    pair = make()
    runs = {"nnjit": [], "PyTorch": []}
    for e in range(epochs):
        runs["nnjit"].append(pair.nnjit_epoch())
        runs["PyTorch"].append(pair.torch_epoch())
        log(f"    {label} epoch {e + 1}: nnjit {fmt_time(runs['nnjit'][-1]['epoch_s'])} (CPU "
            f"{fmt_time(runs['nnjit'][-1]['cpu_s'])}, loss "
            f"{runs['nnjit'][-1]['loss']:.4f}), PyTorch {fmt_time(runs['PyTorch'][-1]['epoch_s'])}"
            f" (CPU {fmt_time(runs['PyTorch'][-1]['cpu_s'])})"
            f" (loss {runs['PyTorch'][-1]['loss']:.4f})")
    out = {k: {"epoch_s": summarize(r["epoch_s"] for r in rs),
               "cpu_s": summarize(r["cpu_s"] for r in rs),
               "train_loss": [r["loss"] for r in rs]} for k, rs in runs.items()}
    out["speedup"] = ratio(out["PyTorch"]["epoch_s"]["median"], out["nnjit"]["epoch_s"]["median"])
    # (process CPU per epoch: on a loaded machine the wall ratio moves with the other jobs)
    out["cpu_speedup"] = ratio(out["PyTorch"]["cpu_s"]["median"], out["nnjit"]["cpu_s"]["median"])
    out["same_batch_order"] = bool(pair.same_order) and all(pair.same_order)
    out["test"] = pair.scores(test)
    out["batches_per_epoch"] = -(-n_train // c["batch"])
    if "mean_length" in train:
        out["mean_length"] = train["mean_length"]
    nrt = make(2 * c["batch"])

    def fit(k):
        return nrt.trainer.fit(nrt.loader, epochs=k, n_iter_no_change=None, verbose=0)

    fit(1)
    short, long = (1, 2) if quick else (2, 12)
    a, b = count_nrt_allocations(fit, (short, long))
    out["nrt"] = {"epochs": [short, long], "per_epoch": (b["alloc"] - a["alloc"]) / (long - short)}
    out.update(warmup_s=sw.seconds, rows=n_train, test_rows=n_test, epochs=epochs, settings=c)
    log(f"  {label}: {out['speedup'] and round(out['speedup'], 2)}x, test "
        f"{'accuracy' if classify else 'MSE'} {out['test']}")
    return out


def text_section(nj, torch, quick: bool) -> dict:
    return run_section(nj, torch, quick, "text LSTM", TEXT, text_data, nnjit_text, torch_text,
                       classify=True)


def forecast_section(nj, torch, quick: bool) -> dict:
    return run_section(nj, torch, quick, "GRU forecaster", FORECAST, series_data,
                       nnjit_forecaster, torch_forecaster, classify=False)


COMPILE_CHILD = """
import time
import numpy as np
from benchmarks._common import emit_result
from benchmarks.rnn import TEXT, FORECAST, nnjit_forecaster, nnjit_text, series_data, text_data
import nnjit
out = {}
rng = np.random.default_rng(0)
mlp = (lambda nj: nj.nn.Sequential(nj.nn.Linear(8, 16), nj.nn.ReLU(), nj.nn.Linear(16, 2)),
       {"inputs": (rng.normal(size=(64, 8)).astype(np.float32),), "y": rng.integers(0, 2, 64)},
       nnjit.CrossEntropyLoss)
models = {"MLP (core only)": mlp,
          "GRU forecaster (+ recurrent)": (nnjit_forecaster, series_data(64, 0), nnjit.MSELoss),
          "LSTM text classifier (+ embedding)": (nnjit_text, text_data(64, 0),
                                                 nnjit.CrossEntropyLoss)}
for name, (build, data, loss) in models.items():
    trainer = nnjit.Trainer(build(nnjit), nnjit.Adam(), loss(), seed=0)
    X = data["inputs"] if len(data["inputs"]) > 1 else data["inputs"][0]
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.fit(nnjit.DataLoader(X, data["y"], batch_size=16), epochs=1, n_iter_no_change=None,
                verbose=0)
    out[name] = {"first_fit_s": time.perf_counter() - t0,
                 "first_fit_cpu_s": time.process_time() - c0,
                 "families": [f.name for f in trainer.program.families if not f.core]}
emit_result(out)
"""


def compile_section() -> dict:
    with temp_dir("nnjit-rnn-cache-") as cache:
        proc = subprocess.run([sys.executable, "-c", COMPILE_CHILD], cwd=REPO_ROOT,
                              env=child_env(NUMBA_CACHE_DIR=cache), capture_output=True,
                              text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        return {"error": f"compile child failed (exit {proc.returncode}): {proc.stderr[-2000:]}"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    rows = json.loads(lines[-1][len(RESULT_MARKER):])
    for name, r in rows.items():
        log(f"    {name}: first fit {fmt_time(r['first_fit_s'])}, "
            f"{r['first_fit_cpu_s']:.1f} s CPU")
    return {"models": rows}


# -- targets and report --------------------------------------------------------------------------
def targets(res: dict) -> list[dict]:
    rows = []

    def add(what, value, ok):
        rows.append({"what": what, "value": value,
                     "status": "not run" if ok is None else ("PASS" if ok else "MISS")})

    for key, name in (("text", "LSTM text classifier"), ("forecast", "GRU forecaster")):
        r = res.get(key) or {}
        s = r.get("speedup")
        add(f"{name}: >= {SPEEDUP:g}x PyTorch per epoch", fmt_ratio(s),
            None if s is None else s >= SPEEDUP)
        nrt = (r.get("nrt") or {}).get("per_epoch")
        add(f"{name}: 0 NRT allocations per epoch", fmt_num(nrt), None if nrt is None
            else nrt == 0)
    acc = (res.get("text") or {}).get("test")
    points = None if not acc else 100 * abs(acc["nnjit"] - acc["PyTorch"])
    add(f"text classifier: test accuracy within {ACC_POINTS:g} points of PyTorch's",
        "-" if points is None else f"{points:.2f} points", None if points is None
        else points <= ACC_POINTS)
    return rows


def print_report(res: dict) -> None:
    rows = []
    for key, name in (("text", "LSTM text classifier"), ("forecast", "GRU forecaster")):
        r = res.get(key)
        if not r or "error" in r or "skipped" in r:
            rows.append([name, "-", "-", "-", "-", "-", (r or {}).get("error", "not run")])
            continue
        metric = "acc" if key == "text" else "MSE"
        rows.append([name, fmt_time(r["nnjit"]["epoch_s"]["median"]),
                     fmt_time(r["PyTorch"]["epoch_s"]["median"]), fmt_ratio(r["speedup"]),
                     (f"{fmt_time(r['nnjit']['cpu_s']['median'])} / "
                      f"{fmt_time(r['PyTorch']['cpu_s']['median'])}, "
                      f"{fmt_ratio(r['cpu_speedup'])}"),
                     f"{metric} {r['test']['nnjit']:.4f} / {r['test']['PyTorch']:.4f}",
                     (f"{r['epochs']} epochs of {r['batches_per_epoch']} batches, same order: "
                      f"{r['same_batch_order']}")])
    print_table(["model", "nnjit / epoch", "PyTorch / epoch", "speed-up",
                 "CPU per epoch, nnjit / torch", "test nnjit / torch", "note"], rows,
                title="Recurrent layers against PyTorch (1 thread, medians)", align="lllllll")
    comp = res.get("compile")
    if comp and "models" in comp:
        print_table(["first fit in a fresh process, empty cache", "wall", "CPU", "families"],
                    [[k, fmt_time(v["first_fit_s"]), f"{v['first_fit_cpu_s']:.1f} s",
                      ", ".join(v["families"]) or "core"] for k, v in comp["models"].items()],
                    title="Cold compile", align="llll")
    print_table(["target", "measured", "status"],
                [[t["what"], t["value"], t["status"]] for t in res["targets"]], title="Targets",
                align="lll")
    print_environment(revision_rows(res), res, "Environment")


def _warnings(res: dict) -> list[str]:
    w = [load_warning(res["environment"])]
    for key in ("text", "forecast"):
        r = res.get(key) or {}
        if "same_batch_order" in r and not r["same_batch_order"]:
            w.append(f"{key}: PyTorch did not replay nnjit's batch order")
    return [x for x in w if x]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.rnn", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny subsets, 1 epoch, no compile process (smoke test)")
    p.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    p.add_argument("--only", default=",".join(SECTIONS),
                   help=f"comma-separated subset of {','.join(SECTIONS)} (default all)")
    p.add_argument("--out", default="rnn", help="results name, .json path or directory")
    args = p.parse_args(argv)
    only = {k.strip() for k in args.only.split(",") if k.strip()}
    if only - set(SECTIONS):
        p.error(f"unknown sections {sorted(only - set(SECTIONS))}; valid: {', '.join(SECTIONS)}")
    t_start = time.perf_counter()
    load_before = loadavg()
    pinned = None if args.no_pin else pin_to_one_cpu()
    import scipy.linalg.cython_blas  # noqa: F401  (load scipy's BLAS before limiting it)
    from threadpoolctl import threadpool_limits

    import nnjit
    from benchmarks.peers import torch_missing, torch_setup_threads

    why = torch_missing()
    if why:
        raise SystemExit(f"benchmarks.rnn compares with PyTorch: {why}")
    import torch

    torch_threads = torch_setup_threads()
    res: dict = {"benchmark": "rnn", "config": {"quick": args.quick, "text": TEXT,
                                                 "forecast": FORECAST, "pin": not args.no_pin,
                                                 "quick_sizes": QUICK if args.quick else None}}
    with threadpool_limits(limits=1, user_api="blas"):
        for key, title, fn in (("text", "1. LSTM text classifier", text_section),
                               ("forecast", "2. GRU forecaster", forecast_section)):
            if key in only:
                log(title)
                res[key] = guarded(fn, nnjit, torch, args.quick)
            else:
                res[key] = {"skipped": "not in --only"}
    if args.quick or "compile" not in only:
        res["compile"] = None
    else:
        log("4. cold compile (fresh process, empty cache)")
        res["compile"] = guarded(compile_section)
    res["targets"] = targets(res)
    res["environment"] = environment_info(
        loadavg_before=load_before, loadavg_after=loadavg(), pinned=pinned,
        versions=package_versions("torch", "threadpoolctl"), torch_threads=torch_threads)
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    finish(res, out_path(args.out, "rnn"), _warnings, print_report)
    failed = [k for k in ("text", "forecast", "compile")
              if isinstance(res.get(k), dict) and "error" in res[k]]
    if failed:
        raise SystemExit(f"benchmarks.rnn: sections failed: {', '.join(failed)}")
    return res


if __name__ == "__main__":
    main()
