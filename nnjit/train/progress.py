"""The progress of a fit: :class:`ProgressBar`, a tqdm bar in a terminal or a notebook and plain
lines elsewhere (:class:`_Lines`), and :func:`in_notebook`.

``Trainer.fit(verbose=1)`` shows one: drawn by the main thread while the compiled loop runs in a
worker thread, or, in a fit with callbacks, as the last of them. ``tqdm`` (optional) is imported
only when a bar starts, never by ``import nnjit``.
"""

from __future__ import annotations

import math
import sys
import time

from nnjit.checks import Choice, check_real
from nnjit.train.builtin_callbacks import _is_missing
from nnjit.train.callbacks import Callback

__all__ = ["ProgressBar", "in_notebook"]


def in_notebook() -> bool:
    """Whether this code runs in a Jupyter kernel: tqdm.autonotebook's rule (IPython imported and
    its shell started by ``IPKernelApp``), without importing IPython or tqdm."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
        return shell is not None and "IPKernelApp" in shell.config
    except Exception:  # an IPython without get_ipython or a shell without config
        return False


class ProgressBar(Callback):
    """Progress over the epochs, showing loss, val_loss, a metric and lr: a tqdm bar in a terminal
    or a notebook, and plain lines elsewhere (CI logs, pipes, files), where a redrawn bar would
    only pile up carriage returns.

    Its clock starts in ``on_train_begin``, which :meth:`Trainer.fit` calls after compiling the
    training loop, so rates and times left do not count a first run's compile.

    Args:
        verbose: 0 disables it; 1 or ``None`` (default) shows it.
        total: number of epochs (default: read from the trainer when training starts).
        file: where it writes (default ``sys.stderr``).
        leave: keep the bar when training ends.
        style: ``"auto"`` (default): a bar when ``file`` is a terminal or the code runs in a
            Jupyter kernel (``tqdm.auto`` then draws its notebook widget), else lines;
            ``"bar"`` or ``"lines"`` to choose.
        interval: line style: seconds between two lines (the first and the last epoch always
            get one).
    """

    STYLES = ("auto", "bar", "lines")

    def __init__(self, verbose: int | None = None, total: int | None = None, file=None,
                 leave: bool = True, style: str = "auto", interval: float = 5.0):
        style = Choice(*self.STYLES, says=f"one of {', '.join(self.STYLES)}").check(
            "ProgressBar: style", style)
        seconds = "a number of seconds >= 0"  # inf too: a line for the first and last epoch only
        interval = check_real(interval, "ProgressBar: interval", seconds)
        if not interval >= 0:
            raise ValueError(f"ProgressBar: interval must be {seconds}, got {interval!r}")
        self.file = file
        self.enabled = verbose is None or bool(verbose)
        self.total, self.leave = total, leave
        self.style, self.interval = style, interval
        self.bar = None  # the tqdm bar or the line writer while training
        self.advanced = False  # whether an epoch was shown since on_train_begin

    @staticmethod
    def default_enabled(stream=None) -> bool:
        """Whether ``style="auto"`` draws a bar: ``stream`` (default stderr) is a terminal, or
        this is a Jupyter kernel. Otherwise it writes lines."""
        stream = sys.stderr if stream is None else stream
        try:
            if stream.isatty():
                return True
        except (AttributeError, ValueError):
            pass
        return in_notebook()

    @property
    def active(self) -> bool:
        """True between ``on_train_begin`` and ``on_train_end`` when it shows anything."""
        return self.bar is not None

    def on_train_begin(self, trainer, logs=None):
        if not self.enabled:
            return
        logs = logs or {}
        self.advanced = False
        total = self.total or logs.get("epochs")
        initial = logs.get("initial_epoch", 0)
        style = self.style
        if style == "auto":
            style = "bar" if self.default_enabled(self.file) else "lines"
        if style == "lines":
            self.bar = _Lines(total, initial, self.file, self.interval)
            return
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, initial=initial, unit="epoch", file=self.file,
                        leave=self.leave, dynamic_ncols=True)

    def on_epoch_end(self, trainer, epoch, logs):
        self.advance(1, logs)

    def advance(self, epochs: int, logs: dict, final: bool = False) -> None:
        """Move the bar by ``epochs`` and show ``logs`` (the latest epoch's row); ``final``: the
        fit is already over (a line then estimates no time left)."""
        if self.bar is None or epochs <= 0:
            return
        self.advanced = True
        post = {}
        for key, label in (("train_loss", "loss"), ("val_loss", "val_loss"),
                           ("val_accuracy", "val_acc"), ("train_accuracy", "acc")):
            value = logs.get(key)
            if not _is_missing(value) and not (label == "acc" and "val_acc" in post):
                post[label] = f"{float(value):.4f}"
        if not _is_missing(logs.get("lr")):
            post["lr"] = f"{float(logs['lr']):.3g}"
        self.bar.set_postfix(post, refresh=False)
        if isinstance(self.bar, _Lines):
            self.bar.update(epochs, final)
        else:
            self.bar.update(epochs)

    def on_train_end(self, trainer, logs=None):
        if self.bar is None:
            return
        # Epochs the bar never saw (a Ctrl-C that stopped the callbacks of the last finished
        # epoch before this one ran) are shown now: its last line is the fit's last epoch.
        last = (logs or {}).get("epoch")
        if not _is_missing(last) and int(last) > self.bar.n:
            self.advance(int(last) - self.bar.n, logs, final=True)
        self.bar.close()
        self.bar = None


class _Lines:
    """ProgressBar's line style, with tqdm's ``set_postfix`` / ``update`` / ``close``: one line
    ``epoch 5/100: loss=..., val_loss=..., lr=... (1.2 s, 4.1 epoch/s, about 23 s left)`` for the
    first epoch, then at most one per ``interval`` seconds, and one for the last epoch shown."""

    clock = staticmethod(time.monotonic)  # (a test may give an instance a fake clock)

    def __init__(self, total, initial: int, file, interval: float):
        self.total, self.initial, self.n = total, initial, initial
        self.file, self.interval = file, interval
        self.start = self.clock()
        self.last_time, self.last_n = self.start, initial
        self.post: dict = {}

    def set_postfix(self, post: dict, refresh: bool = False) -> None:
        self.post = post

    def update(self, epochs: int, final: bool = False) -> None:
        self.n += epochs
        now = self.clock()
        if (self.last_n == self.initial or now - self.last_time >= self.interval
                or self.n == self.total):
            self._write(now, final)

    def close(self) -> None:
        if self.n != self.last_n:
            self._write(self.clock(), final=True)

    def line(self, now: float, final: bool = False) -> str:
        total = f"/{self.total}" if self.total else ""
        values = ", ".join(f"{k}={v}" for k, v in self.post.items())
        elapsed, done = now - self.start, self.n - self.initial
        timing = f"{elapsed:.1f} s"
        if done > 0 and elapsed > 0:
            rate = done / elapsed
            timing += f", {rate:.3g} epoch/s" if rate < 1000 else f", {rate:.0f} epoch/s"
            if self.total and self.n < self.total and not final:  # (not after early stopping)
                left = math.ceil((self.total - self.n) / rate)
                timing += (f", about {left} s left" if left < 120
                           else f", about {round(left / 60)} min left")
        return f"epoch {self.n}{total}: {values} ({timing})" if values else \
            f"epoch {self.n}{total} ({timing})"

    def _write(self, now: float, final: bool = False) -> None:
        self.last_time, self.last_n = now, self.n
        try:
            print(self.line(now, final), file=self.file if self.file is not None else sys.stderr,
                  flush=True)
        except (OSError, ValueError):  # a closed stream must not break the fit
            pass
