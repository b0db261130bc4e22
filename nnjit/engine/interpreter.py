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
(``nnjit/ops/``: dense, elementwise, activations, dropout, losses) and any other opcode to the
extension chain, empty in this base build; :func:`build_for` makes the build of a program that
uses other families (graph ops, user ops).
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from nnjit.engine import status as st
from nnjit.engine.batch_loading import load_augmented_rows, load_rows, take_given_order
from nnjit.engine.epoch_rule import end_epoch, restore_best
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
from nnjit.kernels._jit import jit, renamed_copy
from nnjit.kernels.clock import monotonic_ns
from nnjit.kernels.views import borrow
from nnjit.ops import activations, dense, dropout, elementwise, losses, python_op
from nnjit.ops.family import OpFamily
from nnjit.tape.arena import S_OFFSET
from nnjit.tape.records import R_OPCODE, R_OUT
from nnjit.tape.slot_views import slot_flat as _flat
from nnjit.tape.slot_views import slot_view as _view

_PYTHON_OP = python_op.FAMILY.block.start

#: The families of the base build, inlined in every build: what an MLP compiles.
CORE_FAMILIES = tuple(m.FAMILY for m in (dense, elementwise, activations, dropout, losses))


# -- family dispatch -----------------------------------------------------------------------------
# replay sends an opcode below the last core block to the core family whose block starts at or
# below it (each family's dispatcher refuses the opcodes it does not handle), and any other to
# the extension chain, which handles nothing in the base build. build_for swaps in a chain of
# links, one per extra family: a link sends an opcode of its family's block to the family's
# dispatcher and any other to the next link (renamed copies of the link template with its
# globals swapped; numba reads global ints as compile-time constants: one range test per link).
# Core families are inlined straight into replay: every further level of inlining costs numba a
# copy of the inlined IR, measurable in the MLP's cold compile.
_EW_FIRST = elementwise.FAMILY.block.start
_ACT_FIRST = activations.FAMILY.block.start
_DROPOUT_FIRST = dropout.FAMILY.block.start
_LOSS_FIRST, _LOSS_END = losses.FAMILY.block.start, losses.FAMILY.block.stop
if [f.block.start for f in CORE_FAMILIES] != sorted(f.block.start for f in CORE_FAMILIES):
    raise ImportError("nnjit.engine.interpreter: the core families' blocks are out of order")
_dense_forward, _dense_backward = dense.FAMILY.forward, dense.FAMILY.backward
_ew_forward, _ew_backward = elementwise.FAMILY.forward, elementwise.FAMILY.backward
_act_forward, _act_backward = activations.FAMILY.forward, activations.FAMILY.backward
_dropout_forward, _dropout_backward = dropout.FAMILY.forward, dropout.FAMILY.backward
_loss_forward, _loss_backward = losses.FAMILY.forward, losses.FAMILY.backward


@jit(inline="always")
def _no_family_forward(op, i, ctx):
    """The end of the chain: no family of this build handles ``op``."""
    return False


@jit(inline="always")
def _no_family_backward(op, i, ctx):
    return False


_extension_forward = _link_family_forward = _link_next_forward = _no_family_forward
_extension_backward = _link_family_backward = _link_next_backward = _no_family_backward
_LINK_FIRST = _LINK_END = 0


@jit(inline="always")
def _link_forward(op, i, ctx):
    if _LINK_FIRST <= op < _LINK_END:
        return _link_family_forward(op, i, ctx)
    return _link_next_forward(op, i, ctx)


@jit(inline="always")
def _link_backward(op, i, ctx):
    if _LINK_FIRST <= op < _LINK_END:
        return _link_family_backward(op, i, ctx)
    return _link_next_backward(op, i, ctx)


def _copy(dispatcher, suffix: str, overrides: dict):
    """A renamed copy of ``dispatcher`` with ``overrides`` as globals, compiled with the same
    ``inline`` option (see :func:`nnjit.kernels._jit.renamed_copy`)."""
    inline = {k: v for k, v in dispatcher.targetoptions.items() if k == "inline"}
    return jit(renamed_copy(dispatcher, suffix, overrides), **inline)


def _chain(families, suffix: str):
    """(forward, backward) heads of the link chain over ``families``, in their order."""
    forward, backward = _no_family_forward, _no_family_backward
    for k in range(len(families) - 1, -1, -1):
        fam = families[k]
        block = {"_LINK_FIRST": fam.block.start, "_LINK_END": fam.block.stop}
        forward = _copy(_link_forward, f"{suffix}_{k}", {
            **block, "_link_family_forward": fam.forward, "_link_next_forward": forward})
        backward = _copy(_link_backward, f"{suffix}_{k}", {
            **block, "_link_family_backward": fam.backward, "_link_next_backward": backward})
    return forward, backward


@jit(inline="always")
def replay(direction, start, stop, ctx):
    """Replay records forward over [start, stop) or backward over (stop, start].

    ``ctx`` is the tuple every family dispatcher receives (:mod:`nnjit.ops.context`).
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
            if op < _EW_FIRST:
                handled = _dense_forward(op, i, ctx)
            elif op < _ACT_FIRST:
                handled = _ew_forward(op, i, ctx)
            elif op < _DROPOUT_FIRST:
                handled = _act_forward(op, i, ctx)
            elif op < _LOSS_FIRST:
                handled = _dropout_forward(op, i, ctx)
            elif op < _LOSS_END:
                handled = _loss_forward(op, i, ctx)
            else:
                handled = _extension_forward(op, i, ctx)
            if not handled:
                return st.UNKNOWN_OPCODE, i
    else:
        for i in range(start, stop, -1):
            op = records[i, R_OPCODE]
            if op == _PYTHON_OP:
                return st.YIELD_BACKWARD, i
            if op < _EW_FIRST:
                handled = _dense_backward(op, i, ctx)
            elif op < _ACT_FIRST:
                handled = _ew_backward(op, i, ctx)
            elif op < _DROPOUT_FIRST:
                handled = _act_backward(op, i, ctx)
            elif op < _LOSS_FIRST:
                handled = _dropout_backward(op, i, ctx)
            elif op < _LOSS_END:
                handled = _loss_backward(op, i, ctx)
            else:
                handled = _extension_backward(op, i, ctx)
            if not handled:
                return st.UNKNOWN_OPCODE, i
    return st.DONE, stop


_load_job = load_rows  # the job loader: a family's load_job in builds that include it


# -- data-parallel hooks (MPI) -------------------------------------------------------------------
# No-ops here; the MPI build (build_for(..., mpi=True)) swaps in nnjit.distributed.mpi_step's,
# which shard each global batch and average the gradients with one Allreduce per step.
@jit(inline="always")
def _shard_rows(task, start, rows, layout):
    """This process's (start, rows) of a training batch: all of it outside the MPI build."""
    return start, rows


@jit(inline="always")
def _sync_gradients(pgrads, stats, rows, global_rows, layout):
    """(rows the step's penalty counts, the global batch diverged): (rows, False) here."""
    return rows, False


@jit(inline="always")
def _sync_epoch(state, layout):
    """Sum the epoch's training loss counters over the ranks (nothing here)."""
    return 0


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
                start, rows = _shard_rows(task, start, rows, layout)  # (MPI: this rank's part)
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
        ctx = (is_train, rows, records, slots, hyper, values, grads, rng, scratch, gdata, stats,
               dense_mode, bad_input)
        status, where = replay(direction, int(state[ST_CURSOR]), stop, ctx)
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
            # (MPI build: the gradients become the global batch's; the penalty counts its rows)
            step_rows, diverged = _sync_gradients(pgrads, stats, rows,
                                                  min(batch, n - job * batch), layout)
            if diverged or not np.isfinite(stats[0]):
                state[ST_JOB] = -1
                restore_best(cfg, state, params, best)
                return st.NONFINITE_TRAIN_LOSS, _first_nonfinite_op(loss_op + 1, rows, records,
                                                                     slots, values)
            if task == TASK_GRADIENT:
                state[ST_JOB] = -1
                return st.DONE, -1
            coef = (cfg[C_REG_COEF] / step_rows if cfg[C_REG_PER_BATCH] != 0.0
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
                if not ko.optimizer_step(kind, tparams, pgrads, opt_state, opt_hyper,
                                         state[ST_LR], int(state[ST_STEP])):
                    state[ST_JOB] = -1
                    return st.UNKNOWN_OPTIMIZER, kind
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
            _sync_epoch(state, layout)  # (MPI build: the global batches' loss sums)
            end_epoch(cfg, state, history, params, best, plateau, n_val)
            epochs_this_call += 1
            if cfg[C_CHUNK] > 0 and epochs_this_call >= cfg[C_CHUNK]:
                return st.PAUSED, -1  # also after the last epoch, before the best is restored


# -- builds with more families -------------------------------------------------------------------
def build_for(families, augment: bool = False, mpi: bool = False):
    """The compiled loop for programs whose records use ``families`` (any iterable of
    :class:`~nnjit.ops.OpFamily`): :func:`execute` itself when they are all core, else
    ``execute`` again, from the same source, with a family chain over the core families and the
    others (in opcode order), and the job loader of the family that has one.

    Every other build is made of renamed copies of ``execute``, ``replay`` and the chain links,
    named after each extra family's name, opcode block and
    :meth:`~nnjit.ops.OpFamily.source_digest` (numba caches machine code by function name and
    file, so another family set, or an edited kernel file, must mean another name). Built once
    per process per family set; compiled on first call, or loaded from numba's cache.

    ``augment``: the build for fits that augment their training batches (the job loader
    :func:`~nnjit.engine.batch_loading.load_augmented_rows`), kept out of the others so an MLP
    does not compile the augmentation kernels.

    ``mpi``: the build for data-parallel fits over MPI (:mod:`nnjit.distributed`): every
    training batch sharded over the ranks, one Allreduce of the gradients per step, from
    inside this compiled loop. Its own build, so no single-process fit compiles MPI code.
    """
    extra = []
    for fam in families:
        if not isinstance(fam, OpFamily):
            raise TypeError(f"build_for: expected OpFamily objects, got {type(fam).__name__}")
        if not fam.core and fam not in extra:
            extra.append(fam)
    if not extra and not augment and not mpi:
        return execute
    if augment and mpi:
        raise ValueError("build_for: augmentation and MPI have no build together")
    return _build(tuple(sorted(extra, key=lambda f: f.block.start)), augment, mpi)


def build_suffix(families) -> str:
    """The name suffix of the build over ``families`` (extra families, in opcode order)."""
    digest = hashlib.sha256("".join(f.source_digest() for f in families).encode()).hexdigest()
    return "_".join(f"{f.name}{f.block.start}" for f in families) + "_" + digest[:16]


@functools.cache
def _build(families, augment=False, mpi=False):
    loaders = [f for f in families if f.load_job is not None]
    if len(loaders) > 1 or (loaders and augment):
        raise ValueError("one program uses op families that each load jobs their own way ("
                         + ", ".join(f.name for f in loaders) + (", augmentation" if augment
                                                                  else "") + "): at most one may")
    suffix = build_suffix(families) if families else "core"
    if augment:
        suffix += "_augment"
        loader = load_augmented_rows
    else:
        loader = loaders[0].load_job if loaders else load_rows
    hooks = {}
    if mpi:
        from nnjit.distributed import mpi_step  # (imports mpi4py)

        suffix += "_" + mpi_step.build_suffix()
        hooks = {"_shard_rows": mpi_step.shard_rows, "_sync_gradients": mpi_step.sync_gradients,
                 "_sync_epoch": mpi_step.sync_epoch}
    forward, backward = _chain(families, suffix)
    replay_x = _copy(replay, suffix, {"_extension_forward": forward,
                                      "_extension_backward": backward})
    return _copy(execute, suffix, {"replay": replay_x, "_load_job": loader, **hooks})
