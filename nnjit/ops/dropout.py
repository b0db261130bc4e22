"""The dropout family: inverted dropout with a mask drawn from the model's RNG.

The record's in1 is the mask slot (same shape as x, no gradient), made by the recorder; it is no
recorder input. Evaluation batches copy x; training batches draw a mask (p == 0 still writes a
mask of ones, which backward uses). Kernels: :mod:`nnjit.kernels.elementwise`.
"""

from nnjit.kernels import elementwise as ke
from nnjit.ops.context import (
    CTX_GRADS,
    CTX_HYPER,
    CTX_RECORDS,
    CTX_RNG,
    CTX_ROWS,
    CTX_SLOTS,
    CTX_TRAINING,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_FLAGS, R_IN0, R_IN1, R_OUT
from nnjit.tape.slot_views import slot_flat

# grad_flags bits as plain ints (one IR load each in the inlined dispatchers)
_NEED_A = NEEDS_GRAD[0]
_ACC_A = ACCUMULATE[0]
FIRST_OPCODE = 30
_DROPOUT = FIRST_OPCODE


def dropout(x, p: float = 0.5):
    """Inverted dropout: active in training batches only (on the non-zeros of sparse features)."""
    if hasattr(x, "nonzeros"):  # nnjit.graph.edges.SparseFeatures
        return x.dropout(p)
    return x.tape.dropout(x, p)


SPECS = (
    OpSpec("DROPOUT", 1, "(B,F)->(B,F)", None, dropout, hyper=("p",), sample_hyper={"p": 0.0},
           grad_inputs=(0,), aux={"aux0": "hyper index of p"},
           reference_note="random: tests/ops/test_opcodes.py::test_dropout_training_backward_is"
                          "_dy_times_the_scaled_mask (and p = 0 is the identity)"),
)


@dispatcher
def forward(op, i, ctx):
    handled = op == _DROPOUT
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        x = slot_flat(values, slots, records[i, R_IN0], rows)
        y = slot_flat(values, slots, records[i, R_OUT], rows)
        if ctx[CTX_TRAINING]:
            ke.dropout_forward(x, y, slot_flat(values, slots, records[i, R_IN1], rows),
                               ctx[CTX_HYPER][records[i, R_AUX0]], ctx[CTX_RNG])
        else:
            for k in range(x.size):
                y[k] = x[k]
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = op == _DROPOUT
    if handled:
        records = ctx[CTX_RECORDS]
        f = records[i, R_FLAGS]
        if (f & _NEED_A) != 0:
            slots = ctx[CTX_SLOTS]
            grads = ctx[CTX_GRADS]
            rows = ctx[CTX_ROWS]
            ke.dropout_backward(slot_flat(ctx[CTX_VALUES], slots, records[i, R_IN1], rows),
                                slot_flat(grads, slots, records[i, R_OUT], rows),
                                slot_flat(grads, slots, records[i, R_IN0], rows),
                                (f & _ACC_A) != 0)
    return handled


FAMILY = register(OpFamily("dropout", SPECS, forward, backward,
                           first_opcode=FIRST_OPCODE))
