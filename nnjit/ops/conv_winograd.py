"""The conv_winograd family: CONV2D_WINOGRAD, the 2-D convolution of :mod:`nnjit.ops.conv` run by
Winograd's F(2x2, 3x3) (:mod:`nnjit.kernels.conv_winograd`: 16 multiplies for 2x2 outputs
instead of 36, the samples in the vector lanes).

The recorder (:func:`nnjit.ops.conv.record_conv2d`) records this op for the layers whose
algorithm is "winograd" (3x3, stride 1, no dilation, one group, 16+ channels in and out:
:func:`nnjit.ops.conv.choose_algorithm`; any padding), with CONV2D's geometry block and
semantics. It is a family of its own so that a model compiles only the algorithms its layers
use (the VGG-style net's conv1, one input channel, stays "vector": the conv family too).
"""

from __future__ import annotations

import dataclasses

from nnjit.kernels import conv as kc
from nnjit.kernels import conv_winograd as kw
from nnjit.ops.context import (
    CTX_GRADS,
    CTX_HYPER,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SCRATCH,
    CTX_SLOTS,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.conv import SPECS as CONV_SPECS, WINOGRAD_OPCODE, _sample_geometry
from nnjit.ops.family import OpFamily, register
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_FLAGS, R_IN0, R_IN1, R_IN2, R_OUT
from nnjit.tape.slot_views import slot_flat

FIRST_OPCODE = WINOGRAD_OPCODE
_WINOGRAD = FIRST_OPCODE
_NEED_A, _NEED_B, _NEED_C = NEEDS_GRAD[0], NEEDS_GRAD[1], NEEDS_GRAD[2]
_ACC_A, _ACC_B, _ACC_C = ACCUMULATE[0], ACCUMULATE[1], ACCUMULATE[2]

SPECS = (dataclasses.replace(CONV_SPECS[0], name="CONV2D_WINOGRAD",
                             geometry=lambda draw, dims: _sample_geometry(draw, dims,
                                                                          winograd=True)),)


@dispatcher
def forward(op, i, ctx):
    handled = op == _WINOGRAD
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        b = records[i, R_IN1]
        c = records[i, R_IN2]
        cc, hh, ww, o, _, _, _, _, ph, pw, _, _, _, oh, ow, _, _ = kc._geometry(
            ctx[CTX_HYPER], records[i, R_AUX0])
        kw.forward(
            slot_flat(values, slots, records[i, R_IN0], rows), slot_flat(values, slots, b, rows),
            slot_flat(values, slots, c if c >= 0 else b, rows),
            slot_flat(values, slots, records[i, R_OUT], rows), c >= 0, cc, hh, ww, o, ph, pw,
            oh, ow, ctx[CTX_SCRATCH])
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = op == _WINOGRAD
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        grads = ctx[CTX_GRADS]
        rows = ctx[CTX_ROWS]
        a = records[i, R_IN0]
        b = records[i, R_IN1]
        c = records[i, R_IN2]
        f = records[i, R_FLAGS]
        need_x = (f & _NEED_A) != 0
        need_w = (f & _NEED_B) != 0
        need_b = c >= 0 and (f & _NEED_C) != 0
        dx = slot_flat(grads, slots, a, rows)
        dwt = slot_flat(grads, slots, b, rows)
        db = slot_flat(grads, slots, c if c >= 0 else b, rows)
        if need_x and (f & _ACC_A) == 0:
            dx[:] = 0
        if need_w and (f & _ACC_B) == 0:
            dwt[:] = 0
        if need_b and (f & _ACC_C) == 0:
            db[:] = 0
        cc, hh, ww, o, _, _, _, _, ph, pw, _, _, _, oh, ow, _, _ = kc._geometry(
            ctx[CTX_HYPER], records[i, R_AUX0])
        if need_x or need_w or need_b:
            kw.backward(slot_flat(values, slots, a, rows), slot_flat(values, slots, b, rows),
                        slot_flat(grads, slots, records[i, R_OUT], rows), dx, dwt, db, need_x,
                        need_w, need_b, cc, hh, ww, o, ph, pw, oh, ow, ctx[CTX_SCRATCH])
    return handled


FAMILY = register(OpFamily("conv_winograd", SPECS, forward, backward,
                           first_opcode=FIRST_OPCODE))
