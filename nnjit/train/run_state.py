"""A named view of the compiled loop's run state row.

The interpreter keeps every variable of a run that must survive a return to Python in one
float64 row (the ``ST_*`` fields of :mod:`nnjit.engine.fields`) and reads a run's settings from
the config row that :class:`~nnjit.engine.run_options.RunOptions` writes. Python code names the
state's fields through :class:`RunState` (``state.epoch``, not ``state[fields.ST_EPOCH]``); the
row itself stays the array the compiled loop reads and writes, so a view costs no copy.
"""

from __future__ import annotations

import math

import numpy as np

from nnjit.engine import epoch_rule, fields
from nnjit.engine.run_options import RunOptions

#: ``stopped`` values: early stopping fired, or a stop request (Ctrl-C) for the compiled loop to
#: honour after the current epoch or before the running epoch's next job.
EARLY_STOPPED = 1.0
STOP_AFTER_EPOCH = fields.STOP_AFTER_EPOCH
STOP_NOW = fields.STOP_NOW


class _Field:
    """One field of a row: ``view.name`` reads and writes ``view.row[index]``."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __get__(self, view, owner=None):
        if view is None:
            return self
        return view.row[self.index]

    def __set__(self, view, value) -> None:
        view.row[self.index] = value


class RunState:
    """The run state row (float64, ``fields.STATE_WIDTH``) under the names of its fields."""

    __slots__ = ("row",)

    epoch = _Field(fields.ST_EPOCH)  # epochs completed (absolute)
    step = _Field(fields.ST_STEP)  # optimizer steps taken
    best = _Field(fields.ST_BEST)  # best monitored value so far
    best_epoch = _Field(fields.ST_BEST_EPOCH)  # 0-based epoch of the best value, -1 if none
    bad_epochs = _Field(fields.ST_BAD_EPOCHS)  # consecutive epochs without a tol-sized improvement
    stopped = _Field(fields.ST_STOPPED)  # EARLY_STOPPED, or a stop request (STOP_AFTER_EPOCH, ...)
    job = _Field(fields.ST_JOB)  # job index in the current epoch / task, -1 before it starts
    batch_loss = _Field(fields.ST_BATCH_LOSS)  # loss sum of the current job
    batch_count = _Field(fields.ST_BATCH_COUNT)  # rows the loss counted in the current job
    val_loss = _Field(fields.ST_VAL_LOSS)  # validation sums over the current epoch / evaluation
    val_correct = _Field(fields.ST_VAL_CORRECT)
    val_n = _Field(fields.ST_VAL_N)
    restored = _Field(fields.ST_RESTORED)  # 1 when the best weights were restored
    lr = _Field(fields.ST_LR)  # learning rate of the next optimizer step
    fit_step = _Field(fields.ST_FIT_STEP)  # optimizer steps taken in this fit (LR table index)

    def __init__(self, row: np.ndarray | None = None):
        self.row = np.zeros(fields.STATE_WIDTH, dtype=np.float64) if row is None else row

    @classmethod
    def for_task(cls) -> RunState:
        """A fresh state for a task that is not a fit (evaluate, predict, gradients)."""
        state = cls()
        state.row[fields.ST_JOB] = -1
        return state

    def start_fit(self, *, step: int, lr: float, maximize: bool, initial_epoch: int,
                  fit_step: int) -> None:
        """Reset the row for a fit that starts after ``initial_epoch`` epochs."""
        row = self.row
        row[:] = _FRESH_MAXIMIZING if maximize else _FRESH_MINIMIZING  # (one copy)
        row[fields.ST_STEP] = step
        row[fields.ST_LR] = lr
        if initial_epoch:
            row[fields.ST_EPOCH] = initial_epoch
            row[fields.ST_FIT_STEP] = fit_step

    @property
    def early_stopped(self) -> bool:
        return self.row[fields.ST_STOPPED] == EARLY_STOPPED

    def clear_stop_request(self) -> None:
        """Forget a Ctrl-C stop request (it is not early stopping: a resume goes on)."""
        if self.row[fields.ST_STOPPED] in (STOP_AFTER_EPOCH, STOP_NOW):
            self.row[fields.ST_STOPPED] = 0.0

    def request_stop(self, now: bool = False) -> None:
        """Ask the compiled loop to stop after the current epoch, or (``now``) before the
        running epoch's next job; an early stop that already fired stays as it is."""
        stopped = self.row[fields.ST_STOPPED]
        if now and stopped != EARLY_STOPPED:
            self.row[fields.ST_STOPPED] = STOP_NOW
        elif stopped == 0.0:
            self.row[fields.ST_STOPPED] = STOP_AFTER_EPOCH


def _fresh_row(best: float) -> np.ndarray:
    """The state row a fit starts from, before its step count and learning rate: no epoch
    done, no best value yet (``best`` is the worst possible), no job started."""
    row = np.zeros(fields.STATE_WIDTH, dtype=np.float64)
    row[fields.ST_BEST] = best
    row[fields.ST_BEST_EPOCH] = -1
    row[fields.ST_JOB] = -1
    return row


_FRESH_MINIMIZING = _fresh_row(math.inf)  # (losses)
_FRESH_MAXIMIZING = _fresh_row(-math.inf)  # (accuracy)


def restore_best(options: RunOptions, state: RunState, params: np.ndarray,
                 best: np.ndarray) -> None:
    """Apply the best-weights rule of a fit with ``options`` that stopped early (a callback,
    Ctrl-C): copy the best epoch's snapshot into ``params`` when the options keep one, as the
    compiled loop does at its own ends (it marks ``state.restored``)."""
    epoch_rule.restore_best(options.config_row(), state.row, params, best)  # the loop's rule
