"""``Trainer.fit`` with :class:`~nnjit.optim.lbfgs.LBFGS`: one full-batch step per epoch.

A PyTorch user calls ``optimizer.step(closure)`` once per epoch over the whole training set (a
graph: every node, the loss on the train mask's; a FullBatch, as the compiled loop trains it);
here each epoch is :func:`~nnjit.optim.lbfgs_step.lbfgs_step`, whose closure is one run of the
compiled loop's GRADIENT task over every row (forward, loss, backward, without the GIL; the
trainer's regularizer adds its penalty to the loss and the gradient as a fit's step does). Python
runs between the evaluations: the L-BFGS vectors are small kernels, the line search scalar
logic. The epoch ends as a compiled fit's does (the same history row, early-stopping rule,
best-weights snapshot: :func:`nnjit.engine.epoch_rule.end_epoch`), with validation, callbacks and
Ctrl-C between steps, and the fit state a checkpoint saves.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from nnjit.engine import epoch_rule, fields
from nnjit.engine import status as st
from nnjit.engine.run_options import RunOptions
from nnjit.engine.status import TrainingDivergedError
from nnjit.kernels.optim import l2_penalty
from nnjit.optim.lbfgs_step import Workspace, lbfgs_step
from nnjit.train.callbacks import CallbackList
from nnjit.train.fit_report import epoch_line, fit_history
from nnjit.train.inference import inference_options
from nnjit.train.interrupt import StopRequest
from nnjit.train.threads import single_threaded_blas

_NONE = np.zeros(0, dtype=np.float64)  # (no plateau rule)


def _refuse(plan, data, augmented: bool, distributed: bool) -> None:
    """ValueError naming the argument for what a full-batch LBFGS fit does not take."""
    n = len(data.X)
    if data.sampled:
        raise ValueError("fit: LBFGS steps on the whole training set at once; a NeighborLoader's "
                         "sampled batches are not that: pass the Graph itself (full-graph "
                         "training)")
    if data.train.batch_size < n:
        raise ValueError(f"fit: LBFGS takes one step per epoch over every training row, but "
                         f"batch_size={data.train.batch_size} splits the {n} rows into batches; "
                         f"pass batch_size={n} (or leave it out with fit(X, y))")
    for name, value in (("scheduler", plan.scheduler), ("grad_clip_norm", plan.grad_clip_norm),
                        ("accumulation_steps", plan.accumulation_steps != 1),
                        ("log_batches", plan.log_batches), ("augmentation", augmented),
                        ("distributed", distributed)):
        if value:
            raise ValueError(f"fit: LBFGS does not take {name} (its steps search their own "
                             "length over the full batch)")


def fit_lbfgs(trainer, plan, data, Y, Xv, Yv, augmentation, distributed: bool):
    """Run ``plan`` (from ``Trainer.fit``) with the trainer's LBFGS on ``data`` (its targets
    ``Y``, validation ``Xv, Yv``); returns the history as ``fit`` does. A fit with
    ``augmentation`` or ``distributed`` is refused, as are the fit arguments a full-batch step
    does not take."""
    _refuse(plan, data, augmentation is not None, distributed)
    program, opt = trainer.program, trainer.optimizer
    X, n = data.X, len(data.X)
    n_val = len(Xv)
    trainer._options = options = RunOptions(
        task=fields.TASK_FIT, batch=n, eval_batch=program.max_batch, tol=plan.tol,
        patience=plan.patience, monitor=plan.monitor_code, restore_best=plan.restore_best,
        epochs=plan.epochs, optimizer=opt.kind, dense_mode=trainer._dense_mode)
    if plan.verbose in (1, True) and not plan.callbacks:  # (no threaded single call: a bar)
        from nnjit.train.progress import ProgressBar

        plan = dataclasses.replace(plan, callbacks=CallbackList([ProgressBar()]))
    carried = trainer._start_run_state(plan, 1, _NONE)
    state, row, cfg = trainer._run_state, trainer._run_state.row, options.config_row()
    history = np.zeros((plan.epochs, len(fields.HISTORY_COLUMNS)), dtype=np.float64)
    objective = _Objective(trainer, X, Y)
    ws = Workspace(opt, objective.params)
    classification = trainer.loss.is_classification
    callbacks, stop = plan.callbacks, StopRequest(state)
    trainer._begin_callbacks(plan, carried)
    status, interrupted = st.DONE, False
    try:
        with single_threaded_blas(), stop.on_sigint():
            while state.epoch < plan.epochs and state.stopped == 0.0:
                row[fields.ST_TRAIN_LOSS:fields.ST_VAL_N + 1] = 0.0
                row[fields.ST_EPOCH_T0] = time.monotonic_ns()  # (the clock end_epoch reads)
                objective.first = None
                loss = lbfgs_step(opt, objective, ws)
                opt.iterations += 1
                state.step += 1
                state.fit_step += 1
                # the step's loss is the history's train loss: torch's step returns it
                row[fields.ST_TRAIN_LOSS], row[fields.ST_TRAIN_N] = loss, 1.0
                row[fields.ST_TRAIN_CORRECT] = objective.first
                if n_val:
                    val = trainer._run_simple(fields.TASK_EVALUATE, Xv, Yv, trainer._empty(1))
                    row[fields.ST_VAL_LOSS:fields.ST_VAL_N + 1] = val.row[
                        fields.ST_VAL_LOSS:fields.ST_VAL_N + 1]
                epoch_rule.end_epoch(cfg, row, history, program.params, trainer._best, _NONE,
                                     n_val)
                if not (callbacks or plan.verbose == 2):
                    continue
                trainer.history_ = frame = fit_history(history, state, trainer._fit_start,
                                                       plan.monitor, classification)
                logs = frame.iloc[-1].to_dict()
                if plan.verbose == 2:
                    print(epoch_line(logs))
                epoch = int(state.epoch)
                if callbacks.on_epoch_end(trainer, epoch, logs) is False or trainer.stop_training:
                    status = st.PAUSED
                    break
                if stop.requested:
                    break
                if epoch < plan.epochs and state.stopped == 0.0:
                    callbacks.on_epoch_begin(trainer, epoch + 1)
    except KeyboardInterrupt:  # (a second Ctrl-C, or a callback's): the epochs done are kept
        interrupted = True
    except TrainingDivergedError as error:
        epoch_rule.restore_best(cfg, row, program.params, trainer._best)
        raise TrainingDivergedError(f"fit: the loss became NaN or infinite in LBFGS step "
                                    f"{int(state.epoch) + 1} ({error})") from error
    finally:
        for (_, module), mode in zip(trainer._walk.modules, trainer._modes_before_fit):
            module.__dict__["training"] = mode
        interrupted = interrupted or stop.requested
        state.clear_stop_request()
        trainer.history_ = fit_history(history, state, trainer._fit_start, plan.monitor,
                                       classification)
    if status == st.DONE and not interrupted:  # (as the compiled loop ends a fit)
        epoch_rule.restore_best(cfg, row, program.params, trainer._best)
        trainer.history_ = fit_history(history, state, trainer._fit_start, plan.monitor,
                                       classification)
    return trainer._end_fit(plan, status, interrupted)


class _Objective:
    """``objective(g)``: the loss over every training row at the trainer's current parameters
    (its regularizer's penalty included), the gradient written into ``g``; one compiled call.
    ``first`` holds the accuracy of the step's first evaluation."""

    def __init__(self, trainer, X, Y):
        program = self.program = trainer.program
        k = program.n_trainable
        self.params, self.grads = program.values[:k], program.grads[:k]
        n = len(X)
        self.options = inference_options(fields.TASK_GRADIENT, n, trainer._dense_mode)
        self.data = (X, Y, X, Y, np.arange(n, dtype=np.int64))
        self.step = trainer._no_step()
        self.best, self.out = trainer._best, trainer._empty(1)
        self.row = np.zeros(fields.STATE_WIDTH, dtype=np.float64)
        self.log = np.zeros((1, len(fields.HISTORY_COLUMNS)))
        reg = trainer.regularizer
        self.spans = trainer._reg_spans
        self.coef = 0.0 if reg is None else (reg.coef / n if reg.per_batch else reg.coef)
        self.first = None

    def __call__(self, g: np.ndarray) -> float:
        row = self.row
        row[:] = 0.0
        row[fields.ST_JOB] = -1
        self.program.run(self.options, self.data, self.step, row, self.best, self.log, self.out)
        count = row[fields.ST_BATCH_COUNT]
        loss = row[fields.ST_BATCH_LOSS] / count
        if self.coef != 0.0:
            loss += l2_penalty(self.params, self.grads, self.spans, self.coef)
        if self.first is None:
            self.first = row[fields.ST_BATCH_CORRECT] / count
        g[:] = self.grads
        return float(loss)
