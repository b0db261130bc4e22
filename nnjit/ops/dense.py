"""The dense family: ``y = x @ W.T + b`` (PyTorch's (out, in) weight layout).

Kernels: :mod:`nnjit.kernels.dense` (BLAS, a transposed product for small batches, a
register-blocked loop for narrow layers; the forward picks one per shape and BLAS mode).
"""

from nnjit.kernels import dense as kd
from nnjit.kernels._jit import jit
from nnjit.kernels.views import view2d
from nnjit.ops.context import (
    CTX_DENSE_MODE,
    CTX_GRADS,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SCRATCH,
    CTX_SLOTS,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_FLAGS, R_IN0, R_IN1, R_IN2, R_OUT
from nnjit.tape.slot_views import slot_flat, slot_view

# grad_flags bits as plain ints (one IR load each in the inlined dispatchers)
_NEED_A = NEEDS_GRAD[0]
_NEED_B = NEEDS_GRAD[1]
_NEED_C = NEEDS_GRAD[2]
_ACC_A = ACCUMULATE[0]
_ACC_B = ACCUMULATE[1]
_ACC_C = ACCUMULATE[2]
FIRST_OPCODE = 1
_DENSE = FIRST_OPCODE


def dense(x, weight, bias=None):
    """Record ``x @ weight.T + bias`` (x (B, I), weight (O, I), bias (1, O) or None)."""
    return x.tape.dense(x, weight, bias)


def _reference(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


SPECS = (
    OpSpec("DENSE", 3, "(B,I),(O,I),(1,O)?->(B,O)", _reference, dense, grad_inputs=(0, 1, 2)),
)


@jit
def _scratch_like(scratch, like, needed):
    """A scratch view shaped like ``like`` when ``needed`` (else ``like`` itself, unused)."""
    if needed:
        return view2d(scratch, 0, like.shape[0], like.shape[1])
    return like


@dispatcher
def forward(op, i, ctx):
    handled = op == _DENSE
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        b = records[i, R_IN1]
        c = records[i, R_IN2]
        kd.dense_forward(
            slot_view(values, slots, records[i, R_IN0], rows), slot_view(values, slots, b, rows),
            slot_flat(values, slots, c if c >= 0 else b, rows),
            slot_view(values, slots, records[i, R_OUT], rows), c >= 0, ctx[CTX_DENSE_MODE],
            ctx[CTX_SCRATCH],
        )
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = op == _DENSE
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        grads = ctx[CTX_GRADS]
        rows = ctx[CTX_ROWS]
        scratch = ctx[CTX_SCRATCH]
        a = records[i, R_IN0]
        b = records[i, R_IN1]
        c = records[i, R_IN2]
        f = records[i, R_FLAGS]
        dy = slot_view(grads, slots, records[i, R_OUT], rows)
        if (f & _NEED_A) != 0:
            acc_a = (f & _ACC_A) != 0
            dx = slot_view(grads, slots, a, rows)
            kd.dense_backward_input(dy, slot_view(values, slots, b, rows), dx,
                                    _scratch_like(scratch, dx, acc_a), acc_a)
        if (f & _NEED_B) != 0:
            acc_b = (f & _ACC_B) != 0
            dw = slot_view(grads, slots, b, rows)
            kd.dense_backward_weight(dy, slot_view(values, slots, a, rows), dw,
                                     _scratch_like(scratch, dw, acc_b), acc_b,
                                     ctx[CTX_DENSE_MODE])
        if c >= 0 and (f & _NEED_C) != 0:
            kd.dense_backward_bias(dy, slot_flat(grads, slots, c, rows), (f & _ACC_C) != 0)
    return handled


FAMILY = register(OpFamily("dense", SPECS, forward, backward, core=True,
                           first_opcode=FIRST_OPCODE))
