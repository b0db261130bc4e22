"""A first run says that it compiles, once; a warm one says nothing; progress without a terminal
is plain lines; the progress clock starts after the compile.

The cold and warm runs are real: subprocesses with their own empty ``NUMBA_CACHE_DIR`` (one cold
compile of the float32 training loop, shared by the tests through a module fixture).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import types

import numba
import numpy as np
import pytest

import nnjit as nn
from nnjit.engine import compile_notice
from nnjit.engine.program import Program
from nnjit.train.progress import ProgressBar, _Lines
from tests.helpers import installed_nnjit

pytestmark = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="nothing compiles without JIT")

NOTICE = re.compile(r"^nnjit: compiling the training loop for float32 \(first run only, about "
                    r"\d+(-\d+)? s; `nnjit warmup` does this ahead of time\)$")
DONE = re.compile(r"^nnjit: compiled in (\d+\.\d) s \(cached for next time\)$")
PROGRESS = re.compile(r"^epoch (\d+)/(\d+): loss=\S+, val_loss=\S+, val_acc=\S+, lr=\S+ "
                      r"\((\d+\.\d) s(, [^)]*)?\)$")

# What a newcomer's first session does: a verbose fit (the worker-thread path), a fit with a
# callback (the per-epoch path), predict, evaluate, a quiet fit on a new trainer. Records when
# numba finished compiling the training loop and when each progress bar started its clock.
FIRST_SESSION = textwrap.dedent("""
    import json, sys, time
    from numba.core import event
    import nnjit as nn
    from nnjit.engine import interpreter
    from nnjit.train.progress import ProgressBar
    from nnjit.train.callbacks import Callback

    events = []

    class CompileEnd(event.Listener):
        def on_start(self, e):
            pass

        def on_end(self, e):
            if e.data["dispatcher"] is interpreter.execute:
                events.append(("compiled", time.monotonic()))

    event.register("numba:compile", CompileEnd())
    begin = ProgressBar.on_train_begin

    def on_train_begin(self, trainer, logs=None):
        events.append(("bar", time.monotonic()))
        begin(self, trainer, logs)

    ProgressBar.on_train_begin = on_train_begin
    X, y = nn.datasets.load("iris")
    X = (X - X.mean(0)) / X.std(0)

    def trainer():
        return nn.Trainer(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), seed=0)

    t = trainer()
    t.fit(nn.DataLoader(X, y, batch_size=16), epochs=3, val=(X, y), n_iter_no_change=None)
    t.fit(nn.DataLoader(X, y, batch_size=16), epochs=2, val=(X, y), n_iter_no_change=None,
          callbacks=[Callback()])
    t.predict(X)
    t.evaluate((X, y))
    trainer().fit((X, y), epochs=1, verbose=False)
    print("EVENTS " + json.dumps(events))
""")


def _run(args, cache_dir, **env):
    return subprocess.run(args, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), **env})


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """The first session on an empty numba cache (compiles the float32 training loop)."""
    cache = tmp_path_factory.mktemp("numba-cache")
    out = _run([sys.executable, "-c", FIRST_SESSION], cache)
    assert out.returncode == 0, out.stderr[-3000:]
    return out, cache


def test_a_cold_cache_announces_the_compile_once_before_any_progress(cold):
    out, _ = cold
    lines = out.stderr.splitlines()
    notices = [i for i, line in enumerate(lines) if line.startswith("nnjit: compil")]
    assert len(notices) == 2, out.stderr  # one notice and its "compiled in", for five calls
    assert NOTICE.match(lines[notices[0]]) and DONE.match(lines[notices[1]]), out.stderr
    progress = [i for i, line in enumerate(lines) if PROGRESS.match(line)]
    assert progress and notices[1] < progress[0], out.stderr
    assert "\r" not in out.stderr


def test_the_progress_clock_starts_after_the_compile(cold):
    out, _ = cold
    events = json.loads(out.stdout.split("EVENTS ", 1)[1])
    kinds = [kind for kind, _ in events]
    assert kinds == ["compiled", "bar", "bar"], events  # compiled once, before both bars
    assert events[0][1] <= events[1][1]
    compile_seconds = next(float(m.group(1)) for m in map(DONE.match, out.stderr.splitlines())
                           if m)
    # the first fit's last line reports its 3 epochs' own time, not the compile's
    first_fit = [PROGRESS.match(line) for line in out.stderr.splitlines() if PROGRESS.match(line)]
    last = next(m for m in first_fit if m.group(1) == "3")
    assert float(last.group(3)) < compile_seconds


def test_a_warm_cache_says_nothing_and_the_demo_writes_lines_without_a_terminal(cold):
    _, cache = cold
    out = _run([installed_nnjit(), "demo", "--dataset", "iris", "--epochs", "3"], cache)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "nnjit: compil" not in out.stderr
    assert "\r" not in out.stderr and "\r" not in out.stdout
    # nothing but progress lines: the first poll of the worker thread, then the last epoch
    epochs = [PROGRESS.match(line) for line in out.stderr.splitlines()]
    assert all(epochs), out.stderr
    epochs = [int(m.group(1)) for m in epochs]
    assert epochs == sorted(epochs) and epochs[-1] == 3, out.stderr
    assert "fit: 3 epochs of compiled training in" in out.stdout


def test_the_notice_follows_numba_compiles_of_a_watched_function(capsys, monkeypatch):
    """The listener speaks once per compile of a watched dispatcher, and never for a cached
    overload or an unwatched function (a tiny function compiled for real, without a cache)."""

    @numba.njit(cache=False)
    def tiny(values):
        return values.sum()

    @numba.njit(cache=False)
    def other(values):
        return values.max()

    monkeypatch.setattr(compile_notice, "_pace", [1.0])  # (no earlier piece set the pace)
    compile_notice.watch(tiny, "a test function", 0)
    before = compile_notice.compile_seconds()
    tiny(np.ones(3, np.float32))
    assert compile_notice.compile_seconds() > before
    tiny(np.ones(4, np.float32))  # compiled already
    other(np.ones(3, np.float32))  # not watched
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    # (a piece the table does not name is estimated as a small family)
    other = compile_notice.OTHER_PIECE_SECONDS
    assert err[0] == ("nnjit: compiling a test function for float32 (first run only, about "
                      f"{other}-{2 * other} s; `nnjit warmup` does this ahead of time)")
    assert re.match(r"^nnjit: compiled in \d+\.\d s \(not cached\)$", err[1]), err  # cache=False
    monkeypatch.setenv("NNJIT_COMPILE_NOTICE", "0")
    tiny(np.ones(3, np.float64))  # a new overload, compiled silently
    assert capsys.readouterr().err == ""


def test_the_notice_states_each_piece_s_measured_compile_time(monkeypatch):
    """The training loop and each built-in family say their measured time, up to twice it
    before this machine's pace is known; a user's family the small families' (docs/
    performance.md, the cold-start table)."""
    from nnjit.engine.dispatch import family_entry
    from nnjit.ops.opcodes import BUILTIN_FAMILIES

    monkeypatch.setattr(compile_notice, "_pace", [1.0])  # (no piece compiled here yet)
    say = compile_notice.start_message
    loop = compile_notice.ESTIMATED_SECONDS["the training loop"]
    assert say("the training loop", "float32") == (
        f"nnjit: compiling the training loop for float32 (first run only, about "
        f"{loop}-{2 * loop} s; `nnjit warmup` does this ahead of time)")
    for family in BUILTIN_FAMILIES:
        if not family.core:  # every family of the table has its own measured estimate
            what = family_entry(family).what
            assert what in compile_notice.ESTIMATED_SECONDS, what
            seconds = compile_notice.ESTIMATED_SECONDS[what]
            assert f"about {seconds}-{2 * seconds} s" in say(what, "float64")
    other = compile_notice.OTHER_PIECE_SECONDS
    assert f"about {other}-{2 * other} s" in say("the silu family", "float32")


def test_later_notices_scale_to_this_machines_pace_and_say_when_they_run_late(monkeypatch):
    """Once a piece compiled here, later estimates are at this machine's pace (issue 25, item
    18: 17 s promised, 33 s taken on a newcomer's machine), and a tick past the estimate says
    the compile is slower here, not hung."""
    monkeypatch.setattr(compile_notice, "_pace", [1.0])
    piece = compile_notice._Piece("the conv family", "float32")
    piece.start = time.perf_counter() - 2 * compile_notice.ESTIMATED_SECONDS["the conv family"]
    piece.finish(cached=True)  # it took twice its estimate
    assert compile_notice._pace[0] == pytest.approx(2.0, rel=0.01)
    pooling = compile_notice.ESTIMATED_SECONDS["the pooling family"]
    assert f"about {2 * pooling} s" in compile_notice.start_message("the pooling family",
                                                                     "float32")
    assert "longer than estimated" in compile_notice.tick_message("the pooling family",
                                                                  2 * pooling + 1)
    assert "longer than" not in compile_notice.tick_message("the pooling family", 1)


def test_a_long_compile_says_it_still_compiles(capsys, monkeypatch):
    """A terminal is never silent for long: every TICK_SECONDS a line says what still compiles
    (a piece expected to be quick says what it is first)."""
    import time

    @numba.njit(cache=False)
    def slow(values):
        return values.sum()

    begin = compile_notice._Piece.begin

    def begin_then_take_a_while(self):  # (a compile long enough for a few ticks)
        begin(self)
        time.sleep(0.3)

    monkeypatch.setattr(compile_notice, "TICK_SECONDS", 0.05)
    monkeypatch.setattr(compile_notice._Piece, "begin", begin_then_take_a_while)
    compile_notice.watch(slow, "the batch loader", 0)  # a quiet piece (estimated 1 s)
    slow(np.ones(3, np.float32))
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("nnjit: compiling the batch loader for float32"), err
    assert any(re.match(r"^nnjit: still compiling the batch loader, \d+ s$", line)
               for line in err), err
    assert err[-1].startswith("nnjit: compiled in"), err


def test_a_quiet_fit_without_callbacks_stays_one_plain_call(monkeypatch):
    def no_prepare(*args, **kwargs):
        raise AssertionError("verbose=0 without callbacks must not add a separate compile step")

    monkeypatch.setattr(Program, "prepare", no_prepare)
    X = np.random.default_rng(0).normal(size=(16, 4))
    history = nn.Trainer(nn.Sequential(nn.Linear(4, 2)), seed=0).fit(
        (X, np.arange(16) % 2), epochs=2, verbose=0)
    assert len(history) == 2


def test_line_progress_rate_and_time_left_count_from_the_first_epoch_clock(monkeypatch):
    """Fake clock: 15 s of compile before on_train_begin do not enter the rate."""
    now = [85.0]
    monkeypatch.setattr(_Lines, "clock", staticmethod(lambda: now[0]))
    out = io.StringIO()
    bar = ProgressBar(style="lines", file=out, interval=5)
    now[0] = 100.0  # compiled from 85 s to 100 s; fit() starts the bar after that
    bar.on_train_begin(None, {"epochs": 100, "initial_epoch": 0})
    logs = {"train_loss": 0.5, "val_loss": 0.25, "lr": 0.01}
    for epoch in range(1, 101):
        now[0] = 100.0 + 0.5 * epoch  # 2 epochs per second
        bar.on_epoch_end(None, epoch, logs)
    bar.on_train_end(None)
    lines = out.getvalue().splitlines()
    assert lines[0] == ("epoch 1/100: loss=0.5000, val_loss=0.2500, lr=0.01 "
                        "(0.5 s, 2 epoch/s, about 50 s left)")
    assert lines[1] == ("epoch 11/100: loss=0.5000, val_loss=0.2500, lr=0.01 "  # 5 s later
                        "(5.5 s, 2 epoch/s, about 45 s left)")
    assert len(lines) == 11 and lines[-1].startswith("epoch 100/100: ")
    assert lines[-1].endswith("(50.0 s, 2 epoch/s)")


def test_line_progress_ends_with_the_last_epoch_shown(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(_Lines, "clock", staticmethod(lambda: now[0]))
    out = io.StringIO()
    bar = ProgressBar(style="lines", file=out)
    bar.on_train_begin(None, {"epochs": 50, "initial_epoch": 10})
    for epoch in range(11, 18):  # early stopping at epoch 17
        now[0] += 0.1
        bar.advance(1, {"train_loss": 1.0})
    bar.on_train_end(None)
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 11/50", "epoch 17/50"]
    assert lines[0].endswith("(0.1 s, 10 epoch/s, about 4 s left)")
    assert lines[1].endswith("(0.7 s, 10 epoch/s)")  # stopped early: no time left to guess


def test_auto_style_draws_a_bar_in_a_jupyter_kernel(monkeypatch):
    """tqdm.autonotebook's rule (no Jupyter in the test environment: a stand-in IPython)."""
    assert not ProgressBar.default_enabled(io.StringIO())

    class Shell:
        config = {"IPKernelApp": {}}

    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=Shell))
    assert ProgressBar.default_enabled(io.StringIO())
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: None))
    assert not ProgressBar.default_enabled(io.StringIO())  # a terminal IPython: not a kernel


def test_progress_bar_arguments_are_checked():
    with pytest.raises(ValueError, match="style"):
        ProgressBar(style="fancy")
    with pytest.raises(ValueError, match="interval"):
        ProgressBar(interval=-1)


def test_warmup_drops_its_own_hint_only_while_it_runs():
    """`nnjit warmup` does not suggest itself, and the hint is back once it returns (it used to
    clear the hint table for the rest of the process)."""
    with compile_notice.no_warmup_hint():
        assert "warmup" not in compile_notice.start_message("the training loop", "float32")
    assert "`nnjit warmup` does this" in compile_notice.start_message("the training loop",
                                                                      "float32")
