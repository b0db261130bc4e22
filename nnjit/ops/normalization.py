"""The normalization family: batch norm (per channel over the batch, running statistics) and
layer norm (over each row's trailing dims).

BATCH_NORM records ``[x, weight, bias]`` (weight and bias optional, slot -1) and its geometry
block (aux0): ``C, L, eps, momentum, cumulative, running_mean, running_var,
num_batches_tracked, saved`` (the last four are slot numbers, -1 when absent). ``x`` is read as
``(rows, C, L)``. Training batches normalise with the batch's statistics, keep its mean, 1/std
and biased variance in the ``saved`` slot (3C values, for the backward) and, when there are
running statistics, update them with PyTorch's rule (the running variance takes the unbiased
batch variance; ``cumulative``: momentum None, factor ``1 / num_batches_tracked``); evaluation
batches normalise with the running statistics (with the batch's when there are none, as
PyTorch's ``track_running_stats=False``).

LAYER_NORM records ``[x, weight, bias]`` and the block ``D, eps``: every run of ``D`` values of
a row (the normalised trailing dims) is normalised on its own, in training and evaluation alike.

Kernels: :mod:`nnjit.kernels.normalization`.
"""

from __future__ import annotations

import numpy as np

from nnjit.kernels import normalization as kn
from nnjit.ops.context import (
    CTX_GRADS,
    CTX_HYPER,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SLOTS,
    CTX_TRAINING,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape.records import (
    ACCUMULATE,
    NEEDS_GRAD,
    R_AUX0,
    R_FLAGS,
    R_IN0,
    R_IN1,
    R_IN2,
    R_OUT,
)
from nnjit.tape.slot_views import slot_flat
from nnjit.tape.tape import OPCODE_OF

_NEED_A, _NEED_B, _NEED_C = NEEDS_GRAD
_ACC_A, _ACC_B, _ACC_C = ACCUMULATE
FIRST_OPCODE = 100
_BATCH_NORM = FIRST_OPCODE
_LAYER_NORM = FIRST_OPCODE + 1

# BATCH_NORM's block, field by field (offsets from its first index)
(BN_C, BN_L, BN_EPS, BN_MOMENTUM, BN_CUMULATIVE, BN_RUNNING_MEAN, BN_RUNNING_VAR, BN_COUNT,
 BN_SAVED, BN_RELU) = range(10)
# LAYER_NORM's block
LN_D, LN_EPS = range(2)


def _owner(x) -> str:
    return x.tape.current_owner or "batch_norm"


def batch_norm(x, running_mean=None, running_var=None, weight=None, bias=None, *,
               momentum: float | None = 0.1, eps: float = 1e-5, num_batches_tracked=None):
    """Record batch normalisation of ``x`` ``(B, C)``, ``(B, C, L)`` or ``(B, C, H, W)`` per
    channel (PyTorch's ``F.batch_norm``; ``nnjit.nn.BatchNorm1d`` / ``BatchNorm2d`` call it).

    Whether a batch trains is the trainer's: training batches of ``fit`` (and ``gradients``)
    use the batch's statistics and update ``running_mean`` / ``running_var`` (tensors of the
    module's buffers, or None) in place; validation, ``evaluate`` and ``predict`` use the
    running statistics. ``momentum=None`` averages cumulatively over ``num_batches_tracked``.
    """
    C = int(x.dims[0])
    L = int(np.prod(x.dims[1:], dtype=np.int64))
    return _record_batch_norm(x, weight, bias, C, L, eps, momentum, running_mean, running_var,
                              num_batches_tracked)


def _record_batch_norm(x, weight, bias, C, L, eps, momentum, running_mean, running_var,
                       num_batches_tracked):
    tape = x.tape
    where = _owner(x)
    if C * L != x.cols:
        raise ValueError(f"{where}: batch_norm reads the input as (batch, {C}, {L}), which does "
                         f"not fit its {x.cols} columns")
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and t.cols * int(t.rows) != C:
            raise ValueError(f"{where}: batch_norm {name} has {t.cols * int(t.rows)} values, "
                             f"the input has {C} channels")
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{where}: batch_norm needs both running_mean and running_var, or "
                         "neither")
    if momentum is None and running_mean is not None and num_batches_tracked is None:
        raise ValueError(f"{where}: batch_norm with momentum=None (a cumulative average) needs "
                         "num_batches_tracked")
    saved = tape.alloc_tensor(1, 3 * C)  # batch mean, 1/std, biased variance per channel

    def slot(t):
        return -1 if t is None else t.slot

    block = (C, L, eps, 0.0 if momentum is None else momentum, 1.0 if momentum is None else 0.0,
             slot(running_mean), slot(running_var), slot(num_batches_tracked), saved.slot, 0.0)
    return tape.record(OPCODE_OF["BATCH_NORM"], [x, weight, bias], x.rows, x.cols, block=block,
                       out_dims=x.dims)


def _batch_norm_op(x, weight=None, bias=None, *, L: int = 1, eps: float = 1e-5):
    """The op on a ``(B, C*L)`` input (the spec's recorder: ``L`` is the signature's dim),
    batch statistics only."""
    return _record_batch_norm(x, weight, bias, x.cols // int(L), int(L), eps, 0.1, None, None,
                              None)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Record layer normalisation of ``x`` over its trailing dims ``normalized_shape``
    (PyTorch's ``F.layer_norm``; ``nnjit.nn.LayerNorm`` calls it)."""
    shape = (int(normalized_shape),) if np.ndim(normalized_shape) == 0 else tuple(
        int(d) for d in normalized_shape)
    if tuple(x.dims[len(x.dims) - len(shape):]) != shape or len(shape) > len(x.dims):
        raise ValueError(f"{x.tape.current_owner or 'layer_norm'}: normalized_shape {list(shape)}"
                         f" must equal the input's trailing dims; the input is "
                         f"{tuple(x.shape)}")
    return _record_layer_norm(x, weight, bias, int(np.prod(shape, dtype=np.int64)), eps)


def _record_layer_norm(x, weight, bias, D, eps):
    where = x.tape.current_owner or "layer_norm"
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.cols * int(t.rows) != D:
            raise ValueError(f"{where}: layer_norm {name} has {t.cols * int(t.rows)} values, "
                             f"the normalized shape {D}")
    return x.tape.record(OPCODE_OF["LAYER_NORM"], [x, weight, bias], x.rows, x.cols,
                         block=(D, eps), out_dims=x.dims)


def _layer_norm_op(x, weight=None, bias=None, *, D: int = 1, eps: float = 1e-5):
    """The op on a ``(B, G*D)`` input (the spec's recorder: ``D`` is the signature's dim)."""
    return _record_layer_norm(x, weight, bias, int(D), eps)


def _batch_norm_reference(x, weight=None, bias=None, L=1, eps=1e-5):
    B = x.shape[0]
    v = x.reshape(B, -1, L)
    mean = v.mean(axis=(0, 2), keepdims=True)
    var = v.var(axis=(0, 2), keepdims=True)
    y = (v - mean) / np.sqrt(var + eps)
    if weight is not None:
        y = y * weight.reshape(1, -1, 1)
    if bias is not None:
        y = y + bias.reshape(1, -1, 1)
    return y.reshape(x.shape)


def _layer_norm_reference(x, weight=None, bias=None, D=1, eps=1e-5):
    v = x.reshape(-1, D)
    y = (v - v.mean(axis=1, keepdims=True)) / np.sqrt(v.var(axis=1, keepdims=True) + eps)
    if weight is not None:
        y = y * weight.reshape(1, D)
    if bias is not None:
        y = y + bias.reshape(1, D)
    return y.reshape(x.shape)


def _spread(rng, shape):
    """Values at least 0.3 apart (a shuffled grid, jittered): a group of close values would
    have a tiny variance, whose 1/std makes finite differences meaningless."""
    n = int(np.prod(shape))
    grid = (rng.permutation(n) - (n - 1) / 2.0) * 0.5 + rng.uniform(-0.1, 0.1, n)
    return grid.reshape(shape)


def _sample_batch_norm(rng, dims):
    return {0: _spread(rng, (dims["B"], dims["C"] * dims["L"]))}


def _sample_layer_norm(rng, dims):
    return {0: _spread(rng, (dims["B"], dims["G"] * dims["D"]))}


SPECS = (
    OpSpec("BATCH_NORM", 3, "(B,C*L),(C)?,(C)?->(B,C*L)", _batch_norm_reference,
           _batch_norm_op, hyper=("L", "eps"), sample_hyper={"L": 1, "eps": 1e-5},
           grad_inputs=(0, 1, 2), sample_inputs=_sample_batch_norm,
           aux={"aux0": "block: C, L, eps, momentum, cumulative, running_mean slot, "
                        "running_var slot, num_batches_tracked slot, saved-statistics slot, "
                        "relu (1: the ReLU after it folded in, nnjit.engine.fusion)"}),
    OpSpec("LAYER_NORM", 3, "(B,G*D),(D)?,(D)?->(B,G*D)", _layer_norm_reference,
           _layer_norm_op, hyper=("D", "eps"), sample_hyper={"D": 1, "eps": 1e-5},
           grad_inputs=(0, 1, 2), sample_inputs=_sample_layer_norm,
           aux={"aux0": "block: D (values normalised together), eps"}),
)


@dispatcher
def forward(op, i, ctx):
    handled = op == _BATCH_NORM or op == _LAYER_NORM
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        hyper = ctx[CTX_HYPER]
        rows = ctx[CTX_ROWS]
        h = records[i, R_AUX0]
        xs = records[i, R_IN0]
        ws = records[i, R_IN1]
        bs = records[i, R_IN2]
        x = slot_flat(values, slots, xs, rows)
        y = slot_flat(values, slots, records[i, R_OUT], rows)
        w = slot_flat(values, slots, ws if ws >= 0 else xs, rows)
        b = slot_flat(values, slots, bs if bs >= 0 else xs, rows)
        if op == _BATCH_NORM:
            C = int(hyper[h + BN_C])
            L = int(hyper[h + BN_L])
            eps = hyper[h + BN_EPS]
            n_rows = x.size // (C * L)  # (a fixed-size input has its own rows)
            rm_slot = int(hyper[h + BN_RUNNING_MEAN])
            training = ctx[CTX_TRAINING]
            if training or rm_slot < 0:
                saved = slot_flat(values, slots, int(hyper[h + BN_SAVED]), rows)
                kn.batch_norm_train_forward(x, y, w, b, ws >= 0, bs >= 0, n_rows, C, L, eps,
                                            saved, hyper[h + BN_RELU] != 0)
                if training and rm_slot >= 0:
                    factor = hyper[h + BN_MOMENTUM]
                    count_slot = int(hyper[h + BN_COUNT])
                    if count_slot >= 0:
                        count = slot_flat(values, slots, count_slot, rows)
                        count[0] += 1.0
                        if hyper[h + BN_CUMULATIVE] != 0.0:
                            factor = 1.0 / count[0]
                    kn.batch_norm_update_running(
                        saved, n_rows, C, L, factor, slot_flat(values, slots, rm_slot, rows),
                        slot_flat(values, slots, int(hyper[h + BN_RUNNING_VAR]), rows))
            else:
                kn.batch_norm_eval_forward(
                    x, y, w, b, ws >= 0, bs >= 0, n_rows, C, L, eps,
                    slot_flat(values, slots, rm_slot, rows),
                    slot_flat(values, slots, int(hyper[h + BN_RUNNING_VAR]), rows),
                    hyper[h + BN_RELU] != 0)
        else:
            D = int(hyper[h + LN_D])
            kn.layer_norm_forward(x, y, w, b, ws >= 0, bs >= 0, x.size // D, D,
                                  hyper[h + LN_EPS])
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = op == _BATCH_NORM or op == _LAYER_NORM
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        grads = ctx[CTX_GRADS]
        hyper = ctx[CTX_HYPER]
        rows = ctx[CTX_ROWS]
        f = records[i, R_FLAGS]
        h = records[i, R_AUX0]
        xs = records[i, R_IN0]
        ws = records[i, R_IN1]
        bs = records[i, R_IN2]
        x = slot_flat(values, slots, xs, rows)
        dy = slot_flat(grads, slots, records[i, R_OUT], rows)
        w = slot_flat(values, slots, ws if ws >= 0 else xs, rows)
        dx = slot_flat(grads, slots, xs, rows)
        dw = slot_flat(grads, slots, ws if ws >= 0 else xs, rows)
        db = slot_flat(grads, slots, bs if bs >= 0 else xs, rows)
        need_w = ws >= 0 and (f & _NEED_B) != 0
        need_b = bs >= 0 and (f & _NEED_C) != 0
        if op == _BATCH_NORM:
            C = int(hyper[h + BN_C])
            L = int(hyper[h + BN_L])
            kn.batch_norm_backward(
                x, dy, w, ws >= 0, x.size // (C * L), C, L,
                slot_flat(values, slots, int(hyper[h + BN_SAVED]), rows),
                dx, (f & _NEED_A) != 0, (f & _ACC_A) != 0, dw, need_w, (f & _ACC_B) != 0,
                db, need_b, (f & _ACC_C) != 0,
                slot_flat(values, slots, records[i, R_OUT], rows), hyper[h + BN_RELU] != 0)
        else:
            D = int(hyper[h + LN_D])
            kn.layer_norm_backward(
                x, dy, w, ws >= 0, x.size // D, D, hyper[h + LN_EPS],
                dx, (f & _NEED_A) != 0, (f & _ACC_A) != 0, dw, need_w, (f & _ACC_B) != 0,
                db, need_b, (f & _ACC_C) != 0)
    return handled


FAMILY = register(OpFamily("normalization", SPECS, forward, backward,
                           first_opcode=FIRST_OPCODE))


def check_batch_statistics(program, n_rows: int, batch_size: int, drop_last: bool,
                           where: str) -> None:
    """Refuse a training batch of one value per channel for a batch norm (PyTorch raises
    "Expected more than 1 value per channel when training"), naming the layer: its batch
    variance is 0 and its running variance would divide by zero."""
    if program is None or n_rows < 1:
        return
    sizes = {min(batch_size, n_rows)}
    if not drop_last and n_rows % batch_size:
        sizes.add(n_rows % batch_size)
    if 1 not in sizes:
        return
    slots = program.tape.slots
    for node in program.nodes:
        if (node.opcode == _BATCH_NORM and slots[node.inputs[0]].batch
                and int(program.hyper[node.aux[0] + BN_L]) == 1):
            last = (f"the last batch of {n_rows} rows in batches of {batch_size}"
                    if batch_size > 1 else f"batch_size {batch_size}")
            hint = ("; pass drop_last=True to the DataLoader or choose another batch_size"
                    if batch_size > 1 else "; use batch_size > 1")
            raise ValueError(f"{where}: layer '{node.owner or 'batch_norm'}' would train on a "
                             f"batch of 1 row ({last}): batch norm needs more than 1 value per "
                             f"channel when training{hint}")
