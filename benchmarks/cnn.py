"""Convolutions, pooling, normalisation and embeddings (issue 13): nnjit against PyTorch eager.

Run from the repository root::

    python -m benchmarks.cnn            # full run: tables + results/cnn.json
    python -m benchmarks.cnn --quick    # tiny subsets, 1 epoch, no compile processes (smoke)

Rows (every nnjit/PyTorch pair trains the same architecture from the SAME initial weights,
nnjit's PyTorch-scheme initialisation copied into the torch module through the state dict, with
Adam and the SAME batch order: the torch loop replays the permutations nnjit's compiled loop
draws, ``nnjit.kernels.rng.shuffle`` on the trainer's seeded state; the two contenders alternate
epoch by epoch, so machine drift spreads over both):

1. LeNet-5 on Fashion-MNIST 28x28 (``conv 6@5x5 pad 2 - ReLU - maxpool 2 - conv 16@5x5 - ReLU -
   maxpool 2 - flatten - 120 - ReLU - 84 - ReLU - 10``), batch 64, Adam lr 1e-3, 5 epochs: median
   time per epoch and test accuracy after the same epochs. Targets: nnjit >= 3x faster (issue
   22), accuracy within 0.5 points of PyTorch's, both >= 0.88.
2. The 3x3 convolution stack (32 -> 64 -> 64 channels, 32x32, batch 64): forward + backward FLOP
   rate against the 1-thread GEMM peak, from ``benchmarks.conv_stack.measure_conv_stack()``.
   Target: >= 80% of the peak (issue 22).
3. Olivetti faces 64x64 (``conv 16@5x5 - LeakyReLU - maxpool 2 - conv 32@3x3 - LeakyReLU -
   maxpool 2 - flatten - dense 40``), batch 32, on the seed table's split (seed 44, 80/20
   stratified, standardised with the training part's statistics); the CNNs train on the whole
   training part for a fixed number of epochs; scikit-learn's ``MLPClassifier`` runs the seed
   table's protocol (128 hidden units, early stopping on its own validation fraction).
4. Tabular with categorical columns: a synthetic table with known signal (numeric columns plus
   categorical ones whose per-category effects enter the logit), an embedding MLP
   (``forward(self, x_num, x_cat)``: one ``Embedding`` per categorical column, concatenated with
   the numeric columns, 64 - 64 - 2) against the same in PyTorch: accuracy (and the accuracy of
   the true noiseless logit) and the per-epoch ratio.
5. VGG-style net on Fashion-MNIST (issue 22; ``benchmarks.vgg``: ``conv 32@3x3 pad 1 - BatchNorm -
   ReLU - conv 32@3x3 pad 1 - ReLU - maxpool 2 - conv 64@3x3 pad 1 - BatchNorm - ReLU - maxpool 2
   - flatten - 10``) on the first 6,000 training images, batch 64, Adam lr 1e-3, 3 epochs, like
   LeNet-5. Targets: nnjit >= 1.5x faster, accuracy within 0.5 points of PyTorch's. Then each
   convolution's products alone at batch 64, per direction (forward, weight gradient, input
   gradient): nnjit's conv kernels and PyTorch's, GFLOP/s against the 1-thread GEMM peak.
6. Memory: the arena (``program.values`` + ``program.grads``) of every nnjit model, and the NRT
   allocations of a 2-epoch and a 12-epoch fit (per epoch must be 0).
7. Compile: one fresh process with an empty ``NUMBA_CACHE_DIR`` fits, in turn, an MLP (the core
   build), then one small model per new op family; each model's first fit is its build's cold
   compile (the core kernels are already compiled in that process, so the later rows are each
   family's extra cost). The MLP's cold compile is compared with ``benchmarks.core``'s
   (results/core.json of the same machine) when that file exists.

Everything runs on one thread (BLAS, ``torch.set_num_threads(1)``) and the process is pinned to
one CPU. See ``benchmarks/README.md`` ("benchmarks.cnn").
"""

from __future__ import annotations

import argparse
import functools
import inspect
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
    dir_size,
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
    shared_data_path,
    summarize,
    temp_dir,
)

LENET = dict(batch=64, lr=1e-3, epochs=5, seed=0)
OLIVETTI = dict(batch=32, lr=1e-3, epochs=30, seed=44)
TABULAR = dict(batch=128, lr=1e-3, epochs=5, seed=0, n_train=20000, n_test=5000, n_num=8,
               cards=(12, 40, 100), emb_dim=8, hidden=64)
VGG = {"batch": 64, "lr": 1e-3, "epochs": 3, "seed": 0, "n_train": 6000}
#: The VGG-style net's per-layer timings: best of ``repeats`` trials of >= ``min_trial_s`` each.
VGG_TIMING = {"repeats": 5, "min_trial_s": 0.3, "peak_trials": 5}
#: The rows, in order (--only picks some).
SECTIONS = ("lenet", "conv_stack", "olivetti", "tabular", "vgg", "compile")
#: The issues' targets (13; 22 for the VGG-style net).
LENET_SPEEDUP, LENET_ACC_POINTS, LENET_MIN_ACC = 3.0, 0.5, 0.88
CONV_STACK_FRACTION = 0.80
VGG_SPEEDUP, VGG_ACC_POINTS = 1.5, 0.5
#: In --quick: rows per part and epochs (checks that everything runs; numbers mean nothing).
QUICK = dict(lenet_train=256, lenet_test=256, faces_train=64, tab_train=1024, tab_test=256,
             epochs=1, warm_rows=64)
#: In --quick: one short trial of each timed kernel and of the GEMM peak.
QUICK_TIMING = {"repeats": 1, "min_trial_s": 0.05, "peak_trials": 1}
#: Rows of the small copy that warms up each pair and counts NRT allocations (full runs).
WARM_ROWS = 512


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- models (nnjit and torch, the same attribute names so the state dicts map 1:1) ---------------
def nnjit_lenet(nj):
    nn, F = nj.nn, nj.nn.functional

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.pool1, self.pool2 = nn.MaxPool2d(2), nn.MaxPool2d(2)
            self.fc1 = nn.Linear(16 * 5 * 5, 120, init="torch")
            self.fc2 = nn.Linear(120, 84, init="torch")
            self.fc3 = nn.Linear(84, 10, init="torch")

        def forward(self, x):
            x = x.view(-1, 1, 28, 28)
            x = self.pool1(F.relu(self.conv1(x)))
            x = self.pool2(F.relu(self.conv2(x)))
            x = x.flatten(1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    return LeNet5()


def torch_lenet():
    import torch
    F = torch.nn.functional

    class LeNet5(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 6, 5, padding=2)
            self.conv2 = torch.nn.Conv2d(6, 16, 5)
            self.pool1, self.pool2 = torch.nn.MaxPool2d(2), torch.nn.MaxPool2d(2)
            self.fc1 = torch.nn.Linear(16 * 5 * 5, 120)
            self.fc2 = torch.nn.Linear(120, 84)
            self.fc3 = torch.nn.Linear(84, 10)

        def forward(self, x):
            x = x.view(-1, 1, 28, 28)
            x = self.pool1(F.relu(self.conv1(x)))
            x = self.pool2(F.relu(self.conv2(x)))
            x = x.flatten(1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    return LeNet5()


def nnjit_faces_cnn(nj, n_classes: int = 40):
    nn, F = nj.nn, nj.nn.functional

    class FacesCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 5)
            self.conv2 = nn.Conv2d(16, 32, 3)
            self.pool1, self.pool2 = nn.MaxPool2d(2), nn.MaxPool2d(2)
            self.fc = nn.Linear(32 * 14 * 14, n_classes, init="torch")

        def forward(self, x):
            x = x.view(-1, 1, 64, 64)
            x = self.pool1(F.leaky_relu(self.conv1(x)))
            x = self.pool2(F.leaky_relu(self.conv2(x)))
            return self.fc(x.flatten(1))

    return FacesCNN()


def torch_faces_cnn(n_classes: int = 40):
    import torch
    F = torch.nn.functional

    class FacesCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 16, 5)
            self.conv2 = torch.nn.Conv2d(16, 32, 3)
            self.pool1, self.pool2 = torch.nn.MaxPool2d(2), torch.nn.MaxPool2d(2)
            self.fc = torch.nn.Linear(32 * 14 * 14, n_classes)

        def forward(self, x):
            x = x.view(-1, 1, 64, 64)
            x = self.pool1(F.leaky_relu(self.conv1(x)))
            x = self.pool2(F.leaky_relu(self.conv2(x)))
            return self.fc(x.flatten(1))

    return FacesCNN()


def nnjit_embedding_mlp(nj, n_num: int, cards, emb_dim: int, hidden: int):
    nn, F = nj.nn, nj.nn.functional

    class EmbeddingMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_cat = len(cards)
            for j, card in enumerate(cards):
                setattr(self, f"emb{j}", nn.Embedding(card, emb_dim))
            self.fc1 = nn.Linear(n_num + emb_dim * len(cards), hidden, init="torch")
            self.fc2 = nn.Linear(hidden, hidden, init="torch")
            self.out = nn.Linear(hidden, 2, init="torch")

        def forward(self, x_num, x_cat):
            parts = [x_num] + [getattr(self, f"emb{j}")(x_cat[:, j]) for j in range(self.n_cat)]
            h = F.relu(self.fc1(F.cat(parts, dim=1)))
            return self.out(F.relu(self.fc2(h)))

    return EmbeddingMLP()


def torch_embedding_mlp(n_num: int, cards, emb_dim: int, hidden: int):
    import torch
    F = torch.nn.functional

    class EmbeddingMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n_cat = len(cards)
            for j, card in enumerate(cards):
                setattr(self, f"emb{j}", torch.nn.Embedding(card, emb_dim))
            self.fc1 = torch.nn.Linear(n_num + emb_dim * len(cards), hidden)
            self.fc2 = torch.nn.Linear(hidden, hidden)
            self.out = torch.nn.Linear(hidden, 2)

        def forward(self, x_num, x_cat):
            parts = [x_num] + [getattr(self, f"emb{j}")(x_cat[:, j]) for j in range(self.n_cat)]
            h = F.relu(self.fc1(torch.cat(parts, dim=1)))
            return self.out(F.relu(self.fc2(h)))

    return EmbeddingMLP()


# -- data ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=2)
def fashion_mnist(nj, quick: bool) -> dict | None:
    """Flat float32 rows (the models view them as 1x28x28) standardised with the training
    images' pixel mean and std (torchvision's ``Normalize((0.2860,), (0.3530,))``), or None
    without the file. Read once per process: LeNet-5 and the VGG-style net train on the same
    rows, and reading them costs ~2 s of CPU."""
    path = shared_data_path("fashion_mnist.npz")
    if path is None:
        return None
    d = nj.datasets.load_fashion_mnist(path, flatten=True)
    X, Xt, y, yt = d.X_train, d.X_test, d.y_train, d.y_test
    mean, std = np.float32(X.mean(dtype=np.float64)), np.float32(X.std(dtype=np.float64))
    X, Xt = (X - mean) / std, (Xt - mean) / std
    if quick:
        X, y, Xt, yt = X[:QUICK["lenet_train"]], y[:QUICK["lenet_train"]], \
            Xt[:QUICK["lenet_test"]], yt[:QUICK["lenet_test"]]
    return dict(X=X, y=y, X_test=Xt, y_test=yt, source=str(path))


def olivetti_split(quick: bool) -> dict:
    """The seed table's Olivetti split (seed 44) as ``benchmarks.seed_table.prepare`` makes it."""
    from benchmarks.seed_table import prepare

    d = prepare("Olivetti", OLIVETTI["seed"])
    d["X_cnn"] = np.ascontiguousarray(d["X_train"], dtype=np.float32)
    d["y_cnn"] = np.ascontiguousarray(d["y_train"], dtype=np.int64)
    return d


def synthetic_table(n_train: int, n_test: int, seed: int = 0) -> dict:
    """Numeric columns ``N(0, 1)`` and categorical columns uniform over their categories; the
    label is 1 when ``x_num @ w + sum_j effect_j[cat_j] + logistic noise > 0``. ``bayes_acc`` is
    the test accuracy of the noiseless logit's sign (the best any model can expect)."""
    c = TABULAR
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    X_num = rng.standard_normal((n, c["n_num"])).astype(np.float32)
    X_cat = np.stack([rng.integers(0, k, n) for k in c["cards"]], axis=1).astype(np.int64)
    w = rng.normal(0, 0.6, c["n_num"])
    effects = [rng.normal(0, 1.2, k) for k in c["cards"]]
    logit = X_num @ w + sum(e[X_cat[:, j]] for j, e in enumerate(effects))
    y = (logit + rng.logistic(size=n) > 0).astype(np.int64)
    bayes = float(np.mean((logit[n_train:] > 0) == y[n_train:]))
    return dict(X_num=X_num[:n_train], X_cat=X_cat[:n_train], y=y[:n_train],
                X_num_test=X_num[n_train:], X_cat_test=X_cat[n_train:], y_test=y[n_train:],
                bayes_acc=bayes, positive_rate=float(y.mean()))


# -- the paired runs -----------------------------------------------------------------------------
class Pair:
    """An nnjit trainer and a torch module with the same initial weights, trained epoch by epoch
    (alternating) on the same batches."""

    def __init__(self, nj, torch, nn_model, torch_model, inputs, y, batch: int, lr: float,
                 seed: int):
        self.torch, self.batch = torch, batch
        self.inputs, self.y = inputs, y  # inputs: a tuple of arrays (one per forward argument)
        torch_model.load_state_dict({k: torch.from_numpy(np.array(v))
                                     for k, v in nn_model.state_dict().items()})
        self.trainer = nj.Trainer(nn_model, nj.Adam(lr=lr), nj.CrossEntropyLoss(), seed=seed)
        self.loader = nj.DataLoader(inputs if len(inputs) > 1 else inputs[0], y,
                                    batch_size=batch)
        self.tmodel = torch_model
        self.topt = torch.optim.Adam(torch_model.parameters(), lr=lr)
        self.tloss = torch.nn.CrossEntropyLoss()
        self.tinputs = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in inputs)
        self.ty = torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64))
        # nnjit's batch order: its compiled loop shuffles one permutation in place per epoch
        from nnjit.kernels.rng import seed_state
        self.perm = np.arange(len(y), dtype=np.int64)
        self.rng = seed_state(seed)
        self.same_order = []

    def nnjit_epoch(self, _r=None) -> dict:
        with Stopwatch() as sw:
            h = self.trainer.fit(self.loader, epochs=1, n_iter_no_change=None, verbose=0)
        return {"epoch_s": sw.seconds, "cpu_s": sw.cpu, "timer_s": float(h["seconds"].iloc[-1]),
                "loss": float(h["train_loss"].iloc[-1])}

    def torch_epoch(self, _r=None) -> dict:
        from nnjit.kernels.rng import shuffle

        shuffle(self.perm, self.rng)  # the permutation nnjit drew for the same epoch
        if self.trainer._perm is not None:
            self.same_order.append(bool(np.array_equal(self.perm, self.trainer._perm)))
        torch, model, b = self.torch, self.tmodel, self.batch
        perm = torch.from_numpy(self.perm.copy())
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

    def accuracies(self, test_inputs, y_test) -> dict:
        torch = self.torch
        nn_acc = self.trainer.evaluate(test_inputs if len(test_inputs) > 1 else test_inputs[0],
                                       y_test)["accuracy"]
        self.tmodel.eval()
        with torch.no_grad():
            out = self.tmodel(*(torch.from_numpy(np.ascontiguousarray(a)) for a in test_inputs))
        t_acc = float((out.argmax(1).numpy() == y_test).mean())
        return {"nnjit": float(nn_acc), "PyTorch": t_acc}

    def arena_bytes(self) -> int:
        p = self.trainer.program
        return int(p.values.nbytes + p.grads.nbytes)


def run_pair(pair: Pair, epochs: int, label: str) -> dict:
    """``epochs`` epochs of each contender, alternating nnjit, torch, nnjit, ..."""
    runs = {"nnjit": [], "PyTorch": []}
    for e in range(epochs):
        runs["nnjit"].append(pair.nnjit_epoch())
        runs["PyTorch"].append(pair.torch_epoch())
        log(f"    {label} epoch {e + 1}: nnjit {fmt_time(runs['nnjit'][-1]['epoch_s'])} "
            f"(loss {runs['nnjit'][-1]['loss']:.4f}), PyTorch "
            f"{fmt_time(runs['PyTorch'][-1]['epoch_s'])} (loss {runs['PyTorch'][-1]['loss']:.4f})")
    out = {}
    for c, rs in runs.items():
        out[c] = {"epoch_s": summarize(r["epoch_s"] for r in rs),
                  "cpu_epoch_s": summarize(r["cpu_s"] for r in rs),
                  "train_loss": [r["loss"] for r in rs], "epochs": len(rs)}
    out["nnjit"]["epoch_timer_s"] = summarize(r["timer_s"] for r in runs["nnjit"])
    out["same_batch_order"] = bool(pair.same_order) and all(pair.same_order)
    out["speedup"] = ratio(out["PyTorch"]["epoch_s"]["median"], out["nnjit"]["epoch_s"]["median"])
    return out


def warm_up(pair_factory, label: str) -> float:
    """A first fit of a throw-away pair (nnjit's compile or cache load, torch's first calls)."""
    with Stopwatch() as sw:
        p = pair_factory(warm=True)
        p.nnjit_epoch()
        p.torch_epoch()
    log(f"  {label}: warm-up (compile or cache load) {fmt_time(sw.seconds)}")
    return sw.seconds


def nrt_per_epoch(pair_factory, quick: bool) -> dict:
    """NRT allocations of a short and a long fit of a fresh small trainer after one warm-up fit
    (2 and 12 epochs; --quick: 1 and 2): the difference per epoch must be 0."""
    p = pair_factory(warm=True)
    fit = lambda k: p.trainer.fit(p.loader, epochs=k, n_iter_no_change=None, verbose=0)  # noqa
    fit(1)
    short, long = (1, 2) if quick else (2, 12)
    a, b = count_nrt_allocations(fit, (short, long))
    return {"epochs": [short, long], "alloc": [a["alloc"], b["alloc"]],
            "per_epoch": (b["alloc"] - a["alloc"]) / (long - short)}


# -- sections ------------------------------------------------------------------------------------
def fashion_mnist_pair(nj, torch, quick: bool, label: str, c: dict, nnjit_model,
                       torch_model) -> dict:
    """A pair (``nnjit_model(nj)``, ``torch_model()``) trained with the settings ``c`` on the
    Fashion-MNIST training images (the first ``c["n_train"]`` when given) and tested on the test
    images; ``{"skipped": ...}`` without the file."""
    data = fashion_mnist(nj, quick)
    if data is None:
        return {"skipped": "fashion_mnist.npz not in the shared data folder (or "
                           "$NNJIT_SHARED_DATA)"}
    n = c.get("n_train", len(data["y"]))
    X_train, y_train = data["X"][:n], data["y"][:n]
    epochs = QUICK["epochs"] if quick else c["epochs"]

    def make(warm=False):
        k = QUICK["warm_rows"] if quick else WARM_ROWS
        X, y = (X_train[:k], y_train[:k]) if warm else (X_train, y_train)
        with nj.seeded(c["seed"]):
            model = nnjit_model(nj)
        return Pair(nj, torch, model, torch_model(), (X,), y, c["batch"], c["lr"], c["seed"])

    warm_s = warm_up(make, label)
    pair = make()
    out = run_pair(pair, epochs, label)
    out["accuracy"] = pair.accuracies((data["X_test"],), data["y_test"])
    out["arena_bytes"] = pair.arena_bytes()
    out["nrt"] = nrt_per_epoch(make, quick)
    out.update(warmup_s=warm_s, rows=len(y_train), test_rows=len(data["y_test"]),
               source=data["source"], settings=c, epochs=epochs)
    log(f"  {label}: test accuracy nnjit {out['accuracy']['nnjit']:.4f}, PyTorch "
        f"{out['accuracy']['PyTorch']:.4f}")
    return out


def lenet_section(nj, torch, quick: bool) -> dict:
    return fashion_mnist_pair(nj, torch, quick, "LeNet-5", LENET, nnjit_lenet, torch_lenet)


def conv_stack_section(quick: bool) -> dict:
    """``benchmarks.conv_stack.measure_conv_stack()`` (the conv workstream's measurement; --quick:
    one short trial of each part)."""
    try:
        from benchmarks.conv_stack import measure_conv_stack
    except ImportError as e:
        return {"error": f"benchmarks.conv_stack is not importable ({e})"}
    accepted = inspect.signature(measure_conv_stack).parameters
    kwargs = {k: v for k, v in QUICK_TIMING.items() if k in accepted} if quick else {}
    return {"result": measure_conv_stack(**kwargs)}


def olivetti_section(nj, torch, quick: bool) -> dict:
    from benchmarks.seed_table import DATASETS, MAX_EPOCHS, Contenders

    d = olivetti_split(quick)
    c = OLIVETTI
    epochs = QUICK["epochs"] if quick else c["epochs"]

    def make(warm=False):
        k = QUICK["faces_train"] if quick else len(d["y_cnn"])
        X, y = (d["X_cnn"][:QUICK["warm_rows"]], d["y_cnn"][:QUICK["warm_rows"]]) if warm \
            else (d["X_cnn"][:k], d["y_cnn"][:k])
        with nj.seeded(c["seed"]):
            model = nnjit_faces_cnn(nj, d["n_classes"])
        return Pair(nj, torch, model, torch_faces_cnn(d["n_classes"]), (X,), y, c["batch"],
                    c["lr"], c["seed"])

    warm_s = warm_up(make, "Olivetti CNN")
    pair = make()
    out = run_pair(pair, epochs, "Olivetti CNN")
    X_test = np.ascontiguousarray(d["X_test_sk"], dtype=np.float32)
    out["accuracy"] = pair.accuracies((X_test,), d["y_test"])
    out["arena_bytes"] = pair.arena_bytes()
    out["nrt"] = nrt_per_epoch(make, quick)
    sk = Contenders(d, DATASETS["Olivetti"], 2 if quick else MAX_EPOCHS, {}).sklearn()
    out["sklearn_mlp"] = {"fit_s": sk["fit_s"], "epochs": sk["epochs"],
                          "epoch_s": sk["per_epoch_s"], "accuracy": sk["accuracy"],
                          "settings": DATASETS["Olivetti"]}
    out["fit_s"] = {k: out[k]["epoch_s"]["median"] * epochs for k in ("nnjit", "PyTorch")}
    out.update(warmup_s=warm_s, rows=len(pair.y), test_rows=len(d["y_test"]),
               settings=c, epochs=epochs, split_seed=d["seed"])
    log(f"  Olivetti: test accuracy nnjit {out['accuracy']['nnjit']:.3f}, PyTorch "
        f"{out['accuracy']['PyTorch']:.3f}, scikit-learn MLP {sk['accuracy']:.3f}")
    return out


def tabular_section(nj, torch, quick: bool) -> dict:
    c = TABULAR
    n_train, n_test = ((QUICK["tab_train"], QUICK["tab_test"]) if quick
                       else (c["n_train"], c["n_test"]))
    t = synthetic_table(n_train, n_test, c["seed"])
    epochs = QUICK["epochs"] if quick else c["epochs"]
    shape = (c["n_num"], c["cards"], c["emb_dim"], c["hidden"])

    def make(warm=False):
        k = QUICK["warm_rows"] if warm and quick else (WARM_ROWS if warm else n_train)
        with nj.seeded(c["seed"]):
            model = nnjit_embedding_mlp(nj, *shape)
        return Pair(nj, torch, model, torch_embedding_mlp(*shape),
                    (t["X_num"][:k], t["X_cat"][:k]), t["y"][:k], c["batch"], c["lr"], c["seed"])

    warm_s = warm_up(make, "embedding MLP")
    pair = make()
    out = run_pair(pair, epochs, "embedding MLP")
    out["accuracy"] = pair.accuracies((t["X_num_test"], t["X_cat_test"]), t["y_test"])
    out["arena_bytes"] = pair.arena_bytes()
    out["nrt"] = nrt_per_epoch(make, quick)
    out.update(warmup_s=warm_s, rows=n_train, test_rows=n_test, settings=c, epochs=epochs,
               bayes_acc=t["bayes_acc"], positive_rate=t["positive_rate"])
    log(f"  embedding MLP: test accuracy nnjit {out['accuracy']['nnjit']:.4f}, PyTorch "
        f"{out['accuracy']['PyTorch']:.4f} (noiseless logit {t['bayes_acc']:.4f})")
    return out


def vgg_section(nj, torch, quick: bool) -> dict:
    """The VGG-style net trained like LeNet-5 (without the data file: skipped), then its
    convolutions timed one by one (:func:`benchmarks.vgg.measure_layers`, in ``"layers"``)."""
    from benchmarks.vgg import measure_layers, nnjit_vgg, torch_vgg

    out = fashion_mnist_pair(nj, torch, quick, "VGG-style", VGG, nnjit_vgg, torch_vgg)
    log("  VGG-style: per-layer products, nnjit and PyTorch, between two GEMM peaks")
    out["layers"] = measure_layers(torch, VGG["batch"], **(QUICK_TIMING if quick else VGG_TIMING))
    step = out["layers"]["step"]
    log(f"  VGG-style: one step's convolutions {step['gflops']['nnjit']:.1f} GFLOP/s nnjit, "
        f"{step['gflops']['PyTorch']:.1f} PyTorch (GEMM peak "
        f"{out['layers']['gemm_peak_gflops']:.1f})")
    return out


# -- cold compile, one fresh process -------------------------------------------------------------
COMPILE_CHILD = """
import time
import numpy as np
from benchmarks._common import NumbaCompileProfiler, emit_result
import nnjit
from nnjit.engine.interpreter import execute
nn = nnjit.nn
F = nn.functional
rng = np.random.default_rng(0)
X = rng.random((64, 64)).astype(np.float32)
X_cat = rng.integers(0, 5, (64, 2))
y = rng.integers(0, 3, 64)

class ConvOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(1, 2, 3), nn.Linear(2 * 6 * 6, 3)
    def forward(self, x):
        return self.fc(F.relu(self.conv(x.view(-1, 1, 8, 8))).flatten(1))

class PoolOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool, self.fc = nn.MaxPool2d(2), nn.Linear(16, 3)
    def forward(self, x):
        return self.fc(self.pool(x.view(-1, 1, 8, 8)).flatten(1))

class NormOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.bn, self.fc2 = nn.Linear(64, 8), nn.BatchNorm1d(8), nn.Linear(8, 3)
    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))

class EmbedCat(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.fc = nn.Embedding(5, 4), nn.Linear(64 + 4, 3)
    def forward(self, x, c):
        return self.fc(F.cat([x, self.emb(c[:, 0])], dim=1))

MODELS = {
    "MLP (core only)": (lambda: nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3)),
                        (X,)),
    "conv": (ConvOnly, (X,)),
    "pooling": (PoolOnly, (X,)),
    "normalization": (NormOnly, (X,)),
    "embedding + joining": (EmbedCat, (X, X_cat)),
}
out = {}
for name, (build, inputs) in MODELS.items():
    try:
        trainer = nnjit.Trainer(build(), nnjit.Adam(), seed=0)
        loader = nnjit.DataLoader(inputs if len(inputs) > 1 else inputs[0], y, batch_size=16)
        t0 = time.perf_counter()
        with NumbaCompileProfiler() as prof:
            trainer.fit(loader, epochs=1, n_iter_no_change=None, verbose=0)
        program = trainer.program
        out[name] = dict(first_fit_s=time.perf_counter() - t0, compile=prof.summary(),
                         extra_families=[f.name for f in program.families if not f.core],
                         base_build=program._execute is execute)
    except Exception as e:
        out[name] = dict(error=f"{type(e).__name__}: {e}")
emit_result(out)
"""


def compile_section(out) -> dict:
    with temp_dir("nnjit-cnn-cache-") as cache:
        proc = subprocess.run([sys.executable, "-c", COMPILE_CHILD], cwd=REPO_ROOT,
                              env=child_env(NUMBA_CACHE_DIR=cache), capture_output=True,
                              text=True, timeout=1800)
        if proc.returncode != 0:
            return {"error": f"compile child failed (exit {proc.returncode}): "
                             f"{proc.stderr[-2000:]}"}
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
        rows = json.loads(lines[-1][len(RESULT_MARKER):])
        files, size = dir_size(cache)
    for name, r in rows.items():
        log(f"    {name}: " + (r["error"] if "error" in r else
                               f"first fit {fmt_time(r['first_fit_s'])}, numba compile "
                               f"{fmt_time(r['compile']['compile_s'])}"))
    out = {"models": rows, "cache_files": files, "cache_bytes": size}
    core = _core_cold_compile(out)
    if core is not None:
        out["core_benchmark_cold_first_fit_s"] = core
    return out


def _core_cold_compile(out) -> float | None:
    """The median cold first fit of ``benchmarks.core`` (its core.json beside this run's output,
    else in benchmarks/results/), if any."""
    from pathlib import Path

    from benchmarks.seed_table import _load_other

    core = _load_other("core", Path(out) if str(out).endswith(".json") else None)
    try:
        return float(core["cold_compile"]["first_fit_s"]["median"])
    except (TypeError, KeyError, ValueError):
        return None


# -- targets and report --------------------------------------------------------------------------
def targets(res: dict) -> list[dict]:
    rows = []

    def add(what, value, ok):
        rows.append(dict(what=what, value=value,
                         status="not run" if ok is None else ("PASS" if ok else "MISS")))

    def training_pair(name, r, speedup, points, min_acc=0.0):
        """The per-epoch and accuracy targets of one nnjit/PyTorch training pair."""
        floor = f", both >= {min_acc}" if min_acc else ""
        if "nnjit" not in r:
            for what in (f"{name} per epoch >= {speedup:g}x faster than PyTorch",
                         f"{name} accuracy within {points} points{floor}"):
                add(what, r.get("skipped") or r.get("error"), None)
            return
        add(f"{name} per epoch >= {speedup:g}x faster than PyTorch",
            f"{fmt_time(r['nnjit']['epoch_s']['median'])} vs "
            f"{fmt_time(r['PyTorch']['epoch_s']['median'])} ({fmt_ratio(r['speedup'])})",
            r["speedup"] is not None and r["speedup"] >= speedup)
        a, t = r["accuracy"]["nnjit"], r["accuracy"]["PyTorch"]
        add(f"{name} accuracy after {r['epochs']} epochs within {points} points{floor}",
            f"nnjit {a:.4f}, PyTorch {t:.4f}", abs(a - t) * 100 <= points and min(a, t) >= min_acc)

    training_pair("LeNet-5", res["lenet"], LENET_SPEEDUP, LENET_ACC_POINTS, LENET_MIN_ACC)
    training_pair("VGG-style", res["vgg"], VGG_SPEEDUP, VGG_ACC_POINTS)
    cs = res["conv_stack"]
    frac = _conv_stack_fraction(cs)
    add(f"3x3 conv stack forward+backward >= {CONV_STACK_FRACTION:.0%} of the GEMM peak",
        cs.get("error") or cs.get("skipped") or (
            f"{frac:.1%}" if frac is not None else json.dumps(cs["result"])[:120]),
        None if "result" not in cs or frac is None else frac >= CONV_STACK_FRACTION)
    for key, label in (("olivetti", "Olivetti CNN"), ("tabular", "embedding MLP")):
        s = res[key]
        if "accuracy" not in s:
            add(f"{label}: accuracy and time vs PyTorch", s.get("error") or s.get("skipped"),
                None)
            continue
        add(f"{label}: accuracy vs PyTorch (same weights and batches)",
            f"nnjit {s['accuracy']['nnjit']:.3f}, PyTorch {s['accuracy']['PyTorch']:.3f}",
            abs(s["accuracy"]["nnjit"] - s["accuracy"]["PyTorch"]) <= 0.02)
    for key in ("lenet", "olivetti", "tabular", "vgg"):
        s = res[key]
        if "nrt" in s:
            add(f"{key}: 0 NRT allocations per epoch", fmt_num(s["nrt"]["per_epoch"]),
                s["nrt"]["per_epoch"] == 0)
    comp = res.get("compile")
    if comp and "models" in comp:
        mlp = comp["models"].get("MLP (core only)", {})
        if "base_build" in mlp:
            add("an MLP runs the base build (none of the new families compiled into it)",
                f"base build: {mlp['base_build']}, extra families: {mlp['extra_families']}",
                mlp["base_build"] and not mlp["extra_families"])
        core = comp.get("core_benchmark_cold_first_fit_s")
        if "first_fit_s" in mlp and core is not None:
            add("an MLP compiles no slower than the core benchmark's cold compile (+10%)",
                f"{fmt_time(mlp['first_fit_s'])} vs {fmt_time(core)}",
                mlp["first_fit_s"] <= 1.10 * core)
    return rows


def _conv_stack_fraction(cs: dict) -> float | None:
    result = cs.get("result") or {}
    for key in ("fraction_of_peak", "peak_fraction", "fraction"):
        if isinstance(result.get(key), (int, float)):
            return float(result[key])
    return None


def print_report(res: dict) -> None:
    env, cfg = res["environment"], res["config"]
    print(f"nnjit CNN / embedding benchmark ({env['cpu_model']}, pinned to CPU "
          f"{(env.get('pinned') or {}).get('cpu')}, 1 thread everywhere)\n", flush=True)
    rows = []
    for key, label in (("lenet", "LeNet-5, Fashion-MNIST, batch 64"),
                       ("vgg", "VGG-style, Fashion-MNIST 6,000, batch 64"),
                       ("olivetti", "Olivetti CNN, batch 32"),
                       ("tabular", "embedding MLP, batch 128")):
        s = res[key]
        if "nnjit" not in s:
            rows.append([label, "", s.get("skipped") or s.get("error", "")])
            continue
        for c in ("nnjit", "PyTorch"):
            e = s[c]["epoch_s"]
            rows.append([label if c == "nnjit" else "", c, fmt_time(e["median"], "ms"),
                         fmt_time(e["min"], "ms"), fmt_time(e["max"], "ms"),
                         fmt_ratio(ratio(e["median"], s["nnjit"]["epoch_s"]["median"])),
                         f"{s['accuracy'][c]:.4f}", str(s["epochs"]),
                         f"{s['arena_bytes'] / 2**20:.2f}" if c == "nnjit" else "",
                         fmt_num(s["nrt"]["per_epoch"]) if c == "nnjit" else ""])
        if key == "olivetti":
            sk = s["sklearn_mlp"]
            rows.append(["", "scikit-learn MLP", fmt_time(sk["epoch_s"], "ms"), "", "",
                         fmt_ratio(ratio(sk["epoch_s"], s["nnjit"]["epoch_s"]["median"])),
                         f"{sk['accuracy']:.4f}", str(sk["epochs"]), "", ""])
        if key == "tabular":
            rows.append(["", "(noiseless logit)", "", "", "", "", f"{s['bayes_acc']:.4f}", "",
                         "", ""])
    print_table(["workload", "contender", "per epoch", "min", "max", "vs nnjit", "test acc",
                 "epochs", "arena MiB", "NRT allocs/epoch"], rows,
                "1. Training, same initial weights and batch order, epochs alternating "
                f"(per epoch: median over the epochs){' (--quick)' if cfg['quick'] else ''}")
    cs = res["conv_stack"]
    r = cs.get("result") or {}
    if "gflops" in r and "gemm_peak_gflops" in r:
        line = (f"{r['gflops']:.1f} GFLOP/s forward + backward, {_conv_stack_fraction(cs):.1%} of "
                f"the 1-thread GEMM peak {r['gemm_peak_gflops']:.1f} GFLOP/s "
                f"({r.get('workload', '')}; algorithms {r.get('algorithms')})")
    else:
        line = cs.get("error") or cs.get("skipped") or json.dumps(r, default=str)
    print(f"2. 3x3 conv stack: {line}\n", flush=True)
    _print_vgg_layers(res["vgg"])
    comp = res.get("compile")
    if comp and "models" in comp:
        rows = [[name, r.get("error", ""), fmt_time(r.get("first_fit_s")),
                 fmt_time((r.get("compile") or {}).get("compile_s")),
                 str((r.get("compile") or {}).get("n_compiles", "")),
                 "base" if r.get("base_build") else ", ".join(r.get("extra_families", []))]
                for name, r in comp["models"].items()]
        core = comp.get("core_benchmark_cold_first_fit_s")
        print_table(["model", "error", "first fit", "numba compile", "compiles", "build"], rows,
                    "4. Cold compile, one fresh process, empty NUMBA_CACHE_DIR, models in order "
                    "(later rows: the family's build on top of already compiled core kernels)"
                    + (f"; benchmarks.core's cold first fit: {fmt_time(core)}" if core else ""))
    else:
        why = (comp or {}).get("error", "not measured (--quick or --no-compile)")
        print(f"4. Cold compile: {why}\n", flush=True)
    rows = [[t["what"], t["value"], t["status"]] for t in res["targets"]]
    print_table(["target (issues 13, 22)", "measured", "status"], rows, "5. Targets",
                align="lll")
    v = env["versions"]
    rows = [["python / numba / numpy", f"{env['python']} / {env['numba']} / {env['numpy']}"],
            ["torch / scikit-learn", f"{v.get('torch')} / {v.get('scikit-learn')}"],
            ["PyTorch threads", str(env.get("torch_threads"))],
            ["load average before / after",
             f"{' '.join(f'{x:.2f}' for x in env['loadavg_before'] or [])} / "
             f"{' '.join(f'{x:.2f}' for x in env['loadavg_after'] or [])}"],
            *revision_rows(res)]
    print_environment(rows, res, "6. Environment")


def _print_vgg_layers(vg: dict) -> None:
    """Table 3: the VGG-style net's convolution products, nnjit and PyTorch, against the peak."""
    lay = vg.get("layers")
    if not lay:
        print(f"3. VGG-style convolutions: {vg.get('error') or vg.get('skipped')}\n", flush=True)
        return
    peak = lay["gemm_peak_gflops"]
    rows = []
    for r in (*lay["rows"], lay["step"]):
        s, g, f = r["seconds"], r["gflops"], r["fraction_of_peak"]
        rows.append([r["layer"], r["shape"], r["direction"], r.get("algorithm", ""),
                     f"{r['flops'] / 1e9:.3f}", fmt_time(s["nnjit"], "ms"),
                     f"{g['nnjit']:.1f}", f"{f['nnjit']:.1%}", fmt_time(s["PyTorch"], "ms"),
                     f"{g['PyTorch']:.1f}", f"{f['PyTorch']:.1%}",
                     fmt_ratio(ratio(s["PyTorch"], s["nnjit"]))])
    print_table(["layer", "shape", "direction", "algorithm", "GFLOP", "nnjit", "GFLOP/s",
                 "of peak", "PyTorch", "GFLOP/s", "of peak", "nnjit speed-up"], rows,
                f"3. VGG-style convolutions, one product at a time, batch {lay['batch']}, 1 "
                f"thread (best of the trials): GFLOP/s against the 1-thread float32 GEMM peak "
                f"measured before and after, {peak:.1f} GFLOP/s ({lay['gemm_peak_route']})",
                align="llll" + "r" * 8)


def _warnings(res: dict) -> list[str]:
    out = []
    busy = load_warning(res["environment"])
    if busy:
        out.append(busy)
    if res["config"]["quick"]:
        out.append("--quick: tiny subsets and 1 epoch; the numbers mean nothing")
        return out
    for key in ("lenet", "olivetti", "tabular", "vgg"):
        if res[key].get("same_batch_order") is False:
            out.append(f"{key}: the torch loop's batch order differs from nnjit's")
    for t in res["targets"]:
        if t["status"] != "PASS":
            out.append(f"target {t['status']}: {t['what']}: {t['value']}")
    return out


# -- main ----------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cnn", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny subsets, 1 epoch, no compile process (smoke test)")
    p.add_argument("--no-compile", action="store_true", help="skip the cold-compile process")
    p.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    p.add_argument("--only", default=",".join(SECTIONS),
                   help=f"comma-separated subset of {','.join(SECTIONS)} (default all)")
    p.add_argument("--out", default="cnn", help="results name, .json path or directory")
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
        raise SystemExit(f"benchmarks.cnn compares with PyTorch: {why}")
    import torch

    torch_threads = torch_setup_threads()
    res: dict = {"benchmark": "cnn",
                 "config": dict(quick=args.quick, lenet=LENET, olivetti=OLIVETTI,
                                tabular=TABULAR, vgg=VGG,
                                vgg_timing=QUICK_TIMING if args.quick else VGG_TIMING,
                                quick_sizes=QUICK if args.quick else None,
                                pin=not args.no_pin)}
    sections = {"lenet": ("1. LeNet-5 on Fashion-MNIST", lenet_section, (nnjit, torch)),
                "conv_stack": ("2. 3x3 conv stack", conv_stack_section, ()),
                "olivetti": ("3. Olivetti CNN", olivetti_section, (nnjit, torch)),
                "tabular": ("4. embedding MLP on a synthetic table", tabular_section,
                            (nnjit, torch)),
                "vgg": ("5. VGG-style net on Fashion-MNIST", vgg_section, (nnjit, torch))}
    with threadpool_limits(limits=1, user_api="blas"):
        for key, (title, section, section_args) in sections.items():
            if key not in only:
                res[key] = {"skipped": "not in --only"}
                continue
            log(title)
            res[key] = guarded(section, *section_args, args.quick)
    if args.quick or args.no_compile or "compile" not in only:
        res["compile"] = None
    else:
        log("7. cold compile (fresh process, empty cache)")
        res["compile"] = guarded(compile_section, out_path(args.out, "cnn"))
    res["targets"] = targets(res)
    res["environment"] = environment_info(
        loadavg_before=load_before, loadavg_after=loadavg(), pinned=pinned,
        versions=package_versions("torch", "scikit-learn", "threadpoolctl"),
        torch_threads=torch_threads,
        **({"cpu_affinity": len(pinned["previous"])} if pinned else {}))
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    finish(res, out_path(args.out, "cnn"), _warnings, print_report)
    failed = [k for k in ("lenet", "olivetti", "tabular", "vgg", "compile")
              if isinstance(res.get(k), dict) and "error" in res[k]]
    if failed:
        raise SystemExit(f"benchmarks.cnn: sections failed: {', '.join(failed)}")
    return res


if __name__ == "__main__":
    main()
