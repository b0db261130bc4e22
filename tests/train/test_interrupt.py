"""Ctrl-C during a fit: a stop request honoured after the current epoch (worker-thread fits and
chunked fits), progress drawn by the main thread, and the plain call left alone."""

from __future__ import annotations

import _thread
import signal
import threading
import time

import numpy as np
import pytest

import nnjit as nn
from nnjit.train.builtin_callbacks import ProgressBar
from nnjit.train.trainer import Trainer


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Python's own SIGINT handler, as in a foreground terminal. A process started in the
    background by a non-interactive shell (CI scripts, ``cmd &``) inherits SIGINT ignored, and
    Python then leaves it ignored: Ctrl-C cannot reach such a process at all."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _digits():
    X, y = nn.datasets.load("digits")
    X = nn.datasets.standardize(np.asarray(X, dtype=np.float32))
    return X[:1200], y[:1200], X[1200:], y[1200:]


def _trainer(seed=0):
    nn.set_seed(seed)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return nn.Trainer(model, nn.Adam(lr=1e-3), seed=seed)


def _interrupt_after(seconds, how, seen_threads):
    def fire():
        time.sleep(seconds)
        seen_threads.extend(t.name for t in threading.enumerate())
        if how == "interrupt_main":
            _thread.interrupt_main()
        else:
            signal.raise_signal(signal.SIGINT)

    t = threading.Thread(target=fire, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("how", ["interrupt_main", "raise_signal"])
def test_ctrl_c_stops_a_threaded_fit_after_the_epoch(how, capsys):
    X, y, Xv, yv = _digits()
    trainer = _trainer()
    trainer.fit((X[:64], y[:64]), epochs=1, verbose=False)  # compile outside the timing
    trainer = _trainer()
    threads = []
    sender = _interrupt_after(0.5, how, threads)
    epochs = 100_000  # far longer than the test: only the stop request ends it
    start = time.perf_counter()
    history = trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=epochs, val=(Xv, yv),
                          n_iter_no_change=None, verbose=1)
    took = time.perf_counter() - start
    sender.join()
    assert "nnjit-fit" in threads  # the compiled loop ran in the worker thread
    assert 1 <= len(history) < epochs and took < 30
    assert history["epoch"].tolist() == list(range(1, len(history) + 1))
    assert history.attrs["stop_reason"] == "interrupted (KeyboardInterrupt)"
    assert history.attrs["restored_best"]
    best = history["val_loss"].min()
    assert trainer.evaluate(Xv, yv)["loss"] == pytest.approx(best, rel=1e-5)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler put back
    err = capsys.readouterr()
    assert "stopping after the current epoch" in err.err
    assert "interrupted (KeyboardInterrupt)" in err.out  # the summary line
    assert trainer.fit_state()["stopped"] == 0.0  # a Ctrl-C is not early stopping
    # the trainer is usable afterwards, and continues from where it stopped
    more = trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=len(history) + 2,
                       initial_epoch=len(history), val=(Xv, yv), n_iter_no_change=None,
                       verbose=False)
    assert more["epoch"].tolist() == [len(history) + 1, len(history) + 2]


def test_ctrl_c_in_a_chunked_fit_keeps_the_run(tmp_path):
    """With callbacks (a run folder), Ctrl-C lands as a stop request too: the epoch that was
    running completes and is written, then the run ends cleanly."""
    from nnjit.experiment import (
        Checkpoints,
        ModelConfig,
        NetConfig,
        OptimizerConfig,
        RunConfig,
        TrainConfig,
    )
    from nnjit.experiment.runs import train_run

    X, y, Xv, yv = _digits()
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=64, out_dim=10, hidden_dims=(32,))),
                    optimizer=OptimizerConfig(lr=1e-3),
                    train=TrainConfig(epochs=100_000, batch_size=64, patience=None,
                                      checkpoints=["last", "best"]))
    sender = _interrupt_after(1.0, "interrupt_main", [])
    run, trainer, history = train_run(cfg, X, y, Xv, yv, tmp_path)
    sender.join()
    n = len(history)
    assert 1 <= n < 100_000
    assert trainer.history_.attrs["stop_reason"] == "interrupted (KeyboardInterrupt)"
    assert len(trainer.history_) == n  # every epoch that ran was written to idps.csv
    assert run.checkpoint_epoch(Checkpoints.LAST) == n


def test_progress_bar_is_drawn_by_the_main_thread(monkeypatch, capsys):
    monkeypatch.setattr(ProgressBar, "default_enabled", staticmethod(lambda stream=None: True))
    X, y, Xv, yv = _digits()
    trainer = _trainer()
    history = trainer.fit(nn.DataLoader(X, y, batch_size=64), epochs=7, val=(Xv, yv),
                          n_iter_no_change=None, verbose=1)
    assert len(history) == 7
    err = capsys.readouterr().err
    assert "7/7" in err and "val_loss=" in err


def test_silent_fit_without_callbacks_is_the_plain_call(monkeypatch):
    def no_worker(*args, **kwargs):
        raise AssertionError("verbose=0 without callbacks must not use a worker thread")

    monkeypatch.setattr(Trainer, "_run_in_worker", no_worker)
    X, y, _, _ = _digits()
    history = _trainer().fit((X, y), epochs=3, verbose=0)
    assert len(history) == 3


def test_threaded_fit_equals_the_plain_call():
    X, y, Xv, yv = _digits()
    a, b = _trainer(3), _trainer(3)
    ha = a.fit(nn.DataLoader(X, y, batch_size=32), epochs=5, val=(Xv, yv), verbose=0)
    hb = b.fit(nn.DataLoader(X, y, batch_size=32), epochs=5, val=(Xv, yv), verbose=1)
    cols = [c for c in ha.columns if c != "seconds"]
    np.testing.assert_array_equal(ha[cols].to_numpy(), hb[cols].to_numpy())
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        np.testing.assert_array_equal(pa.data, pb.data)


def test_errors_in_the_worker_reach_the_caller():
    X, y, _, _ = _digits()
    nn.set_seed(0)
    trainer = nn.Trainer(nn.Sequential(nn.Linear(64, 1)), nn.Adam(lr=1e-3), "mse", seed=0)
    target = y.astype(np.float32).reshape(-1, 1)
    trainer.fit((X, target), epochs=1, verbose=0)
    with pytest.raises(nn.TrainingDivergedError):  # squares of 1e30 overflow float32
        trainer.fit((X * np.float32(1e30), target), epochs=3, verbose=1)


def test_progress_bar_with_callbacks_is_a_callback(monkeypatch, capsys):
    """With callbacks the fit is chunked: the bar is one more callback (in a terminal)."""
    from nnjit.train.callbacks import Callback

    monkeypatch.setattr(ProgressBar, "default_enabled", staticmethod(lambda stream=None: True))
    seen = []

    class Spy(Callback):
        def on_train_begin(self, trainer, logs=None):
            seen.extend(type(c).__name__ for c in trainer._callbacks.callbacks)

    X, y, Xv, yv = _digits()
    _trainer().fit(nn.DataLoader(X, y, batch_size=64), epochs=4, val=(Xv, yv), verbose=1,
                   callbacks=[Spy()])
    assert seen == ["Spy", "ProgressBar"]
    assert "4/4" in capsys.readouterr().err


def test_second_ctrl_c_still_ends_the_fit_cleanly():
    X, y, Xv, yv = _digits()
    trainer = _trainer()

    def fire():
        time.sleep(0.4)
        _thread.interrupt_main()
        time.sleep(0.001)
        _thread.interrupt_main()

    sender = threading.Thread(target=fire, daemon=True)
    sender.start()
    history = trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=100_000, val=(Xv, yv),
                          n_iter_no_change=None, verbose=1)
    sender.join()
    assert 1 <= len(history) < 100_000
    assert history.attrs["stop_reason"] == "interrupted (KeyboardInterrupt)"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
