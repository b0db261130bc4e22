"""Command line of nnjit.

``nnjit train CONFIG.yaml`` trains a run, ``nnjit runs list`` / ``nnjit runs show ID`` inspect
runs, ``nnjit demo`` trains on built-in data (``--dataset cora``: a GCN), ``nnjit warmup`` compiles the interpreter,
``nnjit report ID`` writes a run's HTML page, ``nnjit bench`` runs the benchmarks. Paths are printed relative to the runs root."""

from __future__ import annotations

import argparse
import sys
import time

DEMO_SETTINGS = {  # hidden units, batch size, learning rate (the seed benchmark's settings)
    "iris": (16, 16, 0.01),
    "digits": (128, 32, 0.001),
    "olivetti_faces": (128, 32, 0.001),
}


def demo(dataset: str, epochs: int, seed: int) -> float:
    """Train a one-hidden-layer MLP on a bundled data set; print accuracy and time."""
    import numpy as np

    import nnjit as nn

    hidden, batch, lr = DEMO_SETTINGS[dataset]
    nn.set_seed(seed)
    X, y = nn.datasets.load(dataset)
    n_classes = int(y.max()) + 1
    X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, 0.2, seed=seed)
    X_fit, X_val, y_fit, y_val = nn.datasets.train_test_split(
        X_train, y_train, max(0.1, (n_classes + 5) / len(X_train)), seed=seed)
    X_fit, X_val, X_test = nn.datasets.standardize(X_fit, X_val, X_test)
    model = nn.Sequential(nn.Linear(X.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, n_classes))
    trainer = nn.Trainer(model, nn.Adam(lr=lr), nn.CrossEntropyLoss())
    print(f"{dataset}: {len(X_fit)} train / {len(X_val)} val / {len(X_test)} test rows, "
          f"MLP {X.shape[1]}-{hidden}-{n_classes}, batch {batch}, Adam lr {lr}")
    start = time.perf_counter()
    history = trainer.fit(nn.DataLoader(X_fit, y_fit, batch_size=batch), epochs=epochs,
                          val=(X_val, y_val), verbose=True)
    seconds = time.perf_counter() - start
    accuracy = float(np.mean(trainer.predict(X_test) == y_test))
    print(f"test accuracy {accuracy:.4f}; fit took {seconds:.3f} s for {len(history)} epochs "
          f"({history['seconds'].median() * 1e3:.2f} ms per epoch; the first fit in a process "
          "includes loading or compiling the interpreter)")
    return accuracy


def demo_graph(epochs: int, seed: int) -> float:
    """Train PyG's reference GCN (2 layers, 16 hidden) on Cora, full batch; print accuracy and
    time."""
    import nnjit as nn
    from nnjit.experiment.config import NetConfig
    from nnjit.experiment.data import graph_from_dataset

    nn.set_seed(seed)
    graph = graph_from_dataset(nn.datasets.load_cora())
    model = NetConfig(kind="graph_conv", in_dim=graph.num_features, out_dim=graph.num_classes,
                      hidden_dims=[16], dropout=0.5).build()
    trainer = nn.Trainer(model, nn.Adam(lr=0.01, weight_decay=5e-4), seed=seed)
    print(f"cora: {graph.num_nodes} nodes, {graph.num_edges} edges, "
          f"{int(graph.train_mask.sum())} train / {int(graph.val_mask.sum())} val / "
          f"{int(graph.test_mask.sum())} test nodes, GCN {graph.num_features}-16-"
          f"{graph.num_classes}, full batch, Adam lr 0.01, weight decay 5e-4")
    start = time.perf_counter()
    history = trainer.fit(graph, epochs=epochs, n_iter_no_change=None, monitor="val_accuracy",
                          verbose=True)
    seconds = time.perf_counter() - start
    accuracy = trainer.evaluate(graph, "test")["accuracy"]
    print(f"test accuracy {accuracy:.4f}; fit took {seconds:.3f} s for {len(history)} epochs "
          f"({history['seconds'].median() * 1e3:.2f} ms per epoch; the first fit in a process "
          "includes loading or compiling the graph interpreter)")
    return accuracy


def warmup(graph: bool = False) -> None:
    """Compile (or load from cache) the interpreter for float32 and float64; with ``graph``
    also its graph build (full batch, sparse features and neighbour sampling)."""
    import numpy as np

    import nnjit as nn

    for dtype in (np.float32, np.float64):
        start = time.perf_counter()
        X = np.random.default_rng(0).normal(size=(8, 2))
        y = np.arange(8) % 2
        trainer = nn.Trainer(nn.Sequential(nn.Linear(2, 2)), dtype=dtype, seed=0)
        trainer.fit(nn.DataLoader(X, y, batch_size=4), epochs=1, val=(X, y), verbose=False)
        trainer.predict_proba(X)
        if graph:
            _warm_graph_build(nn, X, y, dtype)
        print(f"{np.dtype(dtype).name}: ready in {time.perf_counter() - start:.2f} s")


def _warm_graph_build(nn, X, y, dtype) -> None:
    """One tiny fit through every graph op: GCN on sparse features, GAT, SAGE max, sampling."""
    import numpy as np
    import scipy.sparse as sp

    class TwoLayers(nn.Module):
        def __init__(self, first, second):
            super().__init__()
            self.first, self.second, self.drop = first, second, nn.Dropout(0.1)

        def forward(self, x, edges):
            return self.second(self.drop(self.first(self.drop(x), edges)), edges)

    edges, train = [[0, 1, 2], [1, 2, 0]], np.arange(len(X)) < 4
    sparse = nn.Graph.from_arrays(sp.csr_matrix(X), edges, y, train_mask=train)
    dense = nn.Graph.from_arrays(X, edges, y, train_mask=train)
    runs = [(TwoLayers(nn.GCNConv(2, 2), nn.GATConv(2, 2)), sparse),
            (TwoLayers(nn.SAGEConv(2, 2, aggr="max"), nn.GATConv(2, 2, heads=2, concat=False)),
             dense),
            (TwoLayers(nn.SAGEConv(2, 2), nn.GCNConv(2, 2)), nn.NeighborLoader(dense, [2], 2))]
    for model, data in runs:
        nn.Trainer(model, dtype=dtype, seed=0).fit(data, epochs=1, verbose=False)


def _load_data(spec: str, config, target: str | None, seed: int):
    """(X_train, y_train, X_val, y_val) from a built-in data set name or a CSV path."""
    from nnjit.experiment import Losses
    from nnjit.experiment.data import load_run_data

    try:
        data = load_run_data(spec, config.model.loss is Losses.MSE, seed, target)
    except FileNotFoundError as e:
        raise SystemExit(f"nnjit train: {e}") from None
    except ValueError as e:
        raise SystemExit(f"nnjit train: {e} (or give a path to a .csv file)") from None
    if hasattr(data, "graph"):  # a graph: full batch on its own train / val masks
        return data.graph, None, None, None
    return data.X_train, data.y_train, data.X_val, data.y_val


def cmd_train(args) -> int:
    from nnjit.experiment import RunConfig
    from nnjit.experiment.runs import train_run

    try:
        with open(args.config, encoding="utf-8") as fh:
            config = RunConfig.from_yaml(fh.read())
    except OSError as e:
        raise SystemExit(f"nnjit train: cannot read {args.config}: {e.strerror}") from None
    except (ValueError, TypeError) as e:
        raise SystemExit(f"nnjit train: invalid config {args.config}: {e}") from None
    spec = args.data or config.data
    if not spec:
        raise SystemExit("nnjit train: no data: set 'data' in the config or pass --data NAME|CSV")
    X, y, Xv, yv = _load_data(spec, config, args.target, config.train.seed)
    callbacks = []
    if not args.quiet:
        from nnjit.train.builtin_callbacks import ProgressBar

        callbacks.append(ProgressBar())
    from nnjit.experiment import Checkpoints

    resume = Checkpoints.get(args.resume) if args.resume else None
    run, trainer, history = train_run(config, X, y, Xv, yv, args.root, resume=resume,
                                      callbacks=callbacks,
                                      metadata={"data": spec, "data_target": args.target})
    print(f"run {run.display}: {len(history)} epochs")
    if len(history):
        print(_last_line(history))
    return 0


def _last_line(history) -> str:
    import math

    last = history.iloc[-1]
    parts = [f"epoch {int(last['epoch'])}"]
    for col in ("train_loss", "val_loss", "val_accuracy", "lr"):
        if col in last and not math.isnan(last[col]):
            parts.append(f"{col} {last[col]:.4g}")
    return ", ".join(parts)


def cmd_runs(args) -> int:
    from nnjit.experiment.runs import Run

    if args.runs_command == "list":
        runs = Run.all(args.root)
        if not runs:
            print(f"no runs in {args.root}")
            return 0
        print(f"{'id':<14}{'epochs':>8}{'best val_loss':>15}  net")
        for run in runs:
            hist = run.history()
            best = hist["val_loss"].min() if len(hist) and hist["val_loss"].notna().any() \
                else float("nan")
            net = run.config.model.net
            shape = "-".join(map(str, (net.in_dim, *net.hidden_dims, net.out_dim)))
            print(f"{run.id:<14}{len(hist):>8}{best:>15.4g}  {net.kind.value} {shape}")
        return 0
    try:
        run = Run.load(args.id, args.root)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"nnjit runs show: {e}") from None
    print(f"run {run.display}")
    print("config:")
    print("  " + run.config.to_yaml().rstrip().replace("\n", "\n  "))
    meta = run.metadata()
    if meta:
        print("metadata: " + ", ".join(f"{k} {v}" for k, v in meta.items()))
    hist = run.history()
    print(f"epochs: {len(hist)}")
    if len(hist):
        print("last: " + _last_line(hist))
    folder = run.path / "checkpoints"
    saved = []
    for p in sorted(folder.glob("*.nne")):
        try:
            saved.append(f"{p.stem} (epoch {run.checkpoint_epoch(p.stem)})")
        except (ValueError, OSError):
            saved.append(p.stem)
    print("checkpoints: " + (", ".join(saved) or "none"))
    return 0


def cmd_report(args) -> int:
    import os

    from nnjit.experiment.runs import Run, write_report

    try:
        run = Run.load(args.id, args.root)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"nnjit report: {e}") from None
    out = write_report(run, args.output)
    shown = args.output if args.output else f"{run.display}/{os.path.basename(out)}"
    print(f"report written to {shown}")
    return 0


def cmd_bench(args) -> int:
    import importlib.util
    import subprocess

    try:
        spec = importlib.util.find_spec("benchmarks")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        print("nnjit bench: the 'benchmarks' package is not importable; run this from a "
              "checkout of the nnjit repository (the folder that holds benchmarks/)",
              file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, "-m", "benchmarks", *args.bench_args])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nnjit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="train an MLP (or, on cora, a GCN) on bundled data")
    p_demo.add_argument("--dataset", choices=sorted(DEMO_SETTINGS) + ["cora"], default="digits")
    p_demo.add_argument("--epochs", type=int, default=None, help="default 100 (cora: 200)")
    p_demo.add_argument("--seed", type=int, default=42)
    p_warm = sub.add_parser("warmup", help="compile the interpreter once (float32 and float64)")
    p_warm.add_argument("--graph", action="store_true",
                        help="also compile the graph build (GNN layers, neighbour sampling)")
    p_train = sub.add_parser("train", help="train a run from a RunConfig YAML file")
    p_train.add_argument("config", help="RunConfig YAML file")
    p_train.add_argument("--data", help="built-in data set name (iris, digits, "
                         "olivetti_faces, cora) or a CSV path; default: the config's 'data'")
    p_train.add_argument("--target", help="CSV target column (default: the last one)")
    p_train.add_argument("--root", default="runs", help="runs root folder (default: runs)")
    p_train.add_argument("--resume", choices=["last", "best"],
                         help="continue the existing run from this checkpoint")
    p_train.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p_runs = sub.add_parser("runs", help="list runs or show one")
    runs_sub = p_runs.add_subparsers(dest="runs_command", required=True)
    p_list = runs_sub.add_parser("list", help="list the runs under the root")
    p_list.add_argument("--root", default="runs", help="runs root folder (default: runs)")
    p_show = runs_sub.add_parser("show", help="show a run's config, metadata, history")
    p_show.add_argument("id", help="run id")
    p_show.add_argument("--root", default="runs", help="runs root folder (default: runs)")
    p_report = sub.add_parser("report", help="write a run's self-contained HTML report")
    p_report.add_argument("id", help="run id")
    p_report.add_argument("--root", default="runs", help="runs root folder (default: runs)")
    p_report.add_argument("-o", "--output", help="HTML file (default: <run>/report.html)")
    p_bench = sub.add_parser("bench", help="run the benchmarks (python -m benchmarks)",
                             description="Run python -m benchmarks with every argument given "
                             "(e.g. nnjit bench --quick --only gnn); its options: python -m "
                             "benchmarks --help")
    p_bench.add_argument("bench_args", nargs=argparse.REMAINDER,
                         help="arguments passed to python -m benchmarks")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"] and argv[1:2] not in (["-h"], ["--help"]):
        # every argument after "bench" belongs to python -m benchmarks (--quick, --only, ...)
        args = argparse.Namespace(command="bench", bench_args=argv[1:])
    else:
        args = parser.parse_args(argv)
    if args.command == "demo":
        if args.dataset == "cora":
            demo_graph(args.epochs or 200, args.seed)
        else:
            demo(args.dataset, args.epochs or 100, args.seed)
    elif args.command == "warmup":
        warmup(args.graph)
    elif args.command == "train":
        return cmd_train(args)
    elif args.command == "runs":
        return cmd_runs(args)
    elif args.command == "report":
        return cmd_report(args)
    elif args.command == "bench":
        return cmd_bench(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
