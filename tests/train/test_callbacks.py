"""Callback hooks: order, logs, stopping."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.train.callbacks import Callback


class Recorder(Callback):
    def __init__(self):
        self.calls = []

    def on_train_begin(self, trainer, logs=None):
        self.calls.append("train_begin")

    def on_epoch_begin(self, trainer, epoch, logs=None):
        self.calls.append(f"begin{epoch}")

    def on_epoch_end(self, trainer, epoch, logs):
        self.calls.append(f"end{epoch}:{int(logs['epoch'])}")
        assert set(logs) >= {"train_loss", "val_loss", "val_accuracy", "lr", "seconds"}

    def on_train_end(self, trainer, logs=None):
        self.calls.append("train_end")


def fit(callbacks, epochs=3, **kw):
    X, y = nn.datasets.load_iris()
    trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), seed=0)
    history = trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=epochs, val=(X, y),
                          callbacks=callbacks, verbose=False, n_iter_no_change=None, **kw)
    return trainer, history


def test_hooks_fire_in_order_with_logs():
    rec = Recorder()
    fit([rec])
    assert rec.calls == ["train_begin", "begin1", "end1:1", "begin2", "end2:2", "begin3",
                         "end3:3", "train_end"]


def test_stop_training_flag_and_plain_callables_mix():
    class StopAt2(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            if epoch == 2:
                trainer.stop_training = True

    seen = []
    trainer, history = fit([StopAt2(), lambda h: seen.append(len(h))], epochs=10)
    assert len(history) == 2 and seen == [1, 2]
    assert history.attrs["stop_reason"] == "stopped by a callback"


def test_non_callable_callback_is_rejected():
    with pytest.raises(TypeError, match=r"callbacks must be Callback instances or callables"):
        fit([42])


def test_callbacks_see_live_weights_before_restore(tmp_path):
    """A checkpoint written in on_epoch_end holds that epoch's weights."""
    saved = []

    class Snapshot(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            saved.append(np.concatenate([p.data.ravel().copy()
                                         for p in trainer.model.parameters()]))

    trainer, _ = fit([Snapshot()], epochs=3)
    assert len(saved) == 3 and not np.array_equal(saved[0], saved[2])


def test_keyboard_interrupt_between_epochs_stops_cleanly():
    """Ctrl-C arrives between compiled epochs: history kept, best weights restored, hooks end."""
    rec = Recorder()

    class CtrlC(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            if epoch == 3:
                raise KeyboardInterrupt

    trainer, history = fit([rec, CtrlC()], epochs=10)
    assert len(history) == 3
    assert history.attrs["stop_reason"] == "interrupted (KeyboardInterrupt)"
    assert history.attrs["restored_best"]
    assert rec.calls[-1] == "train_end"
    X, y = nn.datasets.load_iris()
    best = history["val_loss"].min()
    assert trainer.evaluate(X, y)["loss"] == pytest.approx(best, rel=1e-5)
