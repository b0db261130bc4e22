"""``FitPlan``: what one ``Trainer.fit`` call will do, checked once, before any work.

``fit`` takes sixteen keyword arguments. :meth:`FitPlan.build` checks them all in one place (the
messages name the argument: ``fit: epochs must be ...``), settles the defaults that depend on
each other (the monitor on the validation data, the progress bar on the callbacks, one compiled
call or one per epoch), and :meth:`FitPlan.run_options` turns the plan, the data and the trainer's
optimizer, regularizer and schedule into the run's
:class:`~nnjit.engine.run_options.RunOptions`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from nnjit.checks import Int, Real
from nnjit.engine import fields
from nnjit.engine.run_options import Augmentation, MPIRun, RunOptions
from nnjit.schedulers import ReduceLROnPlateau, Scheduler
from nnjit.train.callbacks import CallbackList
from nnjit.train.interrupt import in_main_thread

MONITORS = {
    "val_loss": fields.MONITOR_VAL_LOSS,
    "val_accuracy": fields.MONITOR_VAL_ACCURACY,
    "train_loss": fields.MONITOR_TRAIN_LOSS,
}

# fit's numeric arguments; each message names the argument ("fit: epochs must be an int >= 1,
# got 0"). The ``says`` keep the words fit's messages have always used.
_EPOCHS = Int(min=1)
_INITIAL_EPOCH = Int(says="an int >= 0")  # its range, [0, epochs), is checked with epochs
_SCHEDULE_EPOCHS = Int(min=1, none_ok=True, says="an int >= 1 or None")
_TOL = Real(min=0, says="a finite number >= 0")
_N_ITER_NO_CHANGE = Int(min=0, none_ok=True, says="an int >= 0 or None")
_GRAD_CLIP_NORM = Real(gt=0, none_ok=True, says="a number > 0 or None")
_ACCUMULATION_STEPS = Int(min=1)

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
        plain = (type(epochs) is int and type(initial_epoch) is int and type(tol) is float
                 and type(accumulation_steps) is int and schedule_epochs is None
                 and grad_clip_norm is None
                 and (n_iter_no_change is None
                      or type(n_iter_no_change) is int and n_iter_no_change >= 0)
                 and 0 <= initial_epoch < epochs and 0.0 <= tol < math.inf
                 and accumulation_steps >= 1)
        if not plain:  # (a plain fit passes every rule: its fixed cost skips the calls)
            epochs = _EPOCHS.check("fit: epochs", epochs)
            initial_epoch = _INITIAL_EPOCH.check("fit: initial_epoch", initial_epoch)
            if not 0 <= initial_epoch < epochs:
                raise ValueError(f"fit: initial_epoch must be an int in [0, epochs) = "
                                 f"[0, {epochs}) (epochs is the final epoch, as in Keras), "
                                 f"got {initial_epoch!r}")
            schedule_epochs = _SCHEDULE_EPOCHS.check("fit: schedule_epochs", schedule_epochs)
            tol = _TOL.check("fit: tol", tol)
            n_iter_no_change = _N_ITER_NO_CHANGE.check("fit: n_iter_no_change", n_iter_no_change)
            grad_clip_norm = _GRAD_CLIP_NORM.check("fit: grad_clip_norm", grad_clip_norm)
            accumulation_steps = _ACCUMULATION_STEPS.check("fit: accumulation_steps",
                                                           accumulation_steps)
        patience = 0 if n_iter_no_change is None else n_iter_no_change
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
            from nnjit.train.progress import ProgressBar

            # a bar (terminal, notebook) or a line now and then; the user's own, if given, is it
            if not any(isinstance(c, ProgressBar) for c in callbacks):
                callbacks.append(ProgressBar())
        callbacks = CallbackList(callbacks) if callbacks else _NO_CALLBACKS
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
            "schedule_epochs": epochs if schedule_epochs is None else schedule_epochs,
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

    def run_options(self, data, eval_batch: int, optimizer, regularizer, plateau: np.ndarray,
                    dense_mode: int, augmentation: Augmentation | None = None,
                    mpi: MPIRun | None = None) -> RunOptions:
        """The fit's :class:`~nnjit.engine.run_options.RunOptions` for this plan on ``data`` (a
        :class:`~nnjit.data.adapt.FitData`): validation batches of ``eval_batch`` rows, the
        trainer's ``optimizer`` and ``regularizer``, ``plateau`` (ReduceLROnPlateau's vector,
        empty without it), the BLAS ``dense_mode``, and the fit's augmentation and MPI run."""
        train = data.train
        batch = train.batch_size
        if not data.sampled:  # (the loop's float row holds it: 2**63-1 became "no rows")
            batch = min(batch, max(len(data.X), 1))  # one batch of every row, as any larger
        # sampled graph batches: the buffers hold the subgraph of at most batch_size seeds
        return _fit_options(
            batch, train.batch_size if data.sampled else eval_batch, train.shuffle,
            train.drop_last, self.tol, self.patience, MONITORS[self.monitor], self.restore_best,
            self.epochs, 1 if self.per_epoch else 0, optimizer.kind,
            regularizer.coef if regularizer else 0.0, bool(regularizer and regularizer.per_batch),
            self.grad_clip_norm, self.accumulation_steps, plateau.size > 0, dense_mode,
            augmentation, mpi)


@functools.lru_cache(maxsize=64)
def _fit_options(batch, eval_batch, shuffle, drop_last, tol, patience, monitor, restore_best,
                 epochs, chunk, optimizer, reg_coef, reg_per_batch, clip_norm, accumulation_steps,
                 plateau, dense_mode, augmentation, mpi) -> RunOptions:
    """A fit's RunOptions, shared by the fits with the same settings (they are immutable; a
    repeated fit skips their checks)."""
    return RunOptions(
        task=fields.TASK_FIT, batch=batch, eval_batch=eval_batch,
        shuffle=fields.SHUFFLE_RNG if shuffle else fields.SHUFFLE_OFF, drop_last=drop_last,
        tol=tol, patience=patience, monitor=monitor, restore_best=restore_best, epochs=epochs,
        chunk=chunk, optimizer=optimizer, reg_coef=reg_coef, reg_per_batch=reg_per_batch,
        clip_norm=clip_norm, accumulation_steps=accumulation_steps,
        plateau=fields.PLATEAU_TORCH if plateau else fields.PLATEAU_OFF, dense_mode=dense_mode,
        augmentation=augmentation, mpi=mpi)
