"""Run by tests/train/test_mpi.py under ``mpirun -n 2``: fit a small Digits MLP data-parallel
(float64) and save this rank's final weights and history to ``OUT/rank<r>.npz``.

``python mpi_child.py OUT`` without mpirun (or with ``--single``) fits the same model in one
process on the same global batches: the reference.
"""

import sys

import numpy as np

import nnjit as nn


def fit(out: str, single: bool):
    data = nn.datasets.load_digits()
    X, y = data.X[:600] / 16.0, data.y[:600]
    Xv, yv = data.X[600:700] / 16.0, data.y[600:700]
    nn.set_seed(3)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    # scikit-learn's alpha is divided by the batch's rows: the global batch's, under MPI
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), regularizer=nn.SklearnL2Regularizer(1e-3),
                         dtype=np.float64, seed=3, distributed=None if single else nn.MPI())
    # 600 rows in global batches of 64: 9 full batches and a last one of 24 (12 per rank); a
    # callback makes it one compiled call per epoch
    layouts = []  # the program's layout vector at each epoch's end
    history = trainer.fit(nn.DataLoader(X, y, batch_size=64), epochs=3, val=(Xv, yv),
                          verbose=False,
                          callbacks=[lambda frame: layouts.append(trainer.program.layout.copy())])
    # the MPI handles are the run's options, never written into the program's layout
    assert len(layouts) == 3 and all(np.array_equal(v, trainer.program.layout) for v in layouts)
    if not single:  # (the Allreduce time is summed in the run state)
        assert trainer.distributed.allreduce_seconds > 0
    rank = 0 if single else trainer.distributed.rank
    weights = {name: p.data for name, p in model.named_parameters()}
    refusals = {} if single else _refusals(trainer.distributed, X, y)
    np.savez(f"{out}/{'single' if single else f'rank{rank}'}.npz",
             train_loss=history["train_loss"].to_numpy(),
             val_loss=history["val_loss"].to_numpy(), **weights, **refusals)
    return trainer


def _refusals(mpi, X, y) -> dict:
    """The messages of fits a data-parallel run refuses (before anything compiles or trains)."""
    def attempt(model, X, y, seed=3, batch_size=64):
        try:
            nn.Trainer(model, dtype=np.float64, seed=seed, distributed=mpi).fit(
                nn.DataLoader(X, y, batch_size=batch_size), epochs=1, verbose=False)
        except ValueError as e:
            return str(e)
        return "no error"

    return {
        "refused_dropout": attempt(nn.Sequential(nn.Linear(64, 8), nn.Dropout(0.5),
                                                 nn.Linear(8, 10)), X, y),
        "refused_last_batch": attempt(nn.Sequential(nn.Linear(64, 10)), X[:129], y[:129]),
        "refused_seed": attempt(nn.Sequential(nn.Linear(64, 10)), X, y, seed=mpi.rank),
    }


if __name__ == "__main__":
    fit(sys.argv[1], "--single" in sys.argv)
