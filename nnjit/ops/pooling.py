"""The pooling family: 2-D max, average and adaptive average pooling over NCHW images.

Inputs are image tensors ``(B, C, H, W)`` (a batch slot read with ``dims == (C, H, W)``; a flat
input is viewed first: ``x.view(-1, C, H, W)``); outputs ``(B, C, OH, OW)``. The arguments,
defaults, output sizes (``ceil_mode`` included) and argument checks are PyTorch's
(``torch.nn.functional.max_pool2d`` / ``avg_pool2d`` / ``adaptive_avg_pool2d``).

Each record's geometry is one ``block`` in the hyper table (aux0 is its first index):
``C, H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, COUNT_INCLUDE_PAD, DIVISOR`` (max and
average: average pools have dilation 1, DIVISOR is ``divisor_override`` or 0; max pools add
RELU, 1 when the ReLU before the pool was folded into it, :mod:`nnjit.engine.fusion`), and
``C, H, W, OH, OW`` (adaptive). Max pooling keeps each window's argmax in a slot the recorder
makes (its record's in1, the output's shape, like the graph family's scatter max): the backward
is then a scatter over the outputs (a quarter of the input for 2x2 pools), with no second pass
over the windows, and ties resolve once, in the forward. Kernels: :mod:`nnjit.kernels.pooling`,
inlined into one compiled function per direction.
"""

from __future__ import annotations

import itertools

import numpy as np

from nnjit.kernels import pooling as kp
from nnjit.kernels._jit import inlined, jit
from nnjit.ops.context import (
    CTX_GRADS,
    CTX_HYPER,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SLOTS,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpGeometry, OpSpec
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_FLAGS, R_IN0, R_IN1, R_OUT
from nnjit.tape.slot_views import slot_flat

__all__ = ["FAMILY", "SPECS", "adaptive_avg_pool2d", "adaptive_output", "avg_arguments",
           "avg_pool2d", "max_pool2d", "pool_arguments", "pool_geometry", "pool_output_size"]

FIRST_OPCODE = 90
_MAXPOOL2D, _AVGPOOL2D, _ADAPTIVE_AVGPOOL2D = range(FIRST_OPCODE, FIRST_OPCODE + 3)
_NEED_A = NEEDS_GRAD[0]
_ACC_A = ACCUMULATE[0]
# the argmax is kept as a float: exact for planes below 2**24 values in float32
MAX_PLANE = 2**24
(G_C, G_H, G_W, G_OH, G_OW, G_KH, G_KW, G_SH, G_SW, G_PH, G_PW, G_DH, G_DW, G_COUNT_PAD,
 G_DIVISOR, G_RELU) = range(16)


# -- geometry (PyTorch's rules) ----------------------------------------------------------------
def _pair(value, name: str, where: str, low: int) -> tuple[int, int]:
    """An int or a pair of ints (height, width), each >= low; ValueError naming ``name``."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    ok = len(pair) == 2 and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                and v >= low for v in pair)
    if not ok:
        raise ValueError(f"{where}: {name} must be an int >= {low} or a pair of them "
                         f"(height, width), got {value!r}")
    return int(pair[0]), int(pair[1])


def pool_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                     ceil_mode: bool) -> int:
    """Output length of a pooling along one axis (PyTorch's ``pooling_output_shape``): with
    ``ceil_mode`` a last partial window counts if it starts inside the input or the left
    padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _image(x, where: str) -> tuple[int, int, int]:
    """(C, H, W) of an image tensor; ValueError naming the layer, the shape and the fix."""
    if len(x.dims) != 3:
        raise ValueError(f"{where}: expected images of shape (B, C, H, W), got shape "
                         f"{tuple(x.shape)}; read each row as an image first, e.g. "
                         f"x.view(-1, C, H, W)")
    c, h, w = x.dims
    return int(c), int(h), int(w)


def pool_arguments(where: str, kernel_size, stride=None, padding=0, dilation=1,
                   ceil_mode=False) -> tuple[int, ...]:
    """``(KH, KW, SH, SW, PH, PW, DH, DW)`` of a max or average pool, checked as PyTorch does
    (ints or (height, width) pairs, stride None = the kernel size, padding at most half the
    kernel); ValueError naming the argument."""
    kh, kw = _pair(kernel_size, "kernel_size", where, 1)
    sh, sw = (kh, kw) if stride is None or stride == () else _pair(stride, "stride", where, 1)
    ph, pw = _pair(padding, "padding", where, 0)
    dh, dw = _pair(dilation, "dilation", where, 1)
    if not isinstance(ceil_mode, (bool, np.bool_)):
        raise ValueError(f"{where}: ceil_mode must be True or False, got {ceil_mode!r}")
    if ph > kh // 2 or pw > kw // 2:
        raise ValueError(f"{where}: padding {(ph, pw)} must be at most half the kernel_size "
                         f"{(kh, kw)} (PyTorch's rule)")
    return kh, kw, sh, sw, ph, pw, dh, dw


def pool_geometry(dims, where: str, kernel_size, stride=None, padding=0, dilation=1,
                  ceil_mode=False) -> tuple[int, ...]:
    """``(KH, KW, SH, SW, PH, PW, DH, DW, OH, OW)`` of a max or average pool over images of
    ``dims`` (C, H, W): :func:`pool_arguments` and an output of at least 1x1."""
    kh, kw, sh, sw, ph, pw, dh, dw = pool_arguments(where, kernel_size, stride, padding,
                                                    dilation, ceil_mode)
    _, h, w = dims
    oh = pool_output_size(h, kh, sh, ph, dh, bool(ceil_mode))
    ow = pool_output_size(w, kw, sw, pw, dw, bool(ceil_mode))
    if oh < 1 or ow < 1:
        raise ValueError(f"{where}: kernel_size {(kh, kw)} with dilation {(dh, dw)} and padding "
                         f"{(ph, pw)} does not fit images of {h}x{w} (the output would be "
                         f"{oh}x{ow})")
    return kh, kw, sh, sw, ph, pw, dh, dw, oh, ow


def avg_arguments(where: str, count_include_pad=True, divisor_override=None) -> tuple[int, int]:
    """``(COUNT_INCLUDE_PAD, DIVISOR)`` of an average pool (0/1, and 0 for no override)."""
    if not isinstance(count_include_pad, (bool, np.bool_)):
        raise ValueError(f"{where}: count_include_pad must be True or False, got "
                         f"{count_include_pad!r}")
    if divisor_override is None:
        return int(count_include_pad), 0
    if (isinstance(divisor_override, bool) or not isinstance(divisor_override, (int, np.integer))
            or divisor_override < 1):
        raise ValueError(f"{where}: divisor_override must be None or an int >= 1, got "
                         f"{divisor_override!r}")
    return int(count_include_pad), int(divisor_override)


def adaptive_output(output_size, dims, where: str) -> tuple[int, int]:
    """(OH, OW) of an adaptive pool: an int or a pair (None in a pair keeps that input size)."""
    _, h, w = dims
    pair = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    if len(pair) == 2:
        output_size = (h if pair[0] is None else pair[0], w if pair[1] is None else pair[1])
    return _pair(output_size, "output_size", where, 1)


# -- recorders ---------------------------------------------------------------------------------
def _where(x, op: str) -> str:
    return x.tape.current_owner or op


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The max of each ``kernel_size`` window of images x (B, C, H, W) -> (B, C, OH, OW)
    (``torch.nn.functional.max_pool2d``; padding counts as -inf)."""
    where = _where(x, "max_pool2d")
    if return_indices:
        raise ValueError(f"{where}: return_indices=True is not supported (the indices stay "
                         "inside the op for its backward)")
    c, h, w = _image(x, where)
    if h * w >= MAX_PLANE:
        raise ValueError(f"{where}: images of {h}x{w} exceed {MAX_PLANE} values per plane")
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = pool_geometry(
        (c, h, w), where, kernel_size, stride, padding, dilation, ceil_mode)
    argmax = x.tape.alloc_tensor(x.rows, c * oh * ow)
    x.tape.slots[argmax.slot].name = f"{where}.argmax"
    return x.tape.record(_MAXPOOL2D, [x], x.rows, c * oh * ow, extra_inputs=[argmax],
                         block=(c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, 0, 0, 0),
                         out_dims=(c, oh, ow))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean of each ``kernel_size`` window of images x (B, C, H, W) -> (B, C, OH, OW)
    (``torch.nn.functional.avg_pool2d``: zero padding, counted in the divisor when
    ``count_include_pad``; ``divisor_override`` replaces the divisor)."""
    where = _where(x, "avg_pool2d")
    c, h, w = _image(x, where)
    kh, kw, sh, sw, ph, pw, _, _, oh, ow = pool_geometry(
        (c, h, w), where, kernel_size, stride, padding, 1, ceil_mode)
    include_pad, divisor = avg_arguments(where, count_include_pad, divisor_override)
    return x.tape.record(_AVGPOOL2D, [x], x.rows, c * oh * ow,
                         block=(c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, 1, 1, include_pad,
                                divisor),
                         out_dims=(c, oh, ow))


def adaptive_avg_pool2d(x, output_size):
    """The mean over PyTorch's adaptive windows of images x (B, C, H, W) -> (B, C, OH, OW)
    (``torch.nn.functional.adaptive_avg_pool2d``; ``output_size=1`` is the global average
    pool)."""
    where = _where(x, "adaptive_avg_pool2d")
    c, h, w = _image(x, where)
    oh, ow = adaptive_output(output_size, (c, h, w), where)
    return x.tape.record(_ADAPTIVE_AVGPOOL2D, [x], x.rows, c * oh * ow, block=(c, h, w, oh, ow),
                         out_dims=(c, oh, ow))


# -- references (float64 NumPy, for the tests) -------------------------------------------------
def _windows(h, w, geometry):
    """(oh, ow, rows, cols) of every window: the in-image positions each covers."""
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geometry
    for i, j in itertools.product(range(oh), range(ow)):
        rows = [r for r in (i * sh - ph + a * dh for a in range(kh)) if 0 <= r < h]
        cols = [c for c in (j * sw - pw + b * dw for b in range(kw)) if 0 <= c < w]
        yield i, j, rows, cols


def _max_pool2d_reference(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    b, c, h, w = x.shape
    g = pool_geometry((c, h, w), "reference", kernel_size, stride, padding, dilation, ceil_mode)
    y = np.full((b, c, g[-2], g[-1]), -np.inf)
    for i, j, rows, cols in _windows(h, w, g):
        if rows and cols:
            y[:, :, i, j] = x[:, :, rows][:, :, :, cols].max(axis=(2, 3))
    return y


def _avg_pool2d_reference(x, kernel_size, stride=None, padding=0, ceil_mode=False,
                          count_include_pad=True, divisor_override=None):
    b, c, h, w = x.shape
    g = pool_geometry((c, h, w), "reference", kernel_size, stride, padding, 1, ceil_mode)
    kh, kw, sh, sw, ph, pw = g[:6]
    y = np.zeros((b, c, g[-2], g[-1]))
    for i, j, rows, cols in _windows(h, w, g):
        # the window with its padding, up to the padded edge (not past it: ceil_mode)
        padded = ((min(i * sh - ph + kh, h + ph) - (i * sh - ph))
                  * (min(j * sw - pw + kw, w + pw) - (j * sw - pw)))
        divisor = divisor_override or (padded if count_include_pad else len(rows) * len(cols))
        if rows and cols:
            y[:, :, i, j] = x[:, :, rows][:, :, :, cols].sum(axis=(2, 3)) / divisor
    return y


def _adaptive_avg_pool2d_reference(x, output_size):
    b, c, h, w = x.shape
    oh, ow = adaptive_output(output_size, (c, h, w), "reference")
    y = np.zeros((b, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        r0, r1 = i * h // oh, -(-(i + 1) * h // oh)
        c0, c1 = j * w // ow, -(-(j + 1) * w // ow)
        y[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
    return y


# -- the generic check's geometry (it draws C, H, W; these draw the pool and fill OH, OW) ----
_MAX_HYPER = {"kernel_size": (2, 3), "stride": (None, 1, 2), "padding": (0, 1),
              "dilation": (1, 2), "ceil_mode": (False, True)}
_AVG_HYPER = {"kernel_size": (2, 3), "stride": (None, 1, 2), "padding": (0, 1),
              "ceil_mode": (False, True), "count_include_pad": (True, False),
              "divisor_override": (None, 3)}
_ADAPTIVE_HYPER = {"output_size": (1, 2, 3)}


def _draw_hyper(alternatives, draw) -> dict:
    return {h: v[draw(0, len(v) - 1)] for h, v in alternatives.items()}


def _pool_case(dims, hyper, dilation=1) -> OpGeometry:
    """A max/average pool case: H and W raised to the dilated kernel (every window then holds
    a value of the image), OH and OW computed."""
    k = hyper["kernel_size"]
    extent = dilation * (k - 1) + 1
    dims = dict(dims, H=max(dims["H"], extent), W=max(dims["W"], extent))
    g = pool_geometry((dims["C"], dims["H"], dims["W"]), "geometry", k, hyper.get("stride"),
                      hyper.get("padding", 0), dilation, hyper.get("ceil_mode", False))
    return OpGeometry(dict(dims, OH=g[-2], OW=g[-1]), hyper)


def _max_pool_geometry(draw, dims) -> OpGeometry:
    hyper = _draw_hyper(_MAX_HYPER, draw)
    return _pool_case(dims, hyper, hyper["dilation"])


def _avg_pool_geometry(draw, dims) -> OpGeometry:
    return _pool_case(dims, _draw_hyper(_AVG_HYPER, draw))


def _adaptive_geometry(draw, dims) -> OpGeometry:
    hyper = _draw_hyper(_ADAPTIVE_HYPER, draw)
    oh, ow = adaptive_output(hyper["output_size"], (dims["C"], dims["H"], dims["W"]), "dims")
    return OpGeometry(dict(dims, OH=oh, OW=ow), hyper)


_GEOMETRY = "hyper index of the geometry block (module docstring)"
SPECS = (
    # in1 of its record is the argmax slot (B, C*OH*OW) its recorder makes
    OpSpec("MAXPOOL2D", 1, "(B,C,H,W)->(B,C,OH,OW)", _max_pool2d_reference, max_pool2d,
           hyper=("kernel_size", "stride", "padding", "dilation", "ceil_mode"),
           sample_hyper=_MAX_HYPER, grad_inputs=(0,), aux={"aux0": _GEOMETRY},
           geometry=_max_pool_geometry),
    OpSpec("AVGPOOL2D", 1, "(B,C,H,W)->(B,C,OH,OW)", _avg_pool2d_reference, avg_pool2d,
           hyper=("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                  "divisor_override"),
           sample_hyper=_AVG_HYPER, grad_inputs=(0,), aux={"aux0": _GEOMETRY},
           geometry=_avg_pool_geometry),
    OpSpec("ADAPTIVE_AVGPOOL2D", 1, "(B,C,H,W)->(B,C,OH,OW)", _adaptive_avg_pool2d_reference,
           adaptive_avg_pool2d, hyper=("output_size",), sample_hyper=_ADAPTIVE_HYPER,
           grad_inputs=(0,), aux={"aux0": _GEOMETRY}, geometry=_adaptive_geometry),
)

# -- compiled ----------------------------------------------------------------------------------
_max_f, _max_b = inlined(kp.maxpool2d_forward), inlined(kp.maxpool2d_backward)
_max2x2_b = inlined(kp.maxpool2x2_backward)
_avg_f, _avg_b = inlined(kp.avgpool2d_forward), inlined(kp.avgpool2d_backward)
_adaptive_f, _adaptive_b = (inlined(kp.adaptive_avgpool2d_forward),
                            inlined(kp.adaptive_avgpool2d_backward))


@jit
def pooling_forward(op, i, rows, records, slots, hyper, values):
    """Replay pooling record ``i`` forward; False, computing nothing, for another opcode."""
    if not _MAXPOOL2D <= op <= _ADAPTIVE_AVGPOOL2D:
        return False
    g = records[i, R_AUX0]
    h, w = int(hyper[g + G_H]), int(hyper[g + G_W])
    oh, ow = int(hyper[g + G_OH]), int(hyper[g + G_OW])
    x = slot_flat(values, slots, records[i, R_IN0], rows)
    y = slot_flat(values, slots, records[i, R_OUT], rows)
    planes = x.shape[0] // (h * w)  # B * C (a parameter input in tests has its own rows)
    if op == _ADAPTIVE_AVGPOOL2D:
        _adaptive_f(x, y, planes, h, w, oh, ow)
        return True
    kh, kw = int(hyper[g + G_KH]), int(hyper[g + G_KW])
    sh, sw = int(hyper[g + G_SH]), int(hyper[g + G_SW])
    ph, pw = int(hyper[g + G_PH]), int(hyper[g + G_PW])
    if op == _MAXPOOL2D:
        _max_f(x, y, slot_flat(values, slots, records[i, R_IN1], rows), planes, h, w, oh, ow,
               kh, kw, sh, sw, ph, pw, int(hyper[g + G_DH]), int(hyper[g + G_DW]),
               hyper[g + G_RELU] != 0)
    else:
        _avg_f(x, y, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, hyper[g + G_COUNT_PAD] != 0,
               int(hyper[g + G_DIVISOR]))
    return True


@jit
def pooling_backward(op, i, rows, records, slots, hyper, values, grads):
    """Replay pooling record ``i`` backward (write or accumulate the input's gradient)."""
    if not _MAXPOOL2D <= op <= _ADAPTIVE_AVGPOOL2D:
        return False
    f = records[i, R_FLAGS]
    if (f & _NEED_A) == 0:
        return True
    acc = (f & _ACC_A) != 0
    g = records[i, R_AUX0]
    h, w = int(hyper[g + G_H]), int(hyper[g + G_W])
    oh, ow = int(hyper[g + G_OH]), int(hyper[g + G_OW])
    dx = slot_flat(grads, slots, records[i, R_IN0], rows)
    dy = slot_flat(grads, slots, records[i, R_OUT], rows)
    planes = dx.shape[0] // (h * w)
    if op == _MAXPOOL2D:
        argmax = slot_flat(values, slots, records[i, R_IN1], rows)
        if (kp.is_plain_2x2(h, w, oh, ow, int(hyper[g + G_KH]), int(hyper[g + G_KW]),
                            int(hyper[g + G_SH]), int(hyper[g + G_SW]), int(hyper[g + G_PH]),
                            int(hyper[g + G_PW]))
                and hyper[g + G_DH] == 1 and hyper[g + G_DW] == 1):
            _max2x2_b(dy, argmax, dx, planes, h, w, oh, ow, acc)
        else:
            _max_b(dy, argmax, dx, planes, h * w, oh * ow, acc)
    elif op == _AVGPOOL2D:
        _avg_b(dy, dx, planes, h, w, oh, ow, int(hyper[g + G_KH]), int(hyper[g + G_KW]),
               int(hyper[g + G_SH]), int(hyper[g + G_SW]), int(hyper[g + G_PH]),
               int(hyper[g + G_PW]), hyper[g + G_COUNT_PAD] != 0, int(hyper[g + G_DIVISOR]),
               acc)
    else:
        _adaptive_b(dy, dx, planes, h, w, oh, ow, acc)
    return True


@dispatcher
def forward(op, i, ctx):
    return pooling_forward(op, i, ctx[CTX_ROWS], ctx[CTX_RECORDS], ctx[CTX_SLOTS],
                           ctx[CTX_HYPER], ctx[CTX_VALUES])


@dispatcher
def backward(op, i, ctx):
    return pooling_backward(op, i, ctx[CTX_ROWS], ctx[CTX_RECORDS], ctx[CTX_SLOTS],
                            ctx[CTX_HYPER], ctx[CTX_VALUES], ctx[CTX_GRADS])


FAMILY = register(OpFamily("pooling", SPECS, forward, backward, first_opcode=FIRST_OPCODE))
