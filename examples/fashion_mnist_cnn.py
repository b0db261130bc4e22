"""LeNet-5 on Fashion-MNIST: a PyTorch-style CNN trained by nnjit's compiled loop.

    python examples/fashion_mnist_cnn.py                      # the shared copy, 5 epochs
    python examples/fashion_mnist_cnn.py --data DIR_OR_NPZ    # your copy (IDX folder or .npz)
    python examples/fashion_mnist_cnn.py --rows 3000 --epochs 1   # a quick look

nnjit does not ship or download Fashion-MNIST: by default the script reads
``../shared/data/fashion_mnist.npz`` beside the repository (or ``$NNJIT_SHARED_DATA``).
About 0.89 test accuracy after 5 epochs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nnjit
from nnjit import nn
from nnjit.nn import functional as F


class LeNet5(nn.Module):
    """conv 6@5x5 (padding 2) - ReLU - maxpool 2 - conv 16@5x5 - ReLU - maxpool 2 - flatten -
    120 - 84 - 10, on (N, 1, 28, 28) images."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))   # (N, 6, 14, 14)
        x = self.pool(F.relu(self.conv2(x)))   # (N, 16, 5, 5)
        x = self.flatten(x)                    # (N, 400)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def default_data() -> Path:
    beside_repository = Path(__file__).resolve().parents[2] / "shared" / "data"
    return Path(os.environ.get("NNJIT_SHARED_DATA") or beside_repository) / "fashion_mnist.npz"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help="IDX folder or .npz (default: the shared copy)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--rows", type=int, default=None, help="train on the first N images only")
    args = p.parse_args(argv)
    path = Path(args.data) if args.data else default_data()
    if not path.exists():
        print(f"no Fashion-MNIST at {path}: pass --data with a folder of the IDX files "
              "(https://github.com/zalandoresearch/fashion-mnist) or an .npz", file=sys.stderr)
        return 2

    X_train, X_test, y_train, y_test = nnjit.datasets.load_fashion_mnist(path)  # (N, 1, 28, 28)
    if args.rows:
        X_train, y_train = X_train[:args.rows], y_train[:args.rows]
    print(f"{len(X_train)} training images {X_train.shape[1:]}, {len(X_test)} test images")

    with nnjit.seeded(0):
        model = LeNet5()
    trainer = nnjit.Trainer(model, nnjit.Adam(lr=1e-3), nnjit.CrossEntropyLoss(), seed=0)
    start = time.perf_counter()
    history = trainer.fit(nnjit.DataLoader(X_train, y_train, batch_size=64), epochs=args.epochs,
                          n_iter_no_change=None, verbose=False)
    seconds = time.perf_counter() - start
    print(f"{len(history)} epochs in {seconds:.1f} s (first includes the compile or cache load); "
          f"last epoch {history['seconds'].iloc[-1]:.2f} s, train loss "
          f"{history['train_loss'].iloc[-1]:.4f}")
    print(f"test accuracy: {trainer.evaluate(X_test, y_test)['accuracy']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
