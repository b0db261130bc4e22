"""Built-in callbacks: early stopping, learning-rate log, CSV log, checkpoints, TensorBoard and
Weights & Biases (the progress bar is :class:`nnjit.train.progress.ProgressBar`).

Each is a :class:`~nnjit.train.callbacks.Callback`; pass them as ``trainer.fit(...,
callbacks=[...])``. Hooks get the epoch's ``logs`` (``epoch, train_loss, train_accuracy,
val_loss, val_accuracy, lr, seconds``; ``NaN`` where a value does not exist, e.g. accuracies for
regression or ``val_*`` without validation data).

Optional libraries (``tensorboardX``, ``wandb``) are imported only when the callback that needs
them is created or starts, never by ``import nnjit``.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np

from nnjit.checks import Choice, Int, Real
from nnjit.train.callbacks import Callback

__all__ = ["CSVLogger", "EarlyStopping", "LRMonitor", "ModelCheckpoint", "TensorBoard",
           "WandbLogger", "resolve_mode"]

_MAX_WORDS = ("acc", "accuracy", "auc", "f1", "precision", "recall", "r2", "score")
_MODE = Choice("auto", "min", "max", says="'auto', 'min' or 'max'")
_MIN_DELTA = Real(min=0, says="a finite number >= 0")


def resolve_mode(monitor: str, mode: str, where: str) -> str:
    """``'min'`` or ``'max'``; ``'auto'`` is ``max`` for accuracy-like names, else ``min``."""
    mode = _MODE.check(f"{where}: mode", mode)
    if mode != "auto":
        return mode
    tokens = re.split(r"[^a-z0-9]+", monitor.lower())
    return "max" if any(t in _MAX_WORDS for t in tokens) else "min"


def _is_missing(value) -> bool:
    try:
        return value is None or math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def _usable_logs(logs: dict, trainer=None) -> dict:
    """``logs`` without NaN values, and without accuracies when the loss is a regression loss
    (the trainer logs 0.0 there)."""
    regression = trainer is not None and not getattr(trainer.loss, "is_classification", True)
    return {k: v for k, v in logs.items() if not _is_missing(v)
            and not (regression and k.endswith("accuracy"))}


def monitored_value(logs: dict, monitor: str, where: str, trainer=None) -> float:
    """``logs[monitor]`` as a float; a missing (or NaN) monitor is an error that lists the
    metrics that do exist in ``logs``. With ``trainer``, accuracies of a regression loss count
    as missing."""
    usable = _usable_logs(logs, trainer)
    value = logs.get(monitor)
    if monitor not in usable:
        available = [k for k in usable if k not in ("epoch", "seconds")]
        why = ("is not logged" if monitor not in logs
               else "has no value (no validation data? a regression loss has no accuracy)")
        raise ValueError(f"{where}: monitor {monitor!r} {why}; available metrics: "
                         f"{', '.join(available) or 'none'}")
    return float(value)


class _Tracker:
    """Best value of a monitored metric under a mode and a minimum improvement."""

    def __init__(self, monitor: str, mode: str, min_delta: float, where: str):
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"{where}: monitor must be a metric name such as 'val_loss', "
                             f"got {monitor!r}")
        min_delta = _MIN_DELTA.check(f"{where}: min_delta", min_delta)
        self.monitor, self.where = monitor, where
        self.mode = resolve_mode(monitor, mode, where)
        self.min_delta = min_delta
        self.reset()

    def reset(self) -> None:
        self.best = math.inf if self.mode == "min" else -math.inf

    def improved(self, value: float) -> bool:
        if self.mode == "min":
            better = value < self.best - self.min_delta
        else:
            better = value > self.best + self.min_delta
        if better:
            self.best = value
        return better


def _params(trainer):
    """The arrays best weights snapshot: parameters, then buffers (batch norm statistics)."""
    return trainer.model.parameters() + trainer.model.buffers()


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved for ``patience`` epochs.

    Works with any logged metric, regression included (``val_loss`` or ``train_loss``).
    A monitor that is not in the logs raises ``ValueError`` at the end of the first epoch,
    listing the metrics that are there. Pass ``n_iter_no_change=None`` to ``fit`` so that the
    compiled early stopping does not act as well.

    Args:
        monitor: logged metric (default ``"val_loss"``).
        mode: ``"auto"`` (``max`` for accuracy-like names, else ``min``), ``"min"``, ``"max"``.
        patience: epochs without improvement before stopping (int >= 0).
        min_delta: an improvement must be larger than this.
        restore_best_weights: at the end of training, put back the weights of the best epoch.

    Attributes:
        best, best_epoch, stopped_epoch (0 when it did not stop training), wait.
    """

    def __init__(self, monitor: str = "val_loss", mode: str = "auto", patience: int = 10,
                 min_delta: float = 0.0, restore_best_weights: bool = False):
        patience = Int(min=0).check("EarlyStopping: patience", patience)
        self._tracker = _Tracker(monitor, mode, min_delta, "EarlyStopping")
        self.monitor, self.mode = monitor, self._tracker.mode
        self.patience, self.min_delta = int(patience), self._tracker.min_delta
        self.restore_best_weights = bool(restore_best_weights)
        self._reset()

    def _reset(self):
        self._tracker.reset()
        self.best = self._tracker.best
        self.best_epoch = 0
        self.stopped_epoch = 0
        self.wait = 0
        self.best_weights = None

    def on_train_begin(self, trainer, logs=None):
        self._reset()

    def on_epoch_end(self, trainer, epoch, logs):
        value = monitored_value(logs, self.monitor, "EarlyStopping", trainer)
        if self._tracker.improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
            if self.restore_best_weights:
                self.best_weights = [np.array(p.data, copy=True) for p in _params(trainer)]
            return None
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            trainer.stop_training = True
            return False
        return None

    def on_train_end(self, trainer, logs=None):
        if self.restore_best_weights and self.best_weights is not None:
            for p, w in zip(_params(trainer), self.best_weights):
                p.data[...] = w

    def state(self) -> dict:
        """Counters and best weights, so that patience spans a resume."""
        out = {"monitor": self.monitor, "best": float(self.best),
               "best_epoch": int(self.best_epoch), "wait": int(self.wait),
               "stopped_epoch": int(self.stopped_epoch)}
        for i, w in enumerate(self.best_weights or ()):
            out[f"best_weights.{i}"] = w
        return out

    def load_state(self, state: dict) -> None:
        if state.get("monitor") != self.monitor:
            return  # another metric: start afresh
        self.best = self._tracker.best = float(state["best"])
        self.best_epoch = int(state["best_epoch"])
        self.wait = int(state["wait"])
        self.stopped_epoch = int(state["stopped_epoch"])
        weights = [state[k] for k in sorted((k for k in state if k.startswith("best_weights.")),
                                            key=lambda k: int(k.split(".")[1]))]
        self.best_weights = [np.array(w, copy=True) for w in weights] or None


class LRMonitor(Callback):
    """Record the learning rate of every epoch: ``lrs`` (list) and ``history`` (epoch, lr)."""

    def __init__(self):
        self.lrs: list[float] = []
        self.history: list[tuple[int, float]] = []

    def on_train_begin(self, trainer, logs=None):
        self.lrs, self.history = [], []

    def on_epoch_end(self, trainer, epoch, logs):
        lr = float(logs.get("lr", trainer.optimizer.lr))
        self.lrs.append(lr)
        self.history.append((int(epoch), lr))


def _format(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value.is_integer() and abs(value) < 2 ** 53:
            return str(int(value))
        return "" if math.isnan(value) else repr(value)
    return str(value)


class CSVLogger(Callback):
    """Append one row per epoch to a CSV file (header written once, each row flushed).

    Args:
        path: the CSV file; its folder is created.
        append: keep an existing file's rows and add to them (default: start a new file).
        separator: field separator.
    """

    def __init__(self, path, append: bool = False, separator: str = ","):
        self.path = Path(os.fspath(path))
        self.append, self.sep = bool(append), separator
        self._fh = None
        self._columns: list[str] | None = None

    def on_train_begin(self, trainer, logs=None):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keep = self.append and self.path.exists() and self.path.stat().st_size > 0
        self._columns = None
        if keep:
            with open(self.path, encoding="utf-8") as fh:
                self._columns = fh.readline().rstrip("\r\n").split(self.sep)
        self._fh = open(self.path, "a" if keep else "w", encoding="utf-8", newline="")

    def on_epoch_end(self, trainer, epoch, logs):
        if self._fh is None:
            self.on_train_begin(trainer)
        if self._columns is None:
            self._columns = list(logs)
            self._fh.write(self.sep.join(self._columns) + "\n")
        self._fh.write(self.sep.join(_format(logs.get(c, "")) for c in self._columns) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def on_train_end(self, trainer, logs=None):
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class ModelCheckpoint(Callback):
    """Save checkpoints (``Trainer.save_checkpoint``: weights, optimizer, RNG and shuffle
    state) during training.

    Args:
        path: a file name template such as ``"ckpt/epoch{epoch:03d}-{val_loss:.3f}.nne"``
            (formatted with ``epoch`` and the logs), or an existing folder / a path ending in
            ``/``: then ``epoch{epoch:04d}.nne`` (``best.nne`` with ``save_best_only``) in it.
        every_n_epochs: save every this many epochs (default: every epoch).
        monitor: metric deciding "best" (default ``val_loss`` when ``save_best_only``).
        mode: ``"auto"``, ``"min"`` or ``"max"``.
        save_best_only: save only when ``monitor`` improved.

    Attributes:
        saved: the paths written, in order; best_path: the last improvement's path.
    """

    def __init__(self, path, every_n_epochs: int | None = None, monitor: str | None = None,
                 mode: str = "auto", save_best_only: bool = False, min_delta: float = 0.0):
        every_n_epochs = Int(min=1, none_ok=True, says="an int >= 1 or None").check(
            "ModelCheckpoint: every_n_epochs", every_n_epochs)
        text = os.fspath(path)
        if text.endswith(("/", os.sep)) or Path(text).is_dir():
            name = "best.nne" if save_best_only else "epoch{epoch:04d}.nne"
            text = os.path.join(text, name)
        self.template = text
        self.every_n_epochs = every_n_epochs
        self.save_best_only = bool(save_best_only)
        if monitor is None and save_best_only:
            monitor = "val_loss"
        self.monitor = monitor
        self._tracker = (_Tracker(monitor, mode, min_delta, "ModelCheckpoint")
                         if monitor is not None else None)
        self.saved: list[Path] = []
        self.best_path: Path | None = None

    def on_train_begin(self, trainer, logs=None):
        if self._tracker is not None:
            self._tracker.reset()

    def on_epoch_end(self, trainer, epoch, logs):
        improved = False
        if self._tracker is not None:
            improved = self._tracker.improved(
                monitored_value(logs, self.monitor, "ModelCheckpoint", trainer))
        if self.save_best_only:
            due = improved
        elif self.every_n_epochs:
            due = epoch % self.every_n_epochs == 0
        else:
            due = True
        if not due:
            return
        fields = {k: v for k, v in logs.items()}
        fields["epoch"] = int(epoch)
        try:
            path = Path(self.template.format(**fields))
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"ModelCheckpoint: cannot format {self.template!r} ({e}); "
                             f"fields: {', '.join(fields)}") from None
        path.parent.mkdir(parents=True, exist_ok=True)
        self.saved.append(path)
        if improved:
            self.best_path = path
        trainer.save_checkpoint(path)  # after the bookkeeping: the file holds this state

    def state(self) -> dict | None:
        """The best monitored value so far (so ``save_best_only`` continues after a resume)."""
        if self._tracker is None:
            return None
        return {"monitor": self.monitor, "best": float(self._tracker.best),
                "best_path": str(self.best_path) if self.best_path is not None else None}

    def load_state(self, state: dict) -> None:
        if self._tracker is not None and state.get("monitor") == self.monitor:
            self._tracker.best = float(state["best"])
            self.best_path = Path(state["best_path"]) if state.get("best_path") else None


def _numeric_logs(logs: dict) -> dict[str, float]:
    return {k: float(v) for k, v in logs.items() if k != "epoch" and not _is_missing(v)}


class TensorBoard(Callback):
    """Write every logged metric per epoch to TensorBoard event files (needs ``tensorboardX``,
    the ``nnjit[tensorboard]`` extra).

    Raises:
        ImportError: at construction when tensorboardX is not installed.
    """

    def __init__(self, log_dir="runs/tensorboard", prefix: str = ""):
        try:
            from tensorboardX import SummaryWriter
        except ImportError as e:
            raise ImportError("nnjit TensorBoard callback needs the optional extra "
                              "'tensorboard': pip install 'nnjit[tensorboard]' (or pip install "
                              "tensorboardX)") from e
        self._writer_cls = SummaryWriter
        self.log_dir, self.prefix = os.fspath(log_dir), prefix
        self.writer = None

    def on_train_begin(self, trainer, logs=None):
        self.writer = self._writer_cls(self.log_dir)

    def on_epoch_end(self, trainer, epoch, logs):
        for k, v in _numeric_logs(logs).items():
            self.writer.add_scalar(self.prefix + k, v, int(epoch))
        self.writer.flush()

    def on_train_end(self, trainer, logs=None):
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class WandbLogger(Callback):
    """Log every metric per epoch to Weights & Biases (needs ``wandb``, the ``nnjit[wandb]``
    extra; set ``WANDB_MODE=offline`` to log without an account).

    Args:
        run: an existing ``wandb`` run; otherwise ``wandb.init(**init_kwargs)`` is called when
            training starts and ``finish()`` when it ends.

    Raises:
        ImportError: at construction when wandb is not installed.
    """

    def __init__(self, run=None, **init_kwargs):
        try:
            import wandb
        except ImportError as e:
            raise ImportError("nnjit WandbLogger callback needs the optional extra 'wandb': "
                              "pip install 'nnjit[wandb]' (or pip install wandb)") from e
        self._wandb = wandb
        self.run, self._own = run, run is None
        self.init_kwargs = init_kwargs

    def on_train_begin(self, trainer, logs=None):
        if self.run is None:
            self.run = self._wandb.init(**self.init_kwargs)

    def on_epoch_end(self, trainer, epoch, logs):
        self.run.log(_numeric_logs(logs), step=int(epoch))

    def on_train_end(self, trainer, logs=None):
        if self._own and self.run is not None:
            self.run.finish()
            self.run = None
