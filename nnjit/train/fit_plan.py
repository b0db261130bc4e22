"""``FitPlan``: what one ``Trainer.fit`` call will do, checked once, before any work.

``fit`` takes sixteen keyword arguments. :meth:`FitPlan.build` checks them all in one place (the
messages name the argument: ``fit: epochs must be ...``), settles the defaults that depend on
each other (the monitor on the validation data, the progress bar on the callbacks, one compiled
call or one per epoch), and :meth:`FitPlan.config_row` packs the plan into the compiled loop's
config row, in ``C_*`` order, in one assignment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nnjit.checks import check_int, check_real
from nnjit.graph import interpreter as it
from nnjit.schedulers import ReduceLROnPlateau, Scheduler
from nnjit.train.callbacks import CallbackList
from nnjit.train.interrupt import in_main_thread

MONITORS = {
    "val_loss": it.MONITOR_VAL_LOSS,
    "val_accuracy": it.MONITOR_VAL_ACCURACY,
    "train_loss": it.MONITOR_TRAIN_LOSS,
}

# config_row() writes the row as one tuple in this order.
_CONFIG_ORDER = (it.C_BATCH, it.C_EVAL_BATCH, it.C_SHUFFLE, it.C_DROP_LAST, it.C_TOL, it.C_PATIENCE,
                 it.C_MONITOR, it.C_RESTORE_BEST, it.C_EPOCHS, it.C_CHUNK, it.C_OPT_KIND,
                 it.C_REG_COEF, it.C_REG_PER_BATCH, it.C_CLIP_NORM, it.C_ACCUM_STEPS, it.C_PLATEAU,
                 it.C_DENSE_MODE)
if _CONFIG_ORDER != tuple(range(it.CONFIG_WIDTH)):
    raise ImportError("nnjit.train.fit_plan: the config row no longer matches the C_* fields")

_NONE = np.zeros(0, dtype=np.float64)  # "not used" (no LR table, no plateau rule); never written
_NO_CALLBACKS = CallbackList()  # a fit without callbacks (never changed)


@dataclass(frozen=True)
class FitPlan:
    """The checked arguments of one fit (see :meth:`Trainer.fit` for each one's meaning)."""

    epochs: int  # the final epoch (absolute, as Keras' ``epochs``)
    initial_epoch: int
    schedule_epochs: int  # the epochs the scheduler's table spans
    tol: float
    patience: int  # n_iter_no_change; 0 disables early stopping
    monitor: str
    restore_best: bool
    verbose: object  # False/0, True/1 or 2
    callbacks: CallbackList  # with the ProgressBar a verbose fit with callbacks adds
    scheduler: Scheduler | None
    grad_clip_norm: float  # 0.0: no clipping
    accumulation_steps: int
    log_batches: bool
    per_epoch: bool  # one compiled call per epoch: Python runs between epochs
    threaded: bool  # the single compiled call runs in a worker thread (progress, Ctrl-C)

    @classmethod
    def build(cls, loss, has_val: bool, *, epochs=100, initial_epoch=0, schedule_epochs=None,
              tol=1e-4, n_iter_no_change=10, monitor=None, restore_best=True, verbose=True,
              callbacks=None, scheduler=None, grad_clip_norm=None, accumulation_steps=1,
              log_batches=False) -> FitPlan:
        """Check ``fit``'s arguments for a trainer with ``loss`` (validation data: ``has_val``).

        Raises:
            ArgumentTypeError: an argument of the wrong type (named).
            ValueError: an argument out of range, or arguments that do not go together.
            TypeError: a scheduler that is not one of nnjit.schedulers' classes.
        """
        usual_types = (type(epochs) is int and type(initial_epoch) is int and type(tol) is float
                       and type(accumulation_steps) is int and schedule_epochs is None
                       and grad_clip_norm is None
                       and (n_iter_no_change is None or type(n_iter_no_change) is int))
        if not usual_types:  # (these pass every check below: a fit's fixed cost skips them)
            check_int(epochs, "fit: epochs", "an int >= 1")
            check_int(initial_epoch, "fit: initial_epoch", "an int >= 0")
            check_int(schedule_epochs, "fit: schedule_epochs", "an int >= 1 or None",
                      none_ok=True)
            check_real(tol, "fit: tol", "a number >= 0")
            check_int(n_iter_no_change, "fit: n_iter_no_change", "an int >= 0 or None",
                      none_ok=True)
            check_real(grad_clip_norm, "fit: grad_clip_norm", "a number > 0 or None",
                       none_ok=True)
            check_int(accumulation_steps, "fit: accumulation_steps", "an int >= 1")
        if epochs < 1:
            raise ValueError(f"fit: epochs must be an int >= 1, got {epochs!r}")
        if not 0 <= initial_epoch < epochs:
            raise ValueError(f"fit: initial_epoch must be an int in [0, epochs) = [0, {epochs}) "
                             f"(epochs is the final epoch, as in Keras), got {initial_epoch!r}")
        if schedule_epochs is not None and schedule_epochs < 1:  # (an int: checked above)
            raise ValueError(f"fit: schedule_epochs must be an int >= 1 or None, "
                             f"got {schedule_epochs!r}")
        epochs, initial_epoch = int(epochs), int(initial_epoch)
        tol = float(tol)
        if not math.isfinite(tol) or tol < 0:
            raise ValueError(f"fit: tol must be a finite number >= 0, got {tol!r}")
        patience = 0 if n_iter_no_change is None else n_iter_no_change
        if patience < 0:
            raise ValueError(f"fit: n_iter_no_change must be an int >= 0 or None, "
                             f"got {n_iter_no_change!r}")
        monitor = monitor or ("val_loss" if has_val else "train_loss")
        if monitor not in MONITORS:
            raise ValueError(f"fit: unknown monitor {monitor!r}; available: {', '.join(MONITORS)}")
        if monitor.startswith("val_") and not has_val:
            raise ValueError(f"fit: monitor={monitor!r} needs validation data (val=...)")
        if monitor == "val_accuracy" and not loss.is_classification:
            raise ValueError(f"fit: monitor='val_accuracy' needs a classification loss, "
                             f"not {type(loss).__name__}; use 'val_loss'")
        callbacks = list(callbacks or [])
        if callbacks and (verbose == 1 or verbose is True):
            from nnjit.train.builtin_callbacks import ProgressBar

            callbacks.append(ProgressBar())  # a bar (terminal, notebook) or a line now and then
        callbacks = CallbackList(callbacks) if callbacks else _NO_CALLBACKS
        if grad_clip_norm is not None and not (math.isfinite(grad_clip_norm)
                                               and grad_clip_norm > 0):
            raise ValueError(f"fit: grad_clip_norm must be a number > 0 or None, "
                             f"got {grad_clip_norm!r}")
        if accumulation_steps < 1:
            raise ValueError(f"fit: accumulation_steps must be an int >= 1, "
                             f"got {accumulation_steps!r}")
        if scheduler is not None:
            if not isinstance(scheduler, Scheduler):
                raise TypeError(f"fit: scheduler must be one of nnjit.schedulers' classes, got "
                                f"{type(scheduler).__name__}")
            if (isinstance(scheduler, ReduceLROnPlateau)
                    and (scheduler.mode == "max") != (monitor == "val_accuracy")):
                raise ValueError(f"fit: ReduceLROnPlateau(mode={scheduler.mode!r}) does not fit "
                                 f"monitor={monitor!r}; use mode='max' for accuracy, 'min' for "
                                 "losses")
        per_epoch = bool(callbacks) or verbose == 2
        plan = object.__new__(cls)
        # The fields in one write, not one frozen-field write each (the generated __init__'s):
        # every fit builds a plan.
        object.__setattr__(plan, "__dict__", {
            "epochs": epochs, "initial_epoch": initial_epoch,
            "schedule_epochs": epochs if schedule_epochs is None else int(schedule_epochs),
            "tol": tol, "patience": patience, "monitor": monitor,
            "restore_best": bool(restore_best), "verbose": verbose, "callbacks": callbacks,
            "scheduler": scheduler, "grad_clip_norm": grad_clip_norm or 0.0,
            "accumulation_steps": accumulation_steps, "log_batches": log_batches,
            "per_epoch": per_epoch,
            # Without Python between epochs, a verbose fit runs its single compiled call in a
            # worker thread; the main thread draws the progress and turns Ctrl-C into a stop.
            "threaded": bool(verbose) and not per_epoch and in_main_thread(),
        })
        return plan

    @property
    def monitor_code(self) -> int:
        """The monitor as the compiled loop's ``MONITOR_*`` code."""
        return MONITORS[self.monitor]

    @property
    def maximize(self) -> bool:
        """The monitored value improves upwards (accuracy), not downwards (losses)."""
        return self.monitor == "val_accuracy"

    def steps_per_epoch(self, n_batches: int) -> int:
        """Optimizer steps per epoch (the last accumulation group of an epoch may be shorter)."""
        return -(-n_batches // self.accumulation_steps)

    def schedule(self, base_lr: float, steps_per_epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """``(lr_table, plateau)`` arrays for the compiled loop; empty arrays mean "not used"."""
        scheduler = self.scheduler
        if scheduler is None:
            return _NONE, _NONE
        if isinstance(scheduler, ReduceLROnPlateau):
            return _NONE, np.concatenate([scheduler.plateau_params(),
                                          scheduler.plateau_state(base_lr)])
        return scheduler.lr_table(base_lr, self.schedule_epochs, steps_per_epoch), _NONE

    def config_row(self, data, eval_batch: int, optimizer, regularizer, plateau: np.ndarray,
                   dense_mode: float) -> tuple:
        """The compiled loop's config row for this plan on ``data`` (a
        :class:`~nnjit.data.adapt.FitData`), in ``C_*`` order (see ``_CONFIG_ORDER``)."""
        train = data.train
        return (
            train.batch_size,  # C_BATCH
            # C_EVAL_BATCH; sampled graph batches: the buffers hold the subgraph of at most
            # batch_size seeds
            train.batch_size if data.sampled else eval_batch,
            train.shuffle,  # C_SHUFFLE
            train.drop_last,  # C_DROP_LAST
            self.tol,  # C_TOL
            self.patience,  # C_PATIENCE
            MONITORS[self.monitor],  # C_MONITOR
            self.restore_best,  # C_RESTORE_BEST
            self.epochs,  # C_EPOCHS
            1 if self.per_epoch else 0,  # C_CHUNK
            optimizer.kind,  # C_OPT_KIND
            regularizer.coef if regularizer else 0.0,  # C_REG_COEF
            bool(regularizer and regularizer.per_batch),  # C_REG_PER_BATCH
            self.grad_clip_norm,  # C_CLIP_NORM
            self.accumulation_steps,  # C_ACCUM_STEPS
            plateau.size > 0,  # C_PLATEAU
            dense_mode,  # C_DENSE_MODE (set once, when the trainer is made)
        )
