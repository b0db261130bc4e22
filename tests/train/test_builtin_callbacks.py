"""Built-in callbacks: EarlyStopping, LRMonitor, CSVLogger, ModelCheckpoint, ProgressBar,
TensorBoard / W&B (optional extras)."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import nnjit as nn
from nnjit.schedulers import StepLR
from nnjit.train.builtin_callbacks import (
    CSVLogger,
    EarlyStopping,
    LRMonitor,
    ModelCheckpoint,
    TensorBoard,
    WandbLogger,
    resolve_mode,
)
from nnjit.train.progress import ProgressBar


def _regression(n=64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    y = (X @ np.array([[1.0], [-2.0], [0.5]]) + 0.1 * rng.normal(size=(n, 1))).astype(np.float32)
    return X, y


def _reg_trainer(lr=0.01, seed=0):
    nn.set_seed(seed)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    return nn.Trainer(model, nn.Adam(lr=lr), nn.MSELoss(), seed=seed)


def _iris_trainer():
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(X)
    nn.set_seed(1)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return nn.Trainer(model, nn.Adam(lr=0.01), seed=1), X, y


def test_resolve_mode():
    assert resolve_mode("val_loss", "auto", "x") == "min"
    assert resolve_mode("val_accuracy", "auto", "x") == "max"
    assert resolve_mode("train_loss", "max", "x") == "max"
    with pytest.raises(ValueError, match="mode must be"):
        resolve_mode("val_loss", "up", "x")


def test_early_stopping_regression_stops_and_restores_best():
    X, y = _regression()
    trainer = _reg_trainer(lr=0.5)  # a large rate makes val_loss bounce
    es = EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
    history = trainer.fit((X, y), epochs=60, val=(X[:16], y[:16]), n_iter_no_change=None,
                          restore_best=False, verbose=False, callbacks=[es])
    assert es.stopped_epoch == len(history) < 60
    assert es.wait == 2
    best = history["val_loss"].to_numpy()
    assert es.best == best.min() and es.best_epoch == int(np.argmin(best)) + 1
    # the restored weights reproduce the best validation loss
    assert trainer.evaluate(X[:16], y[:16])["loss"] == pytest.approx(es.best, rel=1e-5)


def test_early_stopping_patience_zero_and_min_delta():
    X, y = _regression()
    trainer = _reg_trainer()
    es = EarlyStopping(monitor="train_loss", patience=0, min_delta=1e9)
    history = trainer.fit((X, y), epochs=10, n_iter_no_change=None, verbose=False,
                          callbacks=[es])
    assert len(history) == 2 and es.best_epoch == 1  # epoch 1 beats inf; epoch 2 not by 1e9


def test_early_stopping_unknown_monitor_lists_available():
    X, y = _regression()
    trainer = _reg_trainer()
    with pytest.raises(ValueError, match=r"'val_los' is not logged; available metrics: "
                                         r"train_loss, val_loss, lr"):
        trainer.fit((X, y), epochs=5, val=(X, y), verbose=False,
                    callbacks=[EarlyStopping(monitor="val_los")])
    # an accuracy on regression exists as a column but is NaN: also an error
    with pytest.raises(ValueError, match="'val_accuracy' has no value"):
        _reg_trainer().fit((X, y), epochs=5, val=(X, y), verbose=False,
                           callbacks=[EarlyStopping(monitor="val_accuracy")])


def test_early_stopping_bad_args():
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(patience=-1)
    with pytest.raises(ValueError, match="min_delta"):
        EarlyStopping(min_delta=-1)
    with pytest.raises(ValueError, match="mode"):
        EarlyStopping(mode="lower")


def test_lr_monitor_records_schedule():
    X, y = _regression()
    trainer = _reg_trainer(lr=0.1)
    mon = LRMonitor()
    trainer.fit((X, y), epochs=4, n_iter_no_change=None, verbose=False, callbacks=[mon],
                scheduler=StepLR(step_size=1, gamma=0.5))
    assert len(mon.lrs) == 4 and [e for e, _ in mon.history] == [1, 2, 3, 4]
    assert mon.lrs == sorted(mon.lrs, reverse=True) and mon.lrs[-1] < mon.lrs[0]


def test_csv_logger_header_once_and_append(tmp_path):
    X, y = _regression()
    path = tmp_path / "logs" / "h.csv"
    trainer = _reg_trainer()
    trainer.fit((X, y), epochs=3, val=(X, y), n_iter_no_change=None, verbose=False,
                callbacks=[CSVLogger(path)])
    df = pd.read_csv(path)
    assert list(df.columns) == ["epoch", "train_loss", "train_accuracy", "val_loss",
                                "val_accuracy", "lr", "seconds"]
    assert df["epoch"].tolist() == [1, 2, 3]
    np.testing.assert_array_equal(df["val_loss"].to_numpy(), trainer.history_["val_loss"])
    trainer.fit((X, y), epochs=2, val=(X, y), n_iter_no_change=None, verbose=False,
                callbacks=[CSVLogger(path, append=True)])
    text = path.read_text()
    assert text.count("epoch,") == 1 and len(pd.read_csv(path)) == 5
    trainer.fit((X, y), epochs=1, verbose=False, callbacks=[CSVLogger(path)])
    assert len(pd.read_csv(path)) == 1  # not appending: a new file


def test_model_checkpoint_every_n_and_best(tmp_path):
    trainer, X, y = _iris_trainer()
    every = ModelCheckpoint(tmp_path / "every" / "e{epoch:02d}.nne", every_n_epochs=2)
    best = ModelCheckpoint(str(tmp_path / "best") + "/", save_best_only=True,
                           monitor="val_accuracy")
    trainer.fit((X, y), epochs=5, val=(X, y), n_iter_no_change=None, verbose=False,
                callbacks=[every, best])
    assert [p.name for p in every.saved] == ["e02.nne", "e04.nne"]
    assert best.best_path == tmp_path / "best" / "best.nne" and best.best_path.exists()
    assert 1 <= len(best.saved) <= 5
    # the saved checkpoint loads back into a fresh trainer
    fresh, _, _ = _iris_trainer()
    fresh.fit((X, y), epochs=1, verbose=False)
    fresh.load_checkpoint(every.saved[-1])
    with pytest.raises(ValueError, match="cannot format"):
        ModelCheckpoint(tmp_path / "{nope}.nne").on_epoch_end(trainer, 1, {"epoch": 1})


def test_progress_bar(tmp_path):
    X, y = _regression()
    out = io.StringIO()
    bar = ProgressBar(verbose=1, file=out, style="bar")
    _reg_trainer().fit((X, y), epochs=3, val=(X, y), n_iter_no_change=None, verbose=False,
                       callbacks=[bar])
    text = out.getvalue()
    assert "3/3" in text and "val_loss=" in text and "lr=" in text and "\r" in text
    lines = io.StringIO()  # not a terminal: plain lines by default (tests/train/test_first_run)
    _reg_trainer().fit((X, y), epochs=3, val=(X, y), n_iter_no_change=None, verbose=False,
                       callbacks=[ProgressBar(file=lines)])
    text = lines.getvalue()
    assert "\r" not in text and text.splitlines()[-1].startswith("epoch 3/3: loss=")
    silent = ProgressBar(verbose=0)
    _reg_trainer().fit((X, y), epochs=2, verbose=False, callbacks=[silent])
    assert silent.bar is None


def test_optional_extras_not_imported_by_nnjit():
    code = ("import sys, nnjit, nnjit.train.builtin_callbacks, nnjit.train.progress, "
            "nnjit.experiment.train_run, nnjit.experiment.report; "
            "bad = [m for m in ('tqdm', 'tensorboardX', 'wandb') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(importlib.util.find_spec("tensorboardX") is not None,
                    reason="tensorboardX is installed")
def test_tensorboard_missing_names_the_extra():
    with pytest.raises(ImportError, match=r"nnjit\[tensorboard\]"):
        TensorBoard("tb")


@pytest.mark.skipif(importlib.util.find_spec("tensorboardX") is None,
                    reason="tensorboardX not installed")
def test_tensorboard_writes_events(tmp_path):
    X, y = _regression()
    _reg_trainer().fit((X, y), epochs=2, verbose=False, callbacks=[TensorBoard(tmp_path)])
    assert any(p.name.startswith("events.") for p in tmp_path.rglob("*"))


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed")
def test_wandb_missing_names_the_extra():
    with pytest.raises(ImportError, match=r"nnjit\[wandb\]"):
        WandbLogger()


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb not installed")
def test_wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    X, y = _regression()
    _reg_trainer().fit((X, y), epochs=2, verbose=False,
                       callbacks=[WandbLogger(project="nnjit-test", dir=str(tmp_path))])
    assert any(tmp_path.rglob("*.wandb"))
