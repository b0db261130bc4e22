"""``optimizer: {kind: lbfgs}`` in a run config: LBFGS's fields, torch's learning rate as the
default, the full batch as the default batch size, and runs that train, resume exactly and run
on a graph."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nnjit as nn
from nnjit.experiment import (
    Checkpoints,
    ModelConfig,
    NetConfig,
    OptimizerConfig,
    Optims,
    RunConfig,
    TrainConfig,
)
from nnjit.experiment.run_history import IDPS_COLUMNS
from nnjit.experiment.train_run import train_run

COLS = [c for c in IDPS_COLUMNS if c != "seconds"]
MODEL = ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,), activation="tanh"),
                    dtype="float64")


def test_lbfgs_fields_build_the_optimizer():
    cfg = OptimizerConfig.from_yaml("kind: lbfgs\nmax_iter: 7\nhistory_size: 5\n"
                                    "line_search_fn: strong_wolfe\ntolerance_grad: 1e-6\n")
    assert Optims("LBFGS") is Optims.LBFGS and cfg.full_batch
    opt = cfg.build()
    assert isinstance(opt, nn.LBFGS)
    assert opt.get_config() == dict(lr=1.0, max_iter=7, max_eval=8, tolerance_grad=1e-6,
                                    tolerance_change=1e-9, history_size=5,
                                    line_search_fn="strong_wolfe")
    assert OptimizerConfig.from_yaml(cfg.to_yaml()) == cfg


def test_the_default_lr_is_the_kinds_and_stays_out_of_the_run_id():
    assert OptimizerConfig(kind="lbfgs").lr == 1.0 and OptimizerConfig().lr == 1e-3
    assert OptimizerConfig(kind="lbfgs", lr=1.0).state() == {"kind": "lbfgs"}
    assert OptimizerConfig(kind="lbfgs", lr=0.5).state() == {"kind": "lbfgs", "lr": 0.5}
    # the other kinds' ids are what they were: 1e-3 is their default, left out
    assert OptimizerConfig(lr=1e-3).state() == {} == OptimizerConfig().state()
    assert OptimizerConfig(kind="sgd", lr=1e-3).state() == {"kind": "sgd"}
    assert OptimizerConfig(lr=1e-3).config_hash() == OptimizerConfig().config_hash()
    assert OptimizerConfig(kind="lbfgs").state(full=True)["lr"] == 1.0


def test_a_grid_over_kinds_gives_each_its_default_lr():
    from nnjit.experiment.grid import expand_grid

    points = expand_grid(RunConfig(model=MODEL), {"optimizer.kind": ["adam", "lbfgs"]})
    assert [p.config.optimizer.lr for p in points] == [1e-3, 1.0]
    assert [p.config.rows_per_batch(500) for p in points] == [32, 500]


def test_batch_size_defaults_to_the_full_batch_for_lbfgs():
    lbfgs = RunConfig(model=MODEL, optimizer=OptimizerConfig(kind="lbfgs"))
    assert lbfgs.rows_per_batch(120) == 120
    assert lbfgs.replace(train=TrainConfig(batch_size=500)).rows_per_batch(120) == 500
    adam = RunConfig(model=MODEL)
    assert adam.rows_per_batch(120) == 32
    assert adam.replace(train=TrainConfig(batch_size=None)).rows_per_batch(120) == 120


def _iris():
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(X)
    idx = np.random.default_rng(0).permutation(len(X))
    return X[idx[:120]], y[idx[:120]], X[idx[120:]], y[idx[120:]]


def test_an_lbfgs_run_trains_full_batch_and_resumes_exactly(tmp_path):
    X, y, Xv, yv = _iris()
    cfg = RunConfig(model=MODEL, data="iris",
                    optimizer=OptimizerConfig(kind="lbfgs", max_iter=5, history_size=4,
                                              line_search_fn="strong_wolfe"),
                    train=TrainConfig(epochs=6, patience=None, restore_best=False))
    run, trainer, whole = train_run(cfg, X, y, Xv, yv, root=tmp_path / "a")
    assert trainer.optimizer.iterations == 6  # one step per epoch: one batch of 120 rows
    assert whole["train_loss"].is_monotonic_decreasing
    assert whole["val_accuracy"].iloc[-1] >= 0.9
    assert run.config.state()["optimizer"] == {"kind": "lbfgs", "max_iter": 5,
                                               "history_size": 4,
                                               "line_search_fn": "strong_wolfe"}
    train_run(cfg, X, y, Xv, yv, root=tmp_path / "b", epochs=3)
    _, resumed, parts = train_run(cfg, X, y, Xv, yv, root=tmp_path / "b",
                                  resume=Checkpoints.LAST)
    pd.testing.assert_frame_equal(whole[COLS], parts[COLS], check_exact=True)
    for name, value in trainer.model.state_dict().items():
        np.testing.assert_array_equal(resumed.model.state_dict()[name], value)


def test_an_lbfgs_run_with_a_batch_size_below_the_rows_is_refused_by_name(tmp_path):
    X, y, Xv, yv = _iris()
    cfg = RunConfig(model=MODEL, optimizer=OptimizerConfig(kind="lbfgs"),
                    train=TrainConfig(epochs=2, batch_size=16))
    with pytest.raises(ValueError, match="batch_size=16 splits the 120 rows"):
        train_run(cfg, X, y, Xv, yv, root=tmp_path)


def test_an_lbfgs_graph_run(tmp_path):
    rng = np.random.default_rng(0)
    n = 80
    graph = nn.Graph.from_arrays(rng.normal(size=(n, 6)), rng.integers(0, n, (2, 300)),
                                 rng.integers(0, 3, n), train_mask=np.arange(n) < 40,
                                 val_mask=np.arange(n) >= 40)
    net = NetConfig(kind="graph_conv", in_dim=6, out_dim=3, hidden_dims=(8,))
    cfg = RunConfig(model=ModelConfig(net=net, dtype="float64"),
                    optimizer=OptimizerConfig(kind="lbfgs", max_iter=5),
                    train=TrainConfig(epochs=4, patience=None, restore_best=False))
    _, trainer, history = train_run(cfg, graph, None, root=tmp_path)
    assert len(history) == 4 and history["val_loss"].notna().all()
    assert history["train_loss"].is_monotonic_decreasing
    assert trainer.optimizer.iterations == 4
