"""The conv family: 2-D convolution (``CONV2D``) on NCHW images, PyTorch's semantics.

A sample's row is its image ``(C, H, W)`` (the input tensor's ``dims``); the weight is PyTorch's
``(O, C/groups, KH, KW)`` (a 4-D parameter's slot is laid out flat), the bias ``(O,)``; the
output's dims are ``(O, OH, OW)``. The geometry (sizes, stride, padding, dilation, groups, the
output size and the algorithm) is the record's block in the hyper table (aux0); aux1 holds the
scratch elements the record's kernels need (:func:`nnjit.kernels.conv.scratch_elements`).

Algorithm per shape (:func:`choose_algorithm`, kernels in :mod:`nnjit.kernels.conv`): at stride 1
the vector kernels (:mod:`nnjit.kernels.conv_vector`: register-blocked products over shifted
zero-padded frames), faster than im2col + OpenBLAS at every stride-1 shape measured (batch 64,
1 thread: the VGG-style net's 3x3 layers 2-2.8x in each direction, LeNet-5's 5x5 layers 1.4-2x in
forward and weight gradient; one exception, the input gradient of a layer with fewer than 8
input channels, LeNet's second, 0.64 against 0.35 ms, where the other directions win more;
docs/performance.md).
Small stride-1 layers (at most 16 channels in and out per group, a group of samples' frames
and output within 8192 values per lane: LeNet-5's two) run the "lanes" kernels instead
(:mod:`nnjit.kernels.conv_lanes`: the samples in the vector lanes, every product exact; LeNet's
layers 1.4-2.1x faster than "vector" in each direction, docs/performance.md); those layers
record CONV2D_LANES, the op of the conv_lanes family (:mod:`nnjit.ops.conv_lanes`), so a model
compiles the kernels of the algorithms it uses only.
3x3 stride-1 layers of at least 16 channels in and out (no dilation, one group) run Winograd's
F(2x2, 3x3) (:mod:`nnjit.kernels.conv_winograd`: 16 multiplies for 2x2 outputs instead of 36;
the VGG-style net's 32 -> 32 and 32 -> 64 layers 1.2-2x faster than "vector" in each direction,
docs/performance.md); they record CONV2D_WINOGRAD, the conv_winograd family's op
(:mod:`nnjit.ops.conv_winograd`).
Strided convolutions run im2col + BLAS GEMM, with the columns of several small images side by
side so each product has up to 2048 columns (:func:`nnjit.kernels.conv.samples_per_product`).
The direct loops (``algorithm="direct"`` until issue 22) were slower than im2col at every shape
measured, LeNet's first layer included (1 -> 6 channels, 5x5, batch 64, 1 thread: forward 17 ms
direct against 3.9 ms im2col): they were removed, with 1.2 s of the family's cold compile; the
tests compare both algorithms with a float64 NumPy reference.
"""

from __future__ import annotations

import numpy as np

from nnjit.kernels import conv as kc
from nnjit.kernels import conv_winograd as kwino
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
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpGeometry, OpSpec
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_FLAGS, R_IN0, R_IN1, R_IN2, R_OUT
from nnjit.tape.slot_views import slot_flat

_NEED_A = NEEDS_GRAD[0]
_NEED_B = NEEDS_GRAD[1]
_NEED_C = NEEDS_GRAD[2]
_ACC_A = ACCUMULATE[0]
_ACC_B = ACCUMULATE[1]
_ACC_C = ACCUMULATE[2]
FIRST_OPCODE = 80
_CONV2D = FIRST_OPCODE
#: the conv_lanes family's opcode (nnjit/ops/conv_lanes.py): "lanes" layers record it
LANES_OPCODE = 150
#: the conv_winograd family's opcode (nnjit/ops/conv_winograd.py): "winograd" layers record it
WINOGRAD_OPCODE = 160

ALGORITHMS = {"vector": kc.ALGO_VECTOR, "im2col": kc.ALGO_IM2COL, "lanes": kc.ALGO_LANES,
              "winograd": kc.ALGO_WINOGRAD}


#: "lanes" is chosen for layers with at most this many channels in and out per group ...
LANES_CHANNELS = 16
#: ... whose frames and output of one group of samples (per lane) fit in this many elements
#: (LeNet's layers: 5728 and 2776; half of the L2 with 16 float32 lanes)
LANES_ELEMENTS = 8192
#: "winograd" is chosen for 3x3 layers with at least this many channels in and out ...
WINOGRAD_CHANNELS = 16
#: ... whose scratch stays within this many elements (the VGG-style net's conv2: 1.78M, 7 MB of
#: float32; the weight gradient's lane sums grow with in x out channels: 256 -> 256 needs 21M)
WINOGRAD_SCRATCH = 2_000_000


def winograd_refusal(kernel, stride, dilation, groups) -> str | None:
    """Why the "winograd" algorithm cannot run a layer of this geometry (None: it can)."""
    reasons = []
    if tuple(kernel) != (3, 3):
        reasons.append(f"kernel_size {tuple(kernel)}")
    if tuple(stride) != (1, 1):
        reasons.append(f"stride {tuple(stride)}")
    if tuple(dilation) != (1, 1):
        reasons.append(f"dilation {tuple(dilation)}")
    if groups != 1:
        reasons.append(f"groups {groups}")
    return ", ".join(reasons) or None


def choose_algorithm(cg: int, kh: int, kw: int, og: int, stride=(1, 1), out_size=None,
                     dilation=(1, 1), groups: int = 1) -> str:
    """The algorithm for a convolution with ``cg`` input and ``og`` output channels per group, a
    ``kh x kw`` kernel, ``stride`` and an ``out_size`` (OH, OW) output: "lanes" at stride 1
    for few channels and small images (both within LANES_CHANNELS and LANES_ELEMENTS; the
    output size must be given), "winograd" for 3x3 kernels at stride 1 (no dilation, one
    group) with WINOGRAD_CHANNELS or more in and out and a scratch within WINOGRAD_SCRATCH,
    "vector" at any other stride 1, "im2col" otherwise (module doc)."""
    if tuple(stride) != (1, 1):
        return "im2col"
    if out_size is not None and max(cg, og) <= LANES_CHANNELS:
        oh, ow = out_size
        frame = (oh + (kh - 1) * dilation[0]) * (ow + (kw - 1) * dilation[1])
        if cg * frame + og * oh * ow <= LANES_ELEMENTS:
            return "lanes"
    if (out_size is not None and min(cg, og) >= WINOGRAD_CHANNELS
            and winograd_refusal((kh, kw), stride, dilation, groups) is None):
        if kwino.scratch_elements(cg, og, *out_size) <= WINOGRAD_SCRATCH:
            return "winograd"
    return "vector"


# -- arguments ----------------------------------------------------------------------------------
def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def pair(value, name: str, where: str, low: int) -> tuple[int, int]:
    """``value`` (an int or a pair of ints, each >= ``low``) as a pair; ValueError/TypeError
    naming ``where`` and ``name`` otherwise."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2 or not all(_is_int(v) for v in items):
        raise TypeError(f"{where}: {name} must be an int or a pair of ints, got {value!r}")
    if any(v < low for v in items):
        raise ValueError(f"{where}: {name} must be >= {low}, got {value!r}")
    return int(items[0]), int(items[1])


def padding_of(padding, kernel, dilation, stride, where: str) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) padding for ``padding`` (an int, a pair, "valid" or "same":
    stride 1 only, the odd pixel of an even kernel's padding at the bottom/right, as PyTorch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding != "same":
            raise ValueError(f"{where}: padding must be an int, a pair of ints, 'same' or "
                             f"'valid', got {padding!r}")
        if stride != (1, 1):
            raise ValueError(f"{where}: padding='same' is not supported for strided "
                             f"convolutions (stride={stride}), as in PyTorch")
        th, tw = (d * (k - 1) for d, k in zip(dilation, kernel))
        return th // 2, th - th // 2, tw // 2, tw - tw // 2
    ph, pw = pair(padding, "padding", where, 0)
    return ph, ph, pw, pw


def output_size(size: int, kernel: int, stride: int, before: int, after: int,
                dilation: int) -> int:
    """Output length of one spatial axis (PyTorch's formula; < 1 when the kernel does not fit)."""
    return (size + before + after - dilation * (kernel - 1) - 1) // stride + 1


# -- recording ----------------------------------------------------------------------------------
def _as_tensor(tape, value, what: str, where: str):
    """A recorder input given as a Tensor or as a Parameter (recorded on ``tape``)."""
    from nnjit.nn.parameter import Parameter
    from nnjit.tape.tape import Tensor

    if isinstance(value, Parameter):
        return tape.parameter(value, f"{where}.{what}"), tuple(value.data.shape)
    if isinstance(value, Tensor):
        return value, tuple(value.shape)
    raise TypeError(f"{where}: {what} must be a Tensor or an nnjit.nn.Parameter, got "
                    f"{type(value).__name__}")


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, algorithm=None):
    """2-D convolution of ``x`` (batch, C, H, W) with ``weight`` (O, C/groups, KH, KW) plus
    ``bias`` (O,), as ``torch.nn.functional.conv2d``; the output's shape is (batch, O, OH, OW).

    ``weight`` and ``bias`` are Tensors (a 4-D ``weight.view(-1, C // groups, KH, KW)``) or
    :class:`nnjit.nn.Parameter` s. ``algorithm``: "vector" or "lanes" (stride 1), "winograd"
    (3x3, stride 1, no dilation, one group), "im2col" or None (chosen per shape,
    :func:`choose_algorithm`)."""
    tape = x.tape
    where = tape.current_owner or "conv2d"
    w, w_shape = _as_tensor(tape, weight, "weight", where)
    if len(w_shape) != 4:
        raise ValueError(f"{where}: weight must be 4-D (out_channels, in_channels/groups, kH, "
                         f"kW), got shape {w_shape}")
    b = None
    if bias is not None:
        b, b_shape = _as_tensor(tape, bias, "bias", where)
        if int(np.prod(b_shape)) != w_shape[0]:
            raise ValueError(f"{where}: bias must have {w_shape[0]} elements (out_channels), "
                             f"got shape {b_shape}")
    if not _is_int(groups) or groups < 1:
        raise ValueError(f"{where}: groups must be an int >= 1, got {groups!r}")
    return record_conv2d(x, w, b, w_shape[0], w_shape[1], w_shape[2:], stride, padding,
                         dilation, int(groups), algorithm, where)


def record_conv2d(x, w, b, out_channels: int, group_channels: int, kernel, stride, padding,
                  dilation, groups: int, algorithm, where: str):
    """Record CONV2D on tensors ``x``, ``w`` (any slot holding O * C/g * KH * KW values) and
    ``b`` (O values or None) after checking the geometry (errors name ``where``)."""
    kernel = pair(kernel, "kernel_size", where, 1)
    stride = pair(stride, "stride", where, 1)
    dilation = pair(dilation, "dilation", where, 1)
    pt, pb, pl, pr = padding_of(padding, kernel, dilation, stride, where)
    if len(x.dims) != 3:
        raise ValueError(f"{where}: expected an image input of shape (batch, C, H, W), got "
                         f"shape {x.shape}; view the rows as images first, e.g. "
                         f"x.view(-1, C, H, W)")
    c, h, wd = x.dims
    if c != group_channels * groups:
        raise ValueError(f"{where}: expected input with {group_channels * groups} channels "
                         f"(in_channels), got shape {x.shape}")
    if out_channels % groups:
        raise ValueError(f"{where}: out_channels ({out_channels}) must be divisible by groups "
                         f"({groups})")
    oh = output_size(h, kernel[0], stride[0], pt, pb, dilation[0])
    ow = output_size(wd, kernel[1], stride[1], pl, pr, dilation[1])
    if oh < 1 or ow < 1:
        raise ValueError(f"{where}: input of shape {x.shape} is too small for kernel_size "
                         f"{kernel} with dilation {dilation} and padding {(pt, pl)}: output "
                         f"would be {oh}x{ow}")
    og = out_channels // groups
    if algorithm is None:
        algorithm = choose_algorithm(group_channels, kernel[0], kernel[1], og, stride, (oh, ow),
                                     dilation, groups)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{where}: algorithm must be one of {', '.join(ALGORITHMS)} or None, "
                         f"got {algorithm!r}")
    if algorithm in ("vector", "lanes") and stride != (1, 1):
        raise ValueError(f"{where}: algorithm {algorithm!r} runs stride 1 only, got stride "
                         f"{stride}; use 'im2col' or None")
    if algorithm == "winograd" and (why := winograd_refusal(kernel, stride, dilation, groups)):
        raise ValueError(f"{where}: algorithm 'winograd' runs 3x3 kernels at stride 1 without "
                         f"dilation in one group only, got {why}; use 'vector', 'im2col' or "
                         f"None")
    algo = ALGORITHMS[algorithm]
    block = (c, h, wd, out_channels, *kernel, *stride, pt, pl, *dilation, groups, oh, ow, algo,
             kc.samples_for(group_channels, *kernel, oh, ow, og, *dilation, algo))
    scratch = kc.scratch_elements(group_channels, kernel[0], kernel[1], oh, ow, og, *stride,
                                  *dilation, algo)
    opcode = {kc.ALGO_LANES: LANES_OPCODE, kc.ALGO_WINOGRAD: WINOGRAD_OPCODE}.get(algo, _CONV2D)
    return x.tape.record(opcode, [x, w, b], x.rows, out_channels * oh * ow, block=block,
                         aux=(scratch,), out_dims=(out_channels, oh, ow))


# -- reference and the generic check's geometry -------------------------------------------------
def _reference(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, algorithm=None):
    """float64 NumPy conv2d: x (B, C, H, W), w (O, C/g, KH, KW), b (O,)/(1, O) -> (B, O, OH, OW)."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = pair(stride, "stride", "reference", 1)
    dh, dw = pair(dilation, "dilation", "reference", 1)
    pt, pb, pl, pr = padding_of(padding, (kh, kw), (dh, dw), (sh, sw), "reference")
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = output_size(h, kh, sh, pt, pb, dh)
    ow = output_size(wd, kw, sw, pl, pr, dw)
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        for r in range(kh):
            for s in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, r * dh:r * dh + sh * (oh - 1) + 1:sh,
                           s * dw:s * dw + sw * (ow - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("bjpq,oj->bopq", patch,
                                                         w[g * og:(g + 1) * og, :, r, s])
    if b is not None:
        out += np.reshape(b, (1, o, 1, 1))
    return out


def _sample_geometry(draw, dims, lanes: bool = False, winograd: bool = False) -> OpGeometry:
    """A consistent small case: groups, channels, kernel, stride, padding (ints, pairs, "same",
    "valid"), dilation, image size, algorithm ("im2col" or "vector"; ``lanes``: "lanes" at
    stride 1, the conv_lanes family's op; ``winograd``: "winograd", 3x3 at stride 1 without
    dilation in one group, the conv_winograd family's op); B stays the signature's draw."""
    groups, cg, og = draw(1, 2), draw(1, 2), draw(1, 2)
    kernel = (draw(1, 3), draw(1, 3))
    dilation = (draw(1, 2), draw(1, 2))
    if winograd:
        groups, kernel, dilation = 1, (3, 3), (1, 1)
    kind = draw(0, 3)
    if kind == 2:
        padding, stride = "same", (1, 1)
    else:
        stride = (1, 1) if lanes or winograd else (draw(1, 2), draw(1, 2))
        padding = ((draw(0, 2), draw(0, 2)) if kind == 1 else "valid" if kind == 3
                   else draw(0, 2))
    pt, pb, pl, pr = padding_of(padding, kernel, dilation, stride, "geometry")
    h = max(1, dilation[0] * (kernel[0] - 1) + 1 - pt - pb) + draw(0, 3)
    w = max(1, dilation[1] * (kernel[1] - 1) + 1 - pl - pr) + draw(0, 3)
    oh = output_size(h, kernel[0], stride[0], pt, pb, dilation[0])
    ow = output_size(w, kernel[1], stride[1], pl, pr, dilation[1])
    c, o = groups * cg, groups * og
    algorithms = (("lanes",) if lanes else ("winograd",) if winograd
                  else ("im2col", "vector") if stride == (1, 1) else ("im2col",))
    hyper = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
             "algorithm": algorithms[draw(0, len(algorithms) - 1)]}
    return OpGeometry(
        dims={"C": c, "H": h, "W": w, "O": o, "J": cg, "R": kernel[0], "S": kernel[1],
              "P": oh, "Q": ow},
        hyper=hyper, views={0: (c, h, w), 1: (cg, *kernel)}, out_dims=(o, oh, ow))


SPECS = (
    OpSpec("CONV2D", 3, "(B,C*H*W),(O,J*R*S),(1,O)?->(B,O*P*Q)", _reference, conv2d,
           grad_inputs=(0, 1, 2), input_domain=(-1.0, 1.0),
           aux={"aux0": "hyper index of the geometry block (nnjit.kernels.conv G_*)",
                "aux1": "scratch elements the kernels need"},
           scratch=lambda node, slots: node.aux[1], geometry=_sample_geometry),
)


# -- compiled -----------------------------------------------------------------------------------
@dispatcher
def forward(op, i, ctx):
    handled = op == _CONV2D
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        b = records[i, R_IN1]
        c = records[i, R_IN2]
        kc.conv2d_forward(
            slot_flat(values, slots, records[i, R_IN0], rows), slot_flat(values, slots, b, rows),
            slot_flat(values, slots, c if c >= 0 else b, rows),
            slot_flat(values, slots, records[i, R_OUT], rows), c >= 0, ctx[CTX_HYPER],
            records[i, R_AUX0], ctx[CTX_SCRATCH])
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = op == _CONV2D
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
        has_bias = c >= 0
        kc.conv2d_backward(
            slot_flat(values, slots, a, rows), slot_flat(values, slots, b, rows),
            slot_flat(grads, slots, records[i, R_OUT], rows), slot_flat(grads, slots, a, rows),
            slot_flat(grads, slots, b, rows), slot_flat(grads, slots, c if has_bias else b, rows),
            (f & _NEED_A) != 0, (f & _ACC_A) != 0, (f & _NEED_B) != 0, (f & _ACC_B) != 0,
            has_bias and (f & _NEED_C) != 0, (f & _ACC_C) != 0, ctx[CTX_HYPER],
            records[i, R_AUX0], ctx[CTX_SCRATCH])
    return handled


FAMILY = register(OpFamily("conv", SPECS, forward, backward, first_opcode=FIRST_OPCODE))
