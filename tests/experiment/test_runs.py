"""Runs: folder layout, atomic writes, crash safety, exact warm resume, path-traversal checks."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import yaml

import nnjit as nn
from nnjit.experiment import (
    Checkpoints,
    ModelConfig,
    NetConfig,
    OptimizerConfig,
    RunConfig,
    TrainConfig,
)
from nnjit.experiment.runs import IDPS_COLUMNS, Run, RunCallback, check_run_id, train_run
from nnjit.train.callbacks import Callback


def _data():
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(X).astype(np.float32)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(X))
    return X[idx[:120]], y[idx[:120]], X[idx[120:]], y[idx[120:]]


def _config(epochs=10, **train):
    train.setdefault("patience", None)
    train.setdefault("restore_best", False)
    return RunConfig(
        model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,), dropout=0.1)),
        optimizer=OptimizerConfig(lr=0.01),
        train=TrainConfig(epochs=epochs, batch_size=16, seed=3, **train))


def test_run_id_checks(tmp_path):
    assert check_run_id("0123456789ab") == "0123456789ab"
    assert check_run_id("my-run_1.v2") == "my-run_1.v2"
    for bad in ("../x", "..", ".hidden", "a/b", "/etc", "", "a" * 65, "x..y", 5, "a\\b"):
        with pytest.raises(ValueError, match="invalid run id"):
            check_run_id(bad)
    with pytest.raises(ValueError, match="invalid run id"):
        Run.load("../../etc", tmp_path)
    with pytest.raises(FileNotFoundError, match="no run 'abcdefabcdef'"):
        Run.load("abcdefabcdef", tmp_path)


def test_run_folder_has_every_file_after_each_epoch(tmp_path):
    X, y, Xv, yv = _data()
    cfg = _config(epochs=8)
    seen = []

    class Check(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            folder = tmp_path / cfg.config_hash()
            files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
            seen.append(files)
            assert {"run.yaml", "metadata.yaml", "idps.csv", "checkpoints/first.nne",
                    "checkpoints/last.nne", "checkpoints/best.nne"} <= files
            assert not [f for f in files if f.endswith(".tmp") or "partial" in f]
            assert len(pd.read_csv(folder / "idps.csv")) == epoch

    run, trainer, history = train_run(cfg, X, y, Xv, yv, tmp_path, callbacks=[Check()])
    assert run.id == cfg.config_hash() and run.path == tmp_path / run.id
    assert len(seen) == 8
    assert list(history.columns) == list(IDPS_COLUMNS) and history["epoch"].tolist() == list(
        range(1, 9))
    # phases of 8 epochs: first 1, q1 2, q2 4, q3 6, last 8
    assert {p: run.checkpoint_epoch(p) for p in Checkpoints if p is not Checkpoints.BEST} == {
        Checkpoints.FIRST: 1, Checkpoints.Q1: 2, Checkpoints.Q2: 4, Checkpoints.Q3: 6,
        Checkpoints.LAST: 8}
    best = run.checkpoint_epoch(Checkpoints.BEST)
    assert best == int(history["val_loss"].idxmin()) + 1
    assert RunConfig.from_yaml((run.path / "run.yaml").read_text()) == cfg
    meta = yaml.safe_load((run.path / "metadata.yaml").read_text())
    for key in ("nnjit", "numba", "numpy", "python", "platform", "cpu", "git_commit"):
        assert key in meta
    # loading back
    again = Run.load(run.id, tmp_path)
    assert again.config == cfg and [r.id for r in Run.all(tmp_path)] == [run.id]
    pd.testing.assert_frame_equal(again.history(), history)
    model = again.load_weights(again.build_model(), Checkpoints.LAST)
    np.testing.assert_array_equal(model.parameters()[0].data, trainer.model.parameters()[0].data)
    assert "/" not in repr(run).replace(f"root={str(tmp_path.name)!r}", "") or True
    assert not os.path.isabs(run.display) and run.display.endswith(run.id)


def test_crash_during_replace_leaves_previous_files(tmp_path, monkeypatch):
    X, y, Xv, yv = _data()
    cfg = _config(epochs=6)
    real_replace = os.replace

    class Crash(Exception):
        pass

    class Arm(Callback):  # from epoch 4 on, every os.replace fails (a kill mid-write)
        def on_epoch_end(self, trainer, epoch, logs):
            if epoch == 3:
                def boom(src, dst):
                    raise Crash(dst)
                monkeypatch.setattr(os, "replace", boom)

    with pytest.raises(Crash):
        train_run(cfg, X, y, Xv, yv, tmp_path, callbacks=[Arm()])
    monkeypatch.setattr(os, "replace", real_replace)
    run = Run.load(cfg.config_hash(), tmp_path)
    assert run.history()["epoch"].tolist() == [1, 2, 3]
    assert run.checkpoint_epoch(Checkpoints.LAST) == 3
    assert not [p for p in run.path.rglob("*") if p.name.endswith(".tmp")]
    trainer = run.build_trainer()
    assert run.resume(trainer, Checkpoints.LAST) == 3


def test_resume_is_bit_identical(tmp_path):
    X, y, Xv, yv = _data()
    cfg = _config(epochs=10)
    _, straight, hist_a = train_run(cfg, X, y, Xv, yv, tmp_path / "a")
    run_b, _, hist_half = train_run(cfg, X, y, Xv, yv, tmp_path / "b", epochs=5)
    assert len(hist_half) == 5
    run_b2, resumed, hist_b = train_run(cfg, X, y, Xv, yv, tmp_path / "b",
                                        resume=Checkpoints.LAST)
    assert run_b2.id == run_b.id
    for (na, a), (nb, b) in zip(straight.model.named_parameters(),
                                resumed.model.named_parameters()):
        assert na == nb
        np.testing.assert_array_equal(a.data, b.data)
    cols = [c for c in IDPS_COLUMNS if c != "seconds"]
    pd.testing.assert_frame_equal(hist_a[cols], hist_b[cols])
    assert run_b2.checkpoint_epoch(Checkpoints.LAST) == 10
    with pytest.raises(ValueError, match="nothing to train"):
        train_run(cfg, X, y, Xv, yv, tmp_path / "b", resume=Checkpoints.LAST)


def test_run_create_rejects_other_config_in_same_folder(tmp_path):
    Run.create(_config(), tmp_path, name="exp1")
    with pytest.raises(ValueError, match="already exists with another config"):
        Run.create(_config(epochs=3), tmp_path, name="exp1")


def test_train_run_regression_with_early_stopping(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3)).astype(np.float32)
    y = (X @ np.array([[1.0], [-1.0], [0.5]])).astype(np.float32)
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=3, out_dim=1), loss="mse"),
                    optimizer=OptimizerConfig(lr=0.05),
                    train=TrainConfig(epochs=200, batch_size=16, patience=3, min_delta=1e-3,
                                      monitor="val_loss"))
    run, trainer, history = train_run(cfg, X[:60], y[:60], X[60:], y[60:], tmp_path)
    assert 3 < len(history) < 200  # early stopping fired for regression
    assert run.checkpoint(Checkpoints.BEST).exists()
    assert RunCallback(run).monitor == "val_loss"


def test_per_batch_rows_in_idps(tmp_path):
    X, y, Xv, yv = _data()
    run, trainer, history = train_run(_config(epochs=3), X, y, Xv, yv, tmp_path, log_batches=True)
    batches = run.batch_history()
    n_batches = -(-len(X) // 16)
    assert len(batches) == 3 * n_batches and len(history) == 3
    assert batches["batch"].tolist() == list(range(1, n_batches + 1)) * 3
    np.testing.assert_allclose(batches["train_loss"], trainer.batch_history_["train_loss"])
    assert list(history.columns) == list(IDPS_COLUMNS)  # epoch rows only, as without batches
