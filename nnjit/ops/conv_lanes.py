"""The conv_lanes family: CONV2D_LANES, the 2-D convolution of :mod:`nnjit.ops.conv` run by the
"lanes" kernels (:mod:`nnjit.kernels.conv_lanes`: the samples in the vector lanes).

The recorder (:func:`nnjit.ops.conv.record_conv2d`) records this op for the layers whose
algorithm is "lanes" (small stride-1 layers: :func:`nnjit.ops.conv.choose_algorithm`), with
CONV2D's geometry block and semantics. It is a family of its own so that a model compiles only
the algorithms its layers use: LeNet-5 compiles these kernels and not im2col's or the shifted
frames', a VGG-style net the other way round.
"""

from __future__ import annotations

import dataclasses

from nnjit.kernels import conv as kc
from nnjit.kernels import conv_lanes as kl
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
from nnjit.ops.conv import LANES_OPCODE, SPECS as CONV_SPECS, _sample_geometry
from nnjit.ops.family import OpFamily, register
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_FLAGS, R_IN0, R_IN1, R_IN2, R_OUT
from nnjit.tape.slot_views import slot_flat

FIRST_OPCODE = LANES_OPCODE
_LANES = FIRST_OPCODE
_NEED_A, _NEED_B, _NEED_C = NEEDS_GRAD[0], NEEDS_GRAD[1], NEEDS_GRAD[2]
_ACC_A, _ACC_B, _ACC_C = ACCUMULATE[0], ACCUMULATE[1], ACCUMULATE[2]

SPECS = (dataclasses.replace(CONV_SPECS[0], name="CONV2D_LANES",
                             geometry=lambda draw, dims: _sample_geometry(draw, dims, True)),)


@dispatcher
def forward(op, i, ctx):
    handled = op == _LANES
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        b = records[i, R_IN1]
        c = records[i, R_IN2]
        cc, hh, ww, o, kh, kw, _, _, ph, pw, dh, dw, groups, oh, ow, _, _ = kc._geometry(
            ctx[CTX_HYPER], records[i, R_AUX0])
        kl.forward(
            slot_flat(values, slots, records[i, R_IN0], rows), slot_flat(values, slots, b, rows),
            slot_flat(values, slots, c if c >= 0 else b, rows),
            slot_flat(values, slots, records[i, R_OUT], rows), c >= 0, cc, hh, ww, o, kh, kw,
            ph, pw, dh, dw, groups, oh, ow, ctx[CTX_SCRATCH])
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = op == _LANES
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
        cc, hh, ww, o, kh, kw, _, _, ph, pw, dh, dw, groups, oh, ow, _, _ = kc._geometry(
            ctx[CTX_HYPER], records[i, R_AUX0])
        if need_x or need_w or need_b:
            kl.backward(slot_flat(values, slots, a, rows), slot_flat(values, slots, b, rows),
                        slot_flat(grads, slots, records[i, R_OUT], rows), dx, dwt, db, need_x,
                        need_w, need_b, cc, hh, ww, o, kh, kw, ph, pw, dh, dw, groups, oh, ow,
                        ctx[CTX_SCRATCH])
    return handled


FAMILY = register(OpFamily("conv_lanes", SPECS, forward, backward, first_opcode=FIRST_OPCODE))
