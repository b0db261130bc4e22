"""``nnjit demo``: an MLP (or, on Cora, a GCN) on bundled data, with its accuracy and where the
time went."""

from __future__ import annotations

import time

DEMO_SETTINGS = {  # hidden units, batch size, learning rate (the seed benchmark's settings)
    "iris": (16, 16, 0.01),
    "digits": (128, 32, 0.001),
    "olivetti_faces": (128, 32, 0.001),
}


def demo(dataset: str, epochs: int, seed: int) -> float:
    """Train a one-hidden-layer MLP on a bundled data set; print accuracy and time."""
    import numpy as np

    from nnjit import datasets
    from nnjit.data.loader import DataLoader
    from nnjit.losses import CrossEntropyLoss
    from nnjit.nn import Linear, ReLU, Sequential
    from nnjit.optim import Adam
    from nnjit.random import set_seed
    from nnjit.train.trainer import Trainer

    hidden, batch, lr = DEMO_SETTINGS[dataset]
    set_seed(seed)
    X, y = datasets.load(dataset)
    n_classes = int(y.max()) + 1
    X_train, X_test, y_train, y_test = datasets.train_test_split(X, y, 0.2, seed=seed)
    X_fit, X_val, y_fit, y_val = datasets.train_test_split(
        X_train, y_train, max(0.1, (n_classes + 5) / len(X_train)), seed=seed)
    X_fit, X_val, X_test = datasets.standardize(X_fit, X_val, X_test)
    model = Sequential(Linear(X.shape[1], hidden), ReLU(), Linear(hidden, n_classes))
    trainer = Trainer(model, Adam(lr=lr), CrossEntropyLoss())
    print(f"{dataset}: {len(X_fit)} train / {len(X_val)} val / {len(X_test)} test rows, "
          f"MLP {X.shape[1]}-{hidden}-{n_classes}, batch {batch}, Adam lr {lr}")
    history, seconds, compiled = _timed_fit(lambda: trainer.fit(
        DataLoader(X_fit, y_fit, batch_size=batch), epochs=epochs, val=(X_val, y_val),
        verbose=True))
    accuracy = float(np.mean(trainer.predict(X_test) == y_test))
    print(f"test accuracy {accuracy:.4f}")
    print(timing_line(history, seconds, compiled))
    return accuracy


def timing_line(history, wall_seconds: float, compiled_seconds: float) -> str:
    """Where the fit's time went: compiling the training loop (a first run only), the epochs in
    the compiled loop (history's ``seconds``), and the rest of the call (tracing, laying out the
    arena, loading the compiled loop from numba's cache)."""
    training = float(history["seconds"].sum())
    compiling = (f"{compiled_seconds:.2f} s compiling the training loop (first run only, now "
                 "cached), " if compiled_seconds > 0 else "")
    rest = max(wall_seconds - training - compiled_seconds, 0.0)
    return (f"time: the fit took {wall_seconds:.2f} s: {compiling}{len(history)} epochs of "
            f"compiled training in {training:.3f} s ({history['seconds'].median() * 1e3:.2f} ms "
            f"per epoch), {rest:.2f} s start-up (tracing, loading the compiled loop)")


def _timed_fit(fit) -> tuple:
    """Run ``fit()``; return its history, wall seconds and the seconds spent compiling."""
    from nnjit.engine.compile_notice import compile_seconds

    compiled, start = compile_seconds(), time.perf_counter()
    history = fit()
    return history, time.perf_counter() - start, compile_seconds() - compiled


def demo_graph(epochs: int, seed: int) -> float:
    """Train PyG's reference GCN (2 layers, 16 hidden) on Cora, full batch; print accuracy and
    time."""
    from nnjit import datasets
    from nnjit.experiment.config import NetConfig
    from nnjit.experiment.data import graph_from_dataset
    from nnjit.optim import Adam
    from nnjit.random import set_seed
    from nnjit.train.trainer import Trainer

    set_seed(seed)
    graph = graph_from_dataset(datasets.load_cora())
    model = NetConfig(kind="graph_conv", in_dim=graph.num_features, out_dim=graph.num_classes,
                      hidden_dims=[16], dropout=0.5).build()
    trainer = Trainer(model, Adam(lr=0.01, weight_decay=5e-4), seed=seed)
    print(f"cora: {graph.num_nodes} nodes, {graph.num_edges} edges, "
          f"{int(graph.train_mask.sum())} train / {int(graph.val_mask.sum())} val / "
          f"{int(graph.test_mask.sum())} test nodes, GCN {graph.num_features}-16-"
          f"{graph.num_classes}, full batch, Adam lr 0.01, weight decay 5e-4")
    history, seconds, compiled = _timed_fit(lambda: trainer.fit(
        graph, epochs=epochs, n_iter_no_change=None, monitor="val_accuracy", verbose=True))
    accuracy = trainer.evaluate(graph, "test")["accuracy"]
    print(f"test accuracy {accuracy:.4f}")
    print(timing_line(history, seconds, compiled))
    return accuracy
