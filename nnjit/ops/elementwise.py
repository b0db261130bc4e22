"""The elementwise binary family: ADD and MUL of two tensors of one shape.

Their recorders are the ``Tensor`` operators ``+`` and ``*`` (registered in the tape's operator
table below, so the tape never imports the op families). Kernels: :mod:`nnjit.kernels.elementwise`.
"""

from nnjit.kernels import elementwise as ke
from nnjit.ops.context import CTX_GRADS, CTX_RECORDS, CTX_ROWS, CTX_SLOTS, CTX_VALUES, dispatcher
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape import tape as _tape
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_FLAGS, R_IN0, R_IN1, R_OUT
from nnjit.tape.slot_views import slot_flat

# grad_flags bits as plain ints (one IR load each in the inlined dispatchers)
_NEED_A = NEEDS_GRAD[0]
_NEED_B = NEEDS_GRAD[1]
_ACC_A = ACCUMULATE[0]
_ACC_B = ACCUMULATE[1]
FIRST_OPCODE = 10
_ADD = FIRST_OPCODE
_MUL = FIRST_OPCODE + 1


def add(a, b):
    """Record ``a + b`` (equal shapes): ``Tensor.__add__``."""
    return a.tape.binary(_ADD, a, b)


def mul(a, b):
    """Record ``a * b`` elementwise (equal shapes): ``Tensor.__mul__``."""
    return a.tape.binary(_MUL, a, b)


SPECS = (
    OpSpec("ADD", 2, "(B,F),(B,F)->(B,F)", lambda a, b: a + b, add, grad_inputs=(0, 1)),
    OpSpec("MUL", 2, "(B,F),(B,F)->(B,F)", lambda a, b: a * b, mul, grad_inputs=(0, 1)),
)


@dispatcher
def forward(op, i, ctx):
    handled = (op == _ADD) | (op == _MUL)
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        a = slot_flat(values, slots, records[i, R_IN0], rows)
        b = slot_flat(values, slots, records[i, R_IN1], rows)
        y = slot_flat(values, slots, records[i, R_OUT], rows)
        if op == _ADD:
            ke.add_forward(a, b, y)
        else:
            ke.mul_forward(a, b, y)
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = (op == _ADD) | (op == _MUL)
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        grads = ctx[CTX_GRADS]
        rows = ctx[CTX_ROWS]
        a = records[i, R_IN0]
        b = records[i, R_IN1]
        f = records[i, R_FLAGS]
        dy = slot_flat(grads, slots, records[i, R_OUT], rows)
        if op == _ADD:
            if (f & _NEED_A) != 0:
                ke.add_backward(dy, slot_flat(grads, slots, a, rows), (f & _ACC_A) != 0)
            if (f & _NEED_B) != 0:
                ke.add_backward(dy, slot_flat(grads, slots, b, rows), (f & _ACC_B) != 0)
        else:
            if (f & _NEED_A) != 0:
                ke.mul_backward(dy, slot_flat(values, slots, b, rows),
                                slot_flat(grads, slots, a, rows), (f & _ACC_A) != 0)
            if (f & _NEED_B) != 0:
                ke.mul_backward(dy, slot_flat(values, slots, a, rows),
                                slot_flat(grads, slots, b, rows), (f & _ACC_B) != 0)
    return handled


FAMILY = register(OpFamily("elementwise", SPECS, forward, backward,
                           first_opcode=FIRST_OPCODE))
_tape.OPERATORS["add"] = add
_tape.OPERATORS["mul"] = mul
