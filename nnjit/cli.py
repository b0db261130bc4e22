"""Command line: ``nnjit demo`` (train on built-in data) and ``nnjit warmup`` (compile)."""

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


def warmup() -> None:
    """Compile (or load from cache) the interpreter for float32 and float64."""
    import numpy as np

    import nnjit as nn

    for dtype in (np.float32, np.float64):
        start = time.perf_counter()
        X = np.random.default_rng(0).normal(size=(8, 2))
        trainer = nn.Trainer(nn.Sequential(nn.Linear(2, 2)), dtype=dtype, seed=0)
        trainer.fit(nn.DataLoader(X, np.arange(8) % 2, batch_size=4), epochs=1, val=(X, np.arange(8) % 2), verbose=False)
        trainer.predict_proba(X)
        print(f"{np.dtype(dtype).name}: ready in {time.perf_counter() - start:.2f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nnjit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="train an MLP on a bundled data set")
    p_demo.add_argument("--dataset", choices=sorted(DEMO_SETTINGS), default="digits")
    p_demo.add_argument("--epochs", type=int, default=100)
    p_demo.add_argument("--seed", type=int, default=42)
    sub.add_parser("warmup", help="compile the interpreter once (float32 and float64)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo(args.dataset, args.epochs, args.seed)
    else:
        warmup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
