"""The compiled interpreter: replays op records and runs whole fits without the GIL.

:func:`execute` is the one compiled entry point. It is a resumable loop over *jobs* (one job =
one minibatch: load rows, replay forward, then backward when training, then the optimizer step or
metric bookkeeping), and it keeps every loop variable in the float64 ``state`` array. That makes
it re-enterable: it returns ``PAUSED`` after a chunk of epochs (so Python callbacks can run),
``YIELD_*`` at a Python op (Python runs the op, advances the cursor and calls again), and
``DONE`` at the end. A model without Python ops and without callbacks trains in ONE call.

:func:`replay` is called from exactly one place: every call site compiles the replay again.
``replay``, ``_forward_op`` and ``_backward_op`` are inlined into ``execute`` at numba-IR level
(``inline="always"``; each has one call site): compiled as separate functions, their LLVM
modules were optimised once on their own and again after linking. Inlining the small helpers or
the kernels made it slower: numba's cost is mostly per compiled function, plus per inlined call
(the measurements: docs/performance.md, "Measurements behind the code").
"""

from __future__ import annotations

import functools

import numpy as np

from nnjit.graph import status as st
from nnjit.graph.arena import S_OFFSET
from nnjit.graph.opcodes import (
    ACCUMULATE,
    GRAPH_FIRST,
    GRAPH_LAST,
    NEEDS_GRAD,
    R_AUX0,
    R_AUX1,
    R_FLAGS,
    R_IN0,
    R_IN1,
    R_IN2,
    R_OPCODE,
    R_OUT,
    Opcode,
)
from nnjit.graph.slot_views import slot_flat as _flat
from nnjit.graph.slot_views import slot_view as _view
from nnjit.kernels import dense as kd
from nnjit.kernels import elementwise as ke
from nnjit.kernels import families as kf
from nnjit.kernels import gradients as gk
from nnjit.kernels import loss as kl
from nnjit.kernels import optim as ko
from nnjit.kernels import rng as kr
from nnjit.kernels._jit import jit, renamed_copy
from nnjit.kernels.clock import monotonic_ns
from nnjit.kernels.views import borrow, view2d

# Tasks.
TASK_FIT, TASK_EVALUATE, TASK_PREDICT, TASK_GRADIENT = 0, 1, 2, 3

# Program layout vector (int64).
L_INPUT, L_TARGET, L_OUTPUT, L_LOSS_OP, L_N_PARAMS, L_SCRATCH, L_MAX_BATCH = range(7)
LAYOUT_WIDTH = 7

# Run configuration (float64).
(
    C_BATCH,
    C_EVAL_BATCH,
    C_SHUFFLE,
    C_DROP_LAST,
    C_TOL,
    C_PATIENCE,
    C_MONITOR,
    C_RESTORE_BEST,
    C_EPOCHS,
    C_CHUNK,
    C_OPT_KIND,
    C_REG_COEF,
    C_REG_PER_BATCH,
    C_CLIP_NORM,  # > 0: clip the gradient's global norm to this
    C_ACCUM_STEPS,  # optimizer step every this many minibatches (mean gradient)
    C_PLATEAU,  # 1: ReduceLROnPlateau on the monitored value (params/state in ``plateau``)
    C_DENSE_MODE,  # the BLAS kernels in use: nnjit.kernels.dense.MODE_AVX2 / MODE_AVX512
) = range(17)
CONFIG_WIDTH = 17

MONITOR_VAL_LOSS, MONITOR_VAL_ACCURACY, MONITOR_TRAIN_LOSS = 0, 1, 2
OPT_SGD, OPT_ADAM, OPT_RMSPROP = kf.OPT_SGD, kf.OPT_ADAM, kf.OPT_RMSPROP

# Run state (float64): every variable that must survive a return to Python.
(
    ST_EPOCH,  # epochs completed
    ST_STEP,  # optimizer steps taken
    ST_BEST,  # best monitored value so far
    ST_BEST_EPOCH,  # epoch (0-based) of the best value, -1 if none
    ST_BAD_EPOCHS,  # consecutive epochs without a tol-sized improvement
    ST_STOPPED,  # 1 once early stopping fired; STOP_AFTER_EPOCH / STOP_NOW: a stop request
    ST_JOB,  # job index in the current epoch / task, -1 before it starts
    ST_DIR,  # 0 between jobs, 1 replaying forward, 2 replaying backward
    ST_CURSOR,  # next record to replay
    ST_ROWS,  # rows of the current batch
    ST_BATCH_LOSS,  # loss sum, correct count and counted rows of the current job
    ST_BATCH_CORRECT,
    ST_BATCH_COUNT,  # rows the loss counted (a graph's masked-out nodes are not counted)
    ST_TRAIN_LOSS,  # sums over the current epoch
    ST_TRAIN_CORRECT,
    ST_TRAIN_N,
    ST_VAL_LOSS,
    ST_VAL_CORRECT,
    ST_VAL_N,
    ST_EPOCH_T0,  # monotonic ns at the start of the epoch
    ST_RESTORED,  # 1 when best weights were restored
    ST_LR,  # learning rate of the next optimizer step
    ST_FIT_STEP,  # optimizer steps taken in this fit (index into the LR table)
    ST_ACCUM_N,  # minibatches accumulated towards the next step
) = range(24)
STATE_WIDTH = 24

# History columns (float64, one row per epoch).
H_EPOCH, H_TRAIN_LOSS, H_TRAIN_ACC, H_VAL_LOSS, H_VAL_ACC, H_LR, H_SECONDS = range(7)
HISTORY_COLUMNS = ("epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr", "seconds")
BATCH_COLUMNS = ("epoch", "batch", "lr", "train_loss", "train_accuracy")

DIR_IDLE, DIR_FORWARD, DIR_BACKWARD = 0, 1, 2

# Stop requests Python writes into ``state[ST_STOPPED]`` while a fit runs (Ctrl-C): the loop reads
# the field before every epoch and before every job. STOP_AFTER_EPOCH ends the fit before the next
# epoch; STOP_NOW abandons the running epoch before its next job (status INTERRUPTED).
STOP_AFTER_EPOCH, STOP_NOW = 2.0, 3.0

_DENSE = int(Opcode.DENSE)
_ADD = int(Opcode.ADD)
_MUL = int(Opcode.MUL)
_RELU = int(Opcode.RELU)
# opcodes.py numbers families in blocks of ten: the activation dispatcher gets all of 20-29, so an
# activation without a branch there reaches its final else instead of running as another op
_ACTIVATIONS_END = _RELU + 10
_DROPOUT = int(Opcode.DROPOUT)
_SOFTMAX_CE = int(Opcode.SOFTMAX_CE)
_MSE = int(Opcode.MSE)
_BCE = int(Opcode.BCE_WITH_LOGITS)
_PYTHON_OP = int(Opcode.PYTHON_OP)
_GRAPH_FIRST = int(GRAPH_FIRST)
_GRAPH_LAST = int(GRAPH_LAST)
_NEEDS = NEEDS_GRAD
_ACC = ACCUMULATE


@jit
def _scratch_like(scratch, like, needed):
    """A scratch view shaped like ``like`` when ``needed`` (else ``like`` itself, unused)."""
    if needed:
        return view2d(scratch, 0, like.shape[0], like.shape[1])
    return like


@jit(inline="always")
def _no_graph_forward(i, rows, records, slots, values, gdata):
    """The base build's stand-in for the graph ops (a program with them uses ``execute_graph``):
    it handles none of them."""
    return False


@jit(inline="always")
def _no_graph_backward(i, rows, records, slots, values, grads, gdata):
    """The base build's stand-in for the graph ops' backward: it handles none of them."""
    return False


# Swapped for the real dispatchers in the graph build (see _graph_build at the end).
_graph_forward = _no_graph_forward
_graph_backward = _no_graph_backward


@jit(inline="always")
def _forward_op(i, training, write_grad, rows, records, slots, hyper, values, grads, rng, stats,
                gdata, scratch, dense_mode):
    """Replay record ``i`` forward. Loss ops add (loss_sum, n_correct, n_counted) to ``stats``.

    Returns False, computing nothing, when no branch of this build handles the record's opcode.
    """
    op = records[i, R_OPCODE]
    a = records[i, R_IN0]
    b = records[i, R_IN1]
    c = records[i, R_IN2]
    o = records[i, R_OUT]
    h = records[i, R_AUX0]
    if op == _DENSE:
        bias = _flat(values, slots, c if c >= 0 else b, rows)
        kd.dense_forward(
            _view(values, slots, a, rows), _view(values, slots, b, rows), bias,
            _view(values, slots, o, rows), c >= 0, dense_mode, scratch,
        )
    elif op == _ADD:
        ke.add_forward(_flat(values, slots, a, rows), _flat(values, slots, b, rows),
                       _flat(values, slots, o, rows))
    elif op == _MUL:
        ke.mul_forward(_flat(values, slots, a, rows), _flat(values, slots, b, rows),
                       _flat(values, slots, o, rows))
    elif _RELU <= op < _ACTIVATIONS_END:
        return kf.activation_forward(op, _flat(values, slots, a, rows),
                                     _flat(values, slots, o, rows), hyper[h] if h >= 0 else 0.0)
    elif op == _DROPOUT:
        x = _flat(values, slots, a, rows)
        y = _flat(values, slots, o, rows)
        if training:  # p == 0 still writes a mask of ones, which backward uses
            ke.dropout_forward(x, y, _flat(values, slots, b, rows), hyper[h], rng)
        else:
            for k in range(x.size):
                y[k] = x[k]
    elif op == _SOFTMAX_CE or op == _MSE or op == _BCE:
        pred = _view(values, slots, a, rows)
        target = _view(values, slots, b, rows)
        dpred = _view(grads, slots, a, rows)
        kind = (kf.LOSS_SOFTMAX_CE if op == _SOFTMAX_CE
                else (kf.LOSS_MSE if op == _MSE else kf.LOSS_BCE))
        loss, correct, counted = kf.loss_and_seed(kind, pred, target, dpred,
                                                  records[i, R_AUX1] == 1, write_grad)
        stats[0] += loss
        stats[1] += correct
        stats[2] += counted
    elif _GRAPH_FIRST <= op <= _GRAPH_LAST:
        return _graph_forward(i, rows, records, slots, values, gdata)
    else:
        return False
    return True


@jit(inline="always")
def _backward_op(i, rows, records, slots, hyper, values, grads, scratch, gdata):
    """Replay record ``i`` backward: write or accumulate the gradients of its inputs.

    Returns False, computing nothing, when no branch of this build handles the record's opcode.
    """
    op = records[i, R_OPCODE]
    a = records[i, R_IN0]
    b = records[i, R_IN1]
    c = records[i, R_IN2]
    o = records[i, R_OUT]
    h = records[i, R_AUX0]
    f = records[i, R_FLAGS]
    need_a = (f & _NEEDS[0]) != 0
    need_b = (f & _NEEDS[1]) != 0
    acc_a = (f & _ACC[0]) != 0
    acc_b = (f & _ACC[1]) != 0
    if op == _DENSE:
        dy = _view(grads, slots, o, rows)
        if need_a:
            dx = _view(grads, slots, a, rows)
            tmp = _scratch_like(scratch, dx, acc_a)
            kd.dense_backward_input(dy, _view(values, slots, b, rows), dx, tmp, acc_a)
        if need_b:
            dw = _view(grads, slots, b, rows)
            tmp = _scratch_like(scratch, dw, acc_b)
            kd.dense_backward_weight(dy, _view(values, slots, a, rows), dw, tmp, acc_b)
        if c >= 0 and (f & _NEEDS[2]) != 0:
            kd.dense_backward_bias(dy, _flat(grads, slots, c, rows), (f & _ACC[2]) != 0)
    elif op == _ADD:
        dy = _flat(grads, slots, o, rows)
        if need_a:
            ke.add_backward(dy, _flat(grads, slots, a, rows), acc_a)
        if need_b:
            ke.add_backward(dy, _flat(grads, slots, b, rows), acc_b)
    elif op == _MUL:
        dy = _flat(grads, slots, o, rows)
        if need_a:
            ke.mul_backward(dy, _flat(values, slots, b, rows), _flat(grads, slots, a, rows), acc_a)
        if need_b:
            ke.mul_backward(dy, _flat(values, slots, a, rows), _flat(grads, slots, b, rows), acc_b)
    elif _RELU <= op < _ACTIVATIONS_END:
        if need_a:  # (an unknown opcode here already stopped the forward replay)
            return kf.activation_backward(op, _flat(values, slots, a, rows),
                                          _flat(values, slots, o, rows),
                                          _flat(grads, slots, o, rows),
                                          _flat(grads, slots, a, rows), acc_a,
                                          hyper[h] if h >= 0 else 0.0)
    elif op == _DROPOUT:
        if need_a:
            ke.dropout_backward(_flat(values, slots, b, rows), _flat(grads, slots, o, rows),
                                _flat(grads, slots, a, rows), acc_a)
    elif op == _SOFTMAX_CE or op == _MSE or op == _BCE or op == _PYTHON_OP:
        pass  # losses wrote their gradient seed during forward; Python ops yield before this
    elif _GRAPH_FIRST <= op <= _GRAPH_LAST:
        return _graph_backward(i, rows, records, slots, values, grads, gdata)
    else:
        return False
    return True


@jit(inline="always")
def replay(direction, start, stop, training, write_grad, rows, records, slots, hyper, values,
           grads, rng, scratch, stats, gdata, dense_mode):
    """Replay records forward over [start, stop) or backward over (stop, start].

    Returns (status, index): ``YIELD_FORWARD``/``YIELD_BACKWARD`` with the record of a Python op
    that must run next, ``UNKNOWN_OPCODE`` with a record no branch handles, or ``DONE`` with the
    end of the range.
    """
    if direction == DIR_FORWARD:
        for i in range(start, stop):
            if records[i, R_OPCODE] == _PYTHON_OP:
                return st.YIELD_FORWARD, i
            if not _forward_op(i, training, write_grad, rows, records, slots, hyper, values,
                               grads, rng, stats, gdata, scratch, dense_mode):
                return st.UNKNOWN_OPCODE, i
    else:
        for i in range(start, stop, -1):
            if records[i, R_OPCODE] == _PYTHON_OP:
                return st.YIELD_BACKWARD, i
            if not _backward_op(i, rows, records, slots, hyper, values, grads, scratch, gdata):
                return st.UNKNOWN_OPCODE, i
    return st.DONE, stop


@jit
def _load_batch(src, perm, use_perm, start, rows, dst):
    """Copy ``rows`` rows of ``src`` (via ``perm`` when ``use_perm``) into ``dst`` (rows, C)."""
    cols = src.shape[1]
    for r in range(rows):
        k = perm[start + r] if use_perm else start + r
        for j in range(cols):
            dst[r, j] = src[k, j]


@jit(inline="always")
def load_rows(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots, layout,
              gdata, rng):
    """Copy a job's rows of X (and Y) into the input (and target) slots; returns the batch rows.

    The graph build swaps in :func:`nnjit.graph.sampled_batch.load_graph_job`, which samples a
    subgraph around the job's seed nodes instead when the program trains on sampled batches.
    """
    _load_batch(src_x, perm, use_perm, start, rows, _view(values, slots, layout[L_INPUT], rows))
    if with_targets:
        _load_batch(src_y, perm, use_perm, start, rows,
                    _view(values, slots, layout[L_TARGET], rows))
    return rows


_load_job = load_rows


@jit
def _first_nonfinite_op(stop, rows, records, slots, values):
    """Index of the first forward op (< stop) whose output holds NaN/inf, else stop - 1."""
    for i in range(stop):
        if records[i, R_OPCODE] != _PYTHON_OP:
            if kl.first_nonfinite(_flat(values, slots, records[i, R_OUT], rows)) >= 0:
                return i
    return stop - 1


@jit
def _copy(src, dst):
    for k in range(src.size):
        dst[k] = src[k]


@jit
def _end_epoch(cfg, state, history, params, best, plateau, n_val):
    """Epoch bookkeeping: history row, early stopping (scikit-learn's rule), best snapshot."""
    e = int(state[ST_EPOCH])
    train_loss = state[ST_TRAIN_LOSS] / max(state[ST_TRAIN_N], 1.0)
    history[e, H_EPOCH] = e + 1
    history[e, H_TRAIN_LOSS] = train_loss
    history[e, H_TRAIN_ACC] = state[ST_TRAIN_CORRECT] / max(state[ST_TRAIN_N], 1.0)
    history[e, H_LR] = state[ST_LR]
    if n_val > 0:
        history[e, H_VAL_LOSS] = state[ST_VAL_LOSS] / state[ST_VAL_N]
        history[e, H_VAL_ACC] = state[ST_VAL_CORRECT] / state[ST_VAL_N]
    else:
        history[e, H_VAL_LOSS] = np.nan
        history[e, H_VAL_ACC] = np.nan
    history[e, H_SECONDS] = (monotonic_ns() - state[ST_EPOCH_T0]) * 1e-9

    monitor = int(cfg[C_MONITOR])
    tol = cfg[C_TOL]
    if monitor == MONITOR_VAL_ACCURACY:
        value = history[e, H_VAL_ACC]
        improved_by_tol = value >= state[ST_BEST] + tol
        better = value > state[ST_BEST]
    else:
        value = history[e, H_VAL_LOSS] if monitor == MONITOR_VAL_LOSS else train_loss
        improved_by_tol = value <= state[ST_BEST] - tol
        better = value < state[ST_BEST]
    state[ST_BAD_EPOCHS] = 0.0 if improved_by_tol else state[ST_BAD_EPOCHS] + 1.0
    if better or state[ST_BEST_EPOCH] < 0:
        state[ST_BEST] = value
        state[ST_BEST_EPOCH] = e
        if monitor != MONITOR_TRAIN_LOSS and cfg[C_RESTORE_BEST] != 0.0:
            _copy(params, best)
    if cfg[C_PLATEAU] != 0.0:
        state[ST_LR] = gk.plateau_step(plateau[:8], plateau[8:], value)
    state[ST_EPOCH] = e + 1
    if cfg[C_PATIENCE] > 0 and state[ST_BAD_EPOCHS] > cfg[C_PATIENCE]:
        state[ST_STOPPED] = 1.0


@jit
def _restore_best(cfg, state, params, best):
    if (cfg[C_RESTORE_BEST] != 0.0 and int(cfg[C_MONITOR]) != MONITOR_TRAIN_LOSS
            and state[ST_BEST_EPOCH] >= 0):
        _copy(best, params)
        state[ST_RESTORED] = 1.0


@jit
def execute(task, records, slots, hyper, values, grads, rng, layout, X, Y, Xv, Yv, perm, cfg,
            opt_hyper, opt_state, reg_spans, lr_table, plateau, accum, state, best, history,
            batch_log, out, gdata):
    """Run (or resume) ``task`` on a program. Returns (status, record index).

    FIT trains on (X, Y) and validates on (Xv, Yv) every epoch; EVALUATE adds loss sums of (X, Y)
    to the state's validation counters; PREDICT writes the output slot for every row of X into
    ``out``; GRADIENT runs forward and backward on all rows of (X, Y) as one batch.
    The learning rate of the k-th step of a fit is ``lr_table[k]`` (the last entry repeats; an
    empty table means ``state[ST_LR]`` throughout, which ReduceLROnPlateau may lower).
    ``batch_log`` (epochs * batches, 5), when it has rows, receives one row per training batch:
    epoch, batch, learning rate, loss (with the penalty), accuracy.
    """
    # The arrays are passed to kernels thousands of times per epoch: borrow them once, so no
    # call pays for atomic reference counting (it was a quarter of an Iris epoch).
    records, slots, hyper, values, grads = (borrow(records), borrow(slots), borrow(hyper),
                                            borrow(values), borrow(grads))
    rng, layout, X, Y, Xv, Yv, perm = (borrow(rng), borrow(layout), borrow(X), borrow(Y),
                                       borrow(Xv), borrow(Yv), borrow(perm))
    cfg, opt_hyper, opt_state, reg_spans = (borrow(cfg), borrow(opt_hyper), borrow(opt_state),
                                            borrow(reg_spans))
    lr_table, plateau, accum = borrow(lr_table), borrow(plateau), borrow(accum)
    state, best, history, out = borrow(state), borrow(best), borrow(history), borrow(out)
    batch_log, gdata = borrow(batch_log), borrow(gdata)
    n_params = layout[L_N_PARAMS]
    params = values[:n_params]
    pgrads = grads[:n_params]
    scratch = grads[slots[layout[L_SCRATCH], S_OFFSET]:]
    loss_op = layout[L_LOSS_OP]
    dense_mode = int(cfg[C_DENSE_MODE])
    stats = state[ST_BATCH_LOSS : ST_BATCH_LOSS + 3]
    n = X.shape[0]
    n_val = Xv.shape[0] if task == TASK_FIT else 0
    batch = int(cfg[C_BATCH]) if task == TASK_FIT else int(cfg[C_EVAL_BATCH])
    if task == TASK_GRADIENT:
        batch = n
    val_batch = int(cfg[C_EVAL_BATCH])
    if batch < 1 or (n_val > 0 and val_batch < 1):
        return st.NO_ROWS, -1
    n_train_jobs = (n // batch if cfg[C_DROP_LAST] != 0.0 and task == TASK_FIT and n >= batch
                    else (n + batch - 1) // batch)
    n_jobs = n_train_jobs + ((n_val + val_batch - 1) // val_batch if n_val > 0 else 0)
    training_task = task == TASK_FIT or task == TASK_GRADIENT
    epochs_this_call = 0
    if n_jobs < 1 or (training_task and n_train_jobs < 1):
        return st.NO_ROWS, -1  # (Python rejects empty data first) nothing to run: never spin

    # Every pass of this loop ends in a return or moves the replay cursor, the job or the epoch
    # forward: a job (< n_jobs of them) ends after one forward and one backward replay, an epoch
    # after n_jobs jobs, and the fit after cfg[C_EPOCHS] epochs, so the loop always terminates.
    while True:
        if state[ST_JOB] < 0:  # start an epoch (or the task)
            if task == TASK_FIT:
                if state[ST_STOPPED] != 0.0 or state[ST_EPOCH] >= cfg[C_EPOCHS]:
                    _restore_best(cfg, state, params, best)
                    return st.DONE, -1
                if cfg[C_SHUFFLE] != 0.0:
                    kr.shuffle(perm, rng)
                for k in range(ST_TRAIN_LOSS, ST_VAL_N + 1):
                    state[k] = 0.0
                state[ST_EPOCH_T0] = monotonic_ns()
            state[ST_JOB] = 0
            state[ST_DIR] = DIR_IDLE
        job = int(state[ST_JOB])

        if int(state[ST_DIR]) == DIR_IDLE:  # load the job's batch
            if task == TASK_FIT and state[ST_STOPPED] == STOP_NOW:  # a second Ctrl-C
                _restore_best(cfg, state, params, best)
                return st.INTERRUPTED, -1  # (ST_JOB >= 0: the epoch is incomplete)
            if job >= n_jobs:  # (cannot happen from a job count below n_jobs: say so, not spin)
                state[ST_JOB] = -1
                return st.NO_ROWS, -1
            is_train = job < n_train_jobs
            if is_train:
                start = job * batch
                rows = min(batch, n - start)
                src_x, src_y = X, Y
            else:
                start = (job - n_train_jobs) * val_batch
                rows = min(val_batch, n_val - start)
                src_x, src_y = Xv, Yv
            use_perm = task == TASK_FIT and is_train
            rows = _load_job(src_x, src_y, perm, use_perm, start, rows, task != TASK_PREDICT,
                             values, slots, layout, gdata, rng)
            state[ST_ROWS] = rows
            stats[0] = 0.0
            stats[1] = 0.0
            stats[2] = 0.0
            state[ST_DIR] = DIR_FORWARD
            state[ST_CURSOR] = 0
        rows = int(state[ST_ROWS])
        is_train = training_task and job < n_train_jobs
        direction = int(state[ST_DIR])
        if direction == DIR_FORWARD:
            stop = loss_op if task == TASK_PREDICT else loss_op + 1
        else:
            stop = -1
        status, where = replay(direction, int(state[ST_CURSOR]), stop, is_train, is_train, rows,
                               records, slots, hyper, values, grads, rng, scratch, stats, gdata,
                               dense_mode)
        if status != st.DONE:
            state[ST_CURSOR] = where
            return status, where
        if direction == DIR_FORWARD and is_train:
            state[ST_DIR] = DIR_BACKWARD
            state[ST_CURSOR] = loss_op - 1
            continue

        # The job is complete.
        if task == TASK_PREDICT:
            o = _view(values, slots, layout[L_OUTPUT], rows)
            base = job * batch
            for r in range(rows):
                for j in range(o.shape[1]):
                    out[base + r, j] = o[r, j]
        elif is_train:
            if not np.isfinite(stats[0]):
                state[ST_JOB] = -1
                _restore_best(cfg, state, params, best)
                return st.NONFINITE_TRAIN_LOSS, _first_nonfinite_op(loss_op + 1, rows, records,
                                                                     slots, values)
            if task == TASK_GRADIENT:
                state[ST_JOB] = -1
                return st.DONE, -1
            coef = cfg[C_REG_COEF] / rows if cfg[C_REG_PER_BATCH] != 0.0 else cfg[C_REG_COEF]
            penalty = ko.l2_penalty(params, pgrads, reg_spans, coef) if coef != 0.0 else 0.0
            group = int(cfg[C_ACCUM_STEPS])
            if group > 1:  # mean gradient over `group` minibatches (fewer at the epoch's end)
                gk.accumulate_gradients(pgrads, accum, state[ST_ACCUM_N] == 0.0)
                state[ST_ACCUM_N] += 1.0
                if state[ST_ACCUM_N] >= group or job + 1 == n_train_jobs:
                    gk.mean_into(accum, state[ST_ACCUM_N], pgrads)
                    state[ST_ACCUM_N] = 0.0
                    group = 1
            if group == 1:
                if cfg[C_CLIP_NORM] > 0.0:
                    gk.clip_by_global_norm(pgrads, cfg[C_CLIP_NORM])
                if lr_table.size > 0:
                    state[ST_LR] = lr_table[min(int(state[ST_FIT_STEP]), lr_table.size - 1)]
                state[ST_STEP] += 1.0
                state[ST_FIT_STEP] += 1.0
                kf.optimizer_step(int(cfg[C_OPT_KIND]), params, pgrads, opt_state, opt_hyper,
                                  state[ST_LR], int(state[ST_STEP]))
            counted = stats[2]
            state[ST_TRAIN_LOSS] += stats[0] + penalty * counted
            state[ST_TRAIN_CORRECT] += stats[1]
            state[ST_TRAIN_N] += counted
            if batch_log.shape[0] > 0:
                r = int(state[ST_EPOCH]) * n_train_jobs + job
                batch_log[r, 0] = state[ST_EPOCH] + 1.0
                batch_log[r, 1] = job + 1.0
                batch_log[r, 2] = state[ST_LR]
                batch_log[r, 3] = stats[0] / max(counted, 1.0) + penalty
                batch_log[r, 4] = stats[1] / max(counted, 1.0)
        else:
            if task == TASK_FIT and not np.isfinite(stats[0]):
                state[ST_JOB] = -1
                _restore_best(cfg, state, params, best)
                return st.NONFINITE_VAL_LOSS, _first_nonfinite_op(loss_op + 1, rows, records,
                                                                   slots, values)
            state[ST_VAL_LOSS] += stats[0]
            state[ST_VAL_CORRECT] += stats[1]
            state[ST_VAL_N] += stats[2]
        state[ST_DIR] = DIR_IDLE
        state[ST_JOB] = job + 1

        if job + 1 >= n_jobs:  # end of the epoch / task
            state[ST_JOB] = -1
            if task != TASK_FIT:
                return st.DONE, -1
            _end_epoch(cfg, state, history, params, best, plateau, n_val)
            epochs_this_call += 1
            if cfg[C_CHUNK] > 0 and epochs_this_call >= cfg[C_CHUNK]:
                return st.PAUSED, -1  # also after the last epoch, before the best is restored


# -- the graph build ---------------------------------------------------------------------------
@functools.cache
def _graph_build():
    """``execute`` again, from the same source, with the graph ops' dispatchers in place of the
    empty stand-ins: copies of ``_forward_op``, ``_backward_op``, ``replay`` and ``execute`` whose
    globals point at each other, at :mod:`nnjit.graph.message_passing` and at the job loader
    that samples subgraphs (:mod:`nnjit.graph.sampled_batch`).

    Only programs with graph ops call it, so an MLP's cold compile does not pay for graph
    kernels (a GNN pays one more ``execute`` compile once; both are cached on disk). Each copy
    gets its own name (:func:`nnjit.kernels._jit.renamed_copy`).
    """
    from nnjit.graph import message_passing as mp
    from nnjit.graph import sampled_batch as sb

    def copy(dispatcher, overrides):
        inline = {k: v for k, v in dispatcher.targetoptions.items() if k == "inline"}
        return jit(renamed_copy(dispatcher, "graph", overrides), **inline)

    forward = copy(_forward_op, {"_graph_forward": mp.graph_forward})
    backward = copy(_backward_op, {"_graph_backward": mp.graph_backward})
    replay_g = copy(replay, {"_forward_op": forward, "_backward_op": backward})
    return copy(execute, {"replay": replay_g, "_load_job": sb.load_graph_job})


def execute_graph(*args):
    """:func:`execute` with graph ops (built, then compiled or loaded from cache, on first use)."""
    return _graph_build()(*args)
