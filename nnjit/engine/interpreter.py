"""The compiled interpreter: replays op records and runs whole fits without the GIL.

:func:`execute` is the one compiled entry point. It is a resumable loop over *jobs* (one job =
one minibatch: load rows, replay forward, then backward when training, then the optimizer step or
metric bookkeeping), and it keeps every loop variable in the float64 ``state`` array. That makes
it re-enterable: it returns ``PAUSED`` after a chunk of epochs (so Python callbacks can run),
``YIELD_*`` at a Python op (Python runs the op, advances the cursor and calls again), and
``DONE`` at the end. A model without Python ops and without callbacks trains in ONE call.

:func:`replay` is called from exactly one place: every call site compiles the replay again.
``replay`` and the family dispatchers are inlined into ``execute`` at numba-IR level
(``inline="always"``; each has one call site): compiled as separate functions, their LLVM
modules were optimised once on their own and again after linking. Inlining the small helpers or
the kernels made it slower: numba's cost is mostly per compiled function, plus per inlined call
(the measurements: docs/performance.md, "Measurements behind the code").

The replay knows op families, not ops: it sends each opcode to its core family's dispatcher
(``nnjit/ops/``: dense, activations, losses, inlined) and any other opcode to the family of the
run's dispatch table that holds it (:mod:`nnjit.engine.dispatch`: elementwise, dropout, conv,
pooling, normalization, embedding, joining, graph and user families, each compiled and cached on
its own). So this loop compiles once per dtype, whichever families a model mixes.
"""

from __future__ import annotations

import numpy as np
from numba import types

from nnjit.engine import status as st
from nnjit.engine.batch_loading import take_given_order
from nnjit.engine.dispatch import (
    T_BACKWARD,
    T_FIRST,
    T_FORWARD,
    T_LOADER,
    T_OPTIMIZER,
    T_SHARD_ROWS,
    T_STOP,
    T_SYNC_EPOCH,
    T_SYNC_GRADIENTS,
)
from nnjit.engine.epoch_rule import end_epoch, restore_best
from nnjit.engine.native_call import caller
from nnjit.engine.fields import (
    C_ACCUM_STEPS,
    C_BATCH,
    C_CHUNK,
    C_CLIP_NORM,
    C_DENSE_MODE,
    C_DROP_LAST,
    C_EPOCHS,
    C_EVAL_BATCH,
    C_OPT_KIND,
    C_REG_COEF,
    C_REG_PER_BATCH,
    C_SHUFFLE,
    DIR_BACKWARD,
    DIR_FORWARD,
    DIR_IDLE,
    L_LOSS_OP,
    L_N_PARAMS,
    L_N_TRAINABLE,
    L_OUTPUT,
    L_SCRATCH,
    L_TARGET,
    ST_ACCUM_N,
    ST_BAD_RECORD,
    ST_BATCH_LOSS,
    ST_CURSOR,
    ST_DIR,
    ST_EPOCH,
    ST_EPOCH_T0,
    ST_FIT_STEP,
    ST_JOB,
    ST_LR,
    ST_ROWS,
    ST_STEP,
    ST_STOPPED,
    ST_TRAIN_CORRECT,
    ST_TRAIN_LOSS,
    ST_TRAIN_N,
    ST_VAL_CORRECT,
    ST_VAL_LOSS,
    ST_VAL_N,
    SHUFFLE_GIVEN,
    STOP_NOW,
    TASK_FIT,
    TASK_GRADIENT,
    TASK_PREDICT,
)
from nnjit.kernels import gradients as gk
from nnjit.kernels import loss as kl
from nnjit.kernels import optim as ko
from nnjit.kernels import rng as kr
from nnjit.kernels._jit import jit
from nnjit.kernels.clock import monotonic_ns
from nnjit.kernels.views import borrow
from nnjit.ops import activations, dense, losses, python_op
from nnjit.ops.losses import SKLEARN_WEIGHTED
from nnjit.tape.arena import S_OFFSET
from nnjit.tape.records import R_AUX1, R_OPCODE, R_OUT
from nnjit.tape.slot_views import slot_flat as _flat
from nnjit.tape.slot_views import slot_view as _view

_PYTHON_OP = python_op.FAMILY.block.start

#: The families inlined in the compiled loop: what every MLP runs (the others: the table's).
CORE_FAMILIES = tuple(m.FAMILY for m in (dense, activations, losses))


# -- family dispatch -----------------------------------------------------------------------------
# replay sends an opcode of a core block to its core family's dispatcher (each refuses the opcodes
# it does not handle), and any other to the table's family whose block holds it
# (nnjit.engine.dispatch: compiled and cached apart, one entry per family, called through its
# address, ~50 ns more per op). The core is what every MLP runs, inlined straight into replay;
# elementwise and dropout ops are table families: inlined, they cost every MLP's first fit
# about 1.7 s of compiling (docs/performance.md).
_DENSE_END = dense.FAMILY.block.stop
_ACT_FIRST, _ACT_END = activations.FAMILY.block.start, activations.FAMILY.block.stop
_LOSS_FIRST, _LOSS_END = losses.FAMILY.block.start, losses.FAMILY.block.stop
if dense.FAMILY.block.start != 1 or _PYTHON_OP in dense.FAMILY.block:
    raise ImportError("nnjit.engine.interpreter: the dense family's block must start at 1")
_dense_forward, _dense_backward = dense.FAMILY.forward, dense.FAMILY.backward
_act_forward, _act_backward = activations.FAMILY.forward, activations.FAMILY.backward
_loss_forward, _loss_backward = losses.FAMILY.forward, losses.FAMILY.backward


_call_bool = caller(types.boolean)
_call_int = caller(types.int64)
_call_int_pair = caller(types.UniTuple(types.int64, 2))
_call_int_bool = caller(types.Tuple((types.int64, types.boolean)))


@jit(inline="always")
def _table_family(op, i, ctx, table, column):
    """The table's family for ``op`` runs its forward (``column`` T_FORWARD) or backward
    (T_BACKWARD); False when no family of the table has ``op``."""
    for k in range(1, table.shape[0]):
        if table[k, T_FIRST] <= op < table[k, T_STOP]:
            return _call_bool(table[k, column], table[k, column + 1], (np.int64(op), i, ctx))[1]
    return False


@jit(inline="always")
def replay(direction, start, stop, ctx, table):
    """Replay records forward over [start, stop) or backward over (stop, start].

    ``ctx`` is the tuple every family dispatcher receives (:mod:`nnjit.ops.context`); ``table``
    the run's dispatch table (:mod:`nnjit.engine.dispatch`: the program's other families).
    Returns (status, index): ``YIELD_FORWARD``/``YIELD_BACKWARD`` with the record of a Python op
    that must run next, ``UNKNOWN_OPCODE`` with a record no family of this build handles, or
    ``DONE`` with the end of the range.
    """
    records = ctx[2]
    if direction == DIR_FORWARD:
        for i in range(start, stop):
            op = records[i, R_OPCODE]
            if op == _PYTHON_OP:
                return st.YIELD_FORWARD, i
            if op < _DENSE_END:
                handled = _dense_forward(op, i, ctx)
            elif _ACT_FIRST <= op < _ACT_END:
                handled = _act_forward(op, i, ctx)
            elif _LOSS_FIRST <= op < _LOSS_END:
                handled = _loss_forward(op, i, ctx)
            else:
                handled = _table_family(op, i, ctx, table, T_FORWARD)
            if not handled:
                return st.UNKNOWN_OPCODE, i
    else:
        for i in range(start, stop, -1):
            op = records[i, R_OPCODE]
            if op == _PYTHON_OP:
                return st.YIELD_BACKWARD, i
            if op < _DENSE_END:
                handled = _dense_backward(op, i, ctx)
            elif _ACT_FIRST <= op < _ACT_END:
                handled = _act_backward(op, i, ctx)
            elif _LOSS_FIRST <= op < _LOSS_END:
                handled = _loss_backward(op, i, ctx)
            else:
                handled = _table_family(op, i, ctx, table, T_BACKWARD)
            if not handled:
                return st.UNKNOWN_OPCODE, i
    return st.DONE, stop


@jit(inline="always")
def _weight_sum(targets):
    """Sum of the last column of ``targets``: a weighted loss's sample weights (float64)."""
    total = 0.0
    last = targets.shape[1] - 1
    for r in range(targets.shape[0]):
        total += float(targets[r, last])
    return total


@jit
def _first_nonfinite_op(stop, rows, records, slots, values):
    """Index of the first forward op (< stop) whose output holds NaN/inf, else stop - 1."""
    for i in range(stop):
        if records[i, R_OPCODE] != _PYTHON_OP:
            if kl.first_nonfinite(_flat(values, slots, records[i, R_OUT], rows)) >= 0:
                return i
    return stop - 1


@jit
def execute(task, records, slots, hyper, values, grads, rng, layout, X, Y, Xv, Yv, perm, cfg,
            opt_hyper, opt_state, reg_spans, lr_table, plateau, accum, state, best, history,
            batch_log, out, gdata, table):
    """Run (or resume) ``task`` on a program. Returns (status, record index).

    Python calls it as ``execute(*arrays)`` with a
    :class:`~nnjit.engine.loop_arrays.LoopArrays` (:meth:`Program.loop_arrays
    <nnjit.engine.program.Program.loop_arrays>`). ``layout`` is the program's (never written);
    ``cfg`` the run's options (:meth:`RunOptions.config_row
    <nnjit.engine.run_options.RunOptions.config_row>`, read-only). ``table``
    (:func:`nnjit.engine.dispatch.table`) holds the addresses of the compiled functions this run
    calls: the program's op families beyond the core, the job loader and the data-parallel
    hooks. It is an int64 array whichever they are: this loop compiles once per dtype.
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
    params = values[:n_params]  # the parameter block: parameters, then buffers (snapshots)
    # The optimizer spans the trainable parameters only, the block's head: buffers (batch
    # norm's running statistics) get no penalty, clipping or step.
    n_trainable = layout[L_N_TRAINABLE]
    tparams = values[:n_trainable]
    pgrads = grads[:n_trainable]
    scratch = grads[slots[layout[L_SCRATCH], S_OFFSET]:]
    loss_op = layout[L_LOSS_OP]
    dense_mode = int(cfg[C_DENSE_MODE])
    stats = state[ST_BATCH_LOSS : ST_BATCH_LOSS + 3]
    bad_input = state[ST_BAD_RECORD : ST_BAD_RECORD + 1]  # ops report bad data here
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
                    restore_best(cfg, state, params, best)
                    return st.DONE, -1
                if cfg[C_SHUFFLE] == SHUFFLE_GIVEN:
                    take_given_order(perm, n, int(state[ST_EPOCH]))
                elif cfg[C_SHUFFLE] != 0.0:
                    kr.shuffle(perm, rng)
                for k in range(ST_TRAIN_LOSS, ST_VAL_N + 1):
                    state[k] = 0.0
                state[ST_EPOCH_T0] = monotonic_ns()
            state[ST_JOB] = 0
            state[ST_DIR] = DIR_IDLE
        job = int(state[ST_JOB])

        if int(state[ST_DIR]) == DIR_IDLE:  # load the job's batch
            if task == TASK_FIT and state[ST_STOPPED] == STOP_NOW:  # a second Ctrl-C
                restore_best(cfg, state, params, best)
                return st.INTERRUPTED, -1  # (ST_JOB >= 0: the epoch is incomplete)
            if job >= n_jobs:  # (cannot happen from a job count below n_jobs: say so, not spin)
                state[ST_JOB] = -1
                return st.NO_ROWS, -1
            is_train = job < n_train_jobs
            if is_train:
                start = job * batch
                rows = min(batch, n - start)
                called, (start, rows) = _call_int_pair(  # (MPI: this rank's part)
                    table[0, T_SHARD_ROWS], table[0, T_SHARD_ROWS + 1],
                    (task, start, rows, cfg))
                if not called:
                    return st.BAD_TABLE, T_SHARD_ROWS
                src_x, src_y = X, Y
            else:
                start = (job - n_train_jobs) * val_batch
                rows = min(val_batch, n_val - start)
                src_x, src_y = Xv, Yv
            use_perm = task == TASK_FIT and is_train
            called, rows = _call_int(table[0, T_LOADER], table[0, T_LOADER + 1],
                                     (src_x, src_y, perm, use_perm, start, rows,
                                      task != TASK_PREDICT, values, slots, layout, cfg, gdata,
                                      rng))
            if not called:
                return st.BAD_TABLE, T_LOADER
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
        ctx = (is_train, rows, records, slots, hyper, values, grads, rng, scratch, gdata, stats,
               dense_mode, bad_input)
        status, where = replay(direction, int(state[ST_CURSOR]), stop, ctx, table)
        if status != st.DONE:
            state[ST_CURSOR] = where
            return status, where
        if bad_input[0] != 0.0:  # an op found bad input data (an index out of range)
            where = int(bad_input[0]) - 1
            bad_input[0] = 0.0
            state[ST_JOB] = -1
            if task == TASK_FIT:
                restore_best(cfg, state, params, best)
            return st.BAD_INPUT, where
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
            # (MPI: the gradients become the global batch's; the penalty counts its rows)
            called, (step_rows, diverged) = _call_int_bool(
                table[0, T_SYNC_GRADIENTS], table[0, T_SYNC_GRADIENTS + 1],
                (pgrads, state, rows, min(batch, n - job * batch), cfg))
            if not called:
                return st.BAD_TABLE, T_SYNC_GRADIENTS
            if diverged or not np.isfinite(stats[0]):
                state[ST_JOB] = -1
                restore_best(cfg, state, params, best)
                return st.NONFINITE_TRAIN_LOSS, _first_nonfinite_op(loss_op + 1, rows, records,
                                                                     slots, values)
            if task == TASK_GRADIENT:
                state[ST_JOB] = -1
                return st.DONE, -1
            per_batch = float(step_rows)
            if records[loss_op, R_AUX1] == SKLEARN_WEIGHTED:  # (alpha over the weight sum)
                per_batch = _weight_sum(_view(values, slots, layout[L_TARGET], rows))
            coef = (cfg[C_REG_COEF] / per_batch if cfg[C_REG_PER_BATCH] != 0.0
                    else cfg[C_REG_COEF])
            penalty = ko.l2_penalty(tparams, pgrads, reg_spans, coef) if coef != 0.0 else 0.0
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
                kind = int(cfg[C_OPT_KIND])
                if not _call_bool(table[0, T_OPTIMIZER], table[0, T_OPTIMIZER + 1],
                                  (kind, tparams, pgrads, opt_state, opt_hyper, state[ST_LR],
                                   int(state[ST_STEP])))[0]:
                    state[ST_JOB] = -1
                    return st.BAD_TABLE, T_OPTIMIZER
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
                restore_best(cfg, state, params, best)
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
            # (MPI: the global batches' loss sums)
            if not _call_int(table[0, T_SYNC_EPOCH], table[0, T_SYNC_EPOCH + 1],
                             (state, cfg))[0]:
                return st.BAD_TABLE, T_SYNC_EPOCH
            end_epoch(cfg, state, history, params, best, plateau, n_val)
            epochs_this_call += 1
            if cfg[C_CHUNK] > 0 and epochs_this_call >= cfg[C_CHUNK]:
                return st.PAUSED, -1  # also after the last epoch, before the best is restored
