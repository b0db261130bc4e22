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
from nnjit.train import trainer as trainer_module
from nnjit.train.progress import ProgressBar


pytestmark = pytest.mark.usefixtures("python_sigint_handler")


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
    # the trainer is usable afterwards and continues from the restored best weights, which it
    # says (an exact continuation needs a checkpoint saved during the fit)
    with pytest.warns(UserWarning, match="which the previous fit restored"):
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
    from nnjit.experiment.train_run import train_run

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

    monkeypatch.setattr(trainer_module, "run_with_progress", no_worker)
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


def test_a_users_progress_bar_is_the_only_one(capsys):
    """A ProgressBar among the callbacks of a verbose fit is the bar: each line once (issue 25,
    item 2: docs/experiments.md's example printed every line twice)."""
    X, y, _, _ = _digits()
    _trainer().fit(nn.DataLoader(X, y, batch_size=64), epochs=4, verbose=1,
                   callbacks=[ProgressBar(style="lines", interval=0.0)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in lines] == [f"epoch {k}/4" for k in (1, 2, 3, 4)]


def test_the_last_progress_line_is_the_last_epoch_the_fit_kept(capsys):
    """A Ctrl-C (KeyboardInterrupt) in an earlier callback's on_epoch_end stops the fit after that
    epoch, which the history keeps, before the bar saw it: its last line still names that epoch
    (issue 25, item 5: after two Ctrl-C, the last line said epoch 43 of a run holding 44)."""
    from nnjit.train.callbacks import Callback

    class CtrlC(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            if epoch == 3:
                raise KeyboardInterrupt

    X, y, _, _ = _digits()
    trainer = _trainer()
    history = trainer.fit(nn.DataLoader(X, y, batch_size=64), epochs=8, verbose=1,
                          callbacks=[CtrlC(), ProgressBar(style="lines", interval=0.0)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch ")]
    assert list(history["epoch"]) == [1, 2, 3]
    assert [line.split(":")[0] for line in lines] == ["epoch 1/8", "epoch 2/8", "epoch 3/8"]
    assert "left" not in lines[-1]


def test_the_first_progress_line_is_the_first_epoch_and_a_finished_fit_says_no_time_left(
        capsys):
    """The main thread polls the compiled loop's history: a first poll finding several epochs
    done shows the first epoch first, then the latest; lines written once the fit is over
    estimate no time left (issue 25, item 5). The fit here usually ends before the first poll;
    on a loaded machine a poll may come during it, whose line may estimate the time left."""
    X, y, _, _ = _digits()
    _trainer().fit(nn.DataLoader(X, y, batch_size=64), epochs=30, verbose=1)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("epoch ")]
    assert lines[0].startswith("epoch 1/30") and lines[-1].startswith("epoch 30/30"), err
    assert "left" not in lines[-1], err


# -- real SIGINTs to a process running a long fit -----------------------------------------------
def _start_child(mode: str, rows: int):
    import os
    import subprocess
    import sys
    from pathlib import Path

    child = Path(__file__).with_name("sigint_child.py")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, str(child), mode, str(rows)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _read_until(proc, word: str) -> str:
    for line in proc.stdout:
        if line.startswith(word):
            return line
    raise AssertionError(f"child ended before {word!r}: {proc.stderr.read()[-2000:]}")


@pytest.mark.parametrize("mode", ["threaded", "chunked"])
def test_real_sigint_twice_abandons_a_long_epoch_quickly(mode):
    """A second Ctrl-C is seen by the compiled loop before its next job: the process ends well
    within one (long) epoch, the completed epochs kept in ``trainer.history_``."""
    proc = _start_child(mode, 60_000)
    try:
        epoch = float(_read_until(proc, "epoch").split()[1])
        _read_until(proc, "ready")
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)  # first: stop after the current epoch
        time.sleep(0.2)
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)  # second: stop now
        aborted = _read_until(proc, "aborted")
        took = time.perf_counter() - sent
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 3, (aborted, out, err[-2000:])
    assert "stopping after the current epoch" in err
    assert aborted.startswith("aborted 0") and "during epoch 1: that epoch was abandoned" in aborted
    assert took < epoch / 4, (took, epoch)  # a job or so, not the rest of the epoch


@pytest.mark.parametrize("mode", ["threaded", "chunked"])
def test_real_sigint_once_stops_after_the_epoch(mode):
    proc = _start_child(mode, 4_000)
    try:
        _read_until(proc, "ready")
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, (out, err[-2000:])
    done = next(line for line in out.splitlines() if line.startswith("done")).split()
    assert 1 <= int(done[1]) < 1000
    assert "interrupted (KeyboardInterrupt)" in out


def test_the_compiled_loop_refuses_a_task_without_rows():
    """Zero rows give zero jobs: the compiled loop returns NO_ROWS at once (it used to spin
    forever); Python's checks normally say so first, naming the argument."""
    from nnjit.engine import fields
    from nnjit.train.inference import inference_options

    trainer = _trainer()
    X, y, _, _ = _digits()
    trainer.fit((X[:32], y[:32]), epochs=1, verbose=0)
    empty_x = np.zeros((0, 64), np.float32)
    empty_y = np.zeros((0, 1), np.float32)
    state = np.zeros(fields.STATE_WIDTH)
    state[fields.ST_JOB] = -1
    for task in (fields.TASK_FIT, fields.TASK_PREDICT, fields.TASK_EVALUATE, fields.TASK_GRADIENT):
        with pytest.raises(ValueError, match="no rows to run"):
            trainer.program.run(inference_options(task, 32, trainer._dense_mode),
                                (empty_x, empty_y, empty_x, empty_y, np.zeros(0, np.int64)),
                                trainer._no_step(), state, trainer._best, np.zeros((5, 7)),
                                np.zeros((0, 10), np.float32))
