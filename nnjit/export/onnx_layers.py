"""ONNX forms of the image, normalisation, embedding and joining ops (see
:mod:`nnjit.export.onnx_export` for the whole mapping).

Each handler reads its record's geometry block from the hyper table (layouts in the op
modules' docstrings: :mod:`nnjit.ops.conv`, :mod:`nnjit.ops.pooling`,
:mod:`nnjit.ops.normalization`) and writes the ONNX nodes of one op. float64 models avoid the ops
onnxruntime has no float64 kernel for (``Conv``, ``AveragePool``, ``GlobalAveragePool``) and the
float32 ``epsilon`` attributes of the normalisations.
"""

from __future__ import annotations

import numpy as np

from nnjit.kernels import conv as kc
from nnjit.ops import normalization as nrm
from nnjit.ops import pooling as pl
from nnjit.ops.opcodes import Opcode


def _block(b, node, size: int) -> list[float]:
    start = node.aux[0]
    return b.trace.tape.hyper[start:start + size]


def _far_pad(size: int, out: int, extent: int, stride: int, near: int) -> int:
    """The bottom/right padding that gives ``out`` windows of ``extent`` (``size`` values,
    ``near`` padding before them) in floor mode: nnjit keeps only the top/left padding, and
    "same" padding's odd pixel and ceil_mode's last window lie at the far end."""
    return max(0, (out - 1) * stride + extent - size - near)


# -- Conv2d -------------------------------------------------------------------------------------
def conv2d(b, node, base: str) -> None:
    g = [int(v) for v in _block(b, node, kc.G_SAMPLES + 1)]
    c, h, w, o = g[kc.G_C], g[kc.G_H], g[kc.G_W], g[kc.G_O]
    kh, kw, sh, sw = g[kc.G_KH], g[kc.G_KW], g[kc.G_SH], g[kc.G_SW]
    pt, pleft, dh, dw = g[kc.G_PH], g[kc.G_PW], g[kc.G_DH], g[kc.G_DW]
    groups, oh, ow = g[kc.G_GROUPS], g[kc.G_OH], g[kc.G_OW]
    pb = _far_pad(h, oh, dh * (kh - 1) + 1, sh, pt)
    pr = _far_pad(w, ow, dw * (kw - 1) + 1, sw, pleft)
    x = b.shaped(node.inputs[0], (c, h, w))
    weight = b.fixed(node.inputs[1], (o, c // groups, kh, kw))
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] >= 0 else -1
    if not b.double:
        inputs = [x, weight] + ([b.fixed(bias, (o,))] if bias >= 0 else [])
        out = b.node("Conv", inputs, base, kernel_shape=[kh, kw], strides=[sh, sw],
                     pads=[pt, pleft, pb, pr], dilations=[dh, dw], group=groups)
        b.set(node.out, out, (o, oh, ow))
        return
    # float64 (no Conv kernel in onnxruntime): the strided window slices side by side, one
    # MatMul per group with the weight's rows (im2col)
    if pt or pleft or pb or pr:
        x = b.node("Pad", [x, b.ints([0, 0, pt, pleft, 0, 0, pb, pr])], base + ".pad")
    taps = []
    for r in range(kh):
        for s in range(kw):
            starts = [r * dh, s * dw]
            ends = [r * dh + sh * (oh - 1) + 1, s * dw + sw * (ow - 1) + 1]
            tap = b.node("Slice", [x, b.ints(starts), b.ints(ends), b.ints([2, 3]),
                                   b.ints([sh, sw])], base + ".tap")
            taps.append(b.node("Unsqueeze", [tap, b.ints([2])], base + ".tap"))
    cols = b.node("Concat", taps, base + ".columns", axis=2) if len(taps) > 1 else taps[0]
    k = (c // groups) * kh * kw
    cols = b.node("Reshape", [cols, b.ints([0, groups, k, oh * ow])], base + ".columns")
    w3 = b.fixed(node.inputs[1], (groups, o // groups, k))
    out = b.node("Reshape", [b.node("MatMul", [w3, cols], base + ".product"),
                             b.ints([0, o, oh, ow])], base + ".images")
    if bias >= 0:
        out = b.node("Add", [out, b.fixed(bias, (o, 1, 1))], base)
    b.set(node.out, out, (o, oh, ow))


# -- pooling ------------------------------------------------------------------------------------
def _pool_geometry(b, node) -> list[int]:
    """A max or average pool's block up to DIVISOR (a max pool's RELU follows it)."""
    return [int(v) for v in _block(b, node, pl.G_DIVISOR + 1)]


def max_pool2d(b, node, base: str) -> None:
    g, relu = _pool_geometry(b, node), b.trace.tape.hyper[node.aux[0] + pl.G_RELU]
    c, h, w, oh, ow = g[pl.G_C], g[pl.G_H], g[pl.G_W], g[pl.G_OH], g[pl.G_OW]
    kh, kw, sh, sw = g[pl.G_KH], g[pl.G_KW], g[pl.G_SH], g[pl.G_SW]
    ph, pw, dh, dw = g[pl.G_PH], g[pl.G_PW], g[pl.G_DH], g[pl.G_DW]
    pads = [ph, pw, _far_pad(h, oh, dh * (kh - 1) + 1, sh, ph),
            _far_pad(w, ow, dw * (kw - 1) + 1, sw, pw)]
    out = b.node("MaxPool", [b.shaped(node.inputs[0], (c, h, w))], base, kernel_shape=[kh, kw],
                 strides=[sh, sw], pads=pads, dilations=[dh, dw])
    if relu:  # a ReLU folded into the pool (nnjit.engine.fusion)
        out = b.node("Relu", [out], base + ".relu")
    b.set(node.out, out, (c, oh, ow))


def _window_matrix(size: int, out: int, kernel: int, stride: int, pad: int,
                   include_pad: bool, unit: bool) -> np.ndarray:
    """(out, size): row i sums window i's in-image values, divided by its share of the divisor
    (the window up to the padded edge, or its in-image part) unless ``unit``."""
    m = np.zeros((out, size))
    for i in range(out):
        start = i * stride - pad
        inside = range(max(start, 0), min(start + kernel, size))
        share = (min(start + kernel, size + pad) - start) if include_pad else len(inside)
        m[i, list(inside)] = 1.0 if unit else 1.0 / share
    return m


def _separable_pool(b, x: str, rows: np.ndarray, cols: np.ndarray, base: str) -> str:
    """``rows @ x @ cols.T`` per image: a pooling with separable windows as two MatMuls."""
    left = b.node("MatMul", [b.array(rows, base + ".rows"), x], base + ".pool_rows")
    return b.node("MatMul", [left, b.array(cols.T, base + ".cols")], base)


def avg_pool2d(b, node, base: str) -> None:
    g = _pool_geometry(b, node)
    c, h, w, oh, ow = g[pl.G_C], g[pl.G_H], g[pl.G_W], g[pl.G_OH], g[pl.G_OW]
    kh, kw, sh, sw = g[pl.G_KH], g[pl.G_KW], g[pl.G_SH], g[pl.G_SW]
    ph, pw = g[pl.G_PH], g[pl.G_PW]
    include_pad, divisor = bool(g[pl.G_COUNT_PAD]), g[pl.G_DIVISOR]
    x = b.shaped(node.inputs[0], (c, h, w))
    floor_mode = ((h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1) == (oh, ow)
    if not b.double and floor_mode and not divisor:  # ONNX's AveragePool divides the same way
        out = b.node("AveragePool", [x], base, kernel_shape=[kh, kw], strides=[sh, sw],
                     pads=[ph, pw, ph, pw], count_include_pad=int(include_pad))
    else:
        rows = _window_matrix(h, oh, kh, sh, ph, include_pad, bool(divisor))
        cols = _window_matrix(w, ow, kw, sw, pw, include_pad, bool(divisor))
        out = _separable_pool(b, x, rows, cols, base + (".sum" if divisor else ""))
        if divisor:
            out = b.node("Div", [out, b.constant(float(divisor))], base)
    b.set(node.out, out, (c, oh, ow))


def adaptive_avg_pool2d(b, node, base: str) -> None:
    c, h, w, oh, ow = (int(v) for v in _block(b, node, 5))
    x = b.shaped(node.inputs[0], (c, h, w))
    if (oh, ow) == (1, 1):
        out = (b.reduce("ReduceMean", x, [2, 3], base) if b.double
               else b.node("GlobalAveragePool", [x], base))
    else:  # PyTorch's windows rows floor(i H / OH) .. ceil((i + 1) H / OH), any sizes
        def windows(size, out):
            m = np.zeros((out, size))
            for i in range(out):
                lo, hi = i * size // out, -(-(i + 1) * size // out)
                m[i, lo:hi] = 1.0 / (hi - lo)
            return m

        out = _separable_pool(b, x, windows(h, oh), windows(w, ow), base)
    b.set(node.out, out, (c, oh, ow))


# -- normalisation ------------------------------------------------------------------------------
def _normalize(b, x: str, mean: str, var: str, eps: float, scale: str | None,
               shift: str | None, base: str) -> str:
    """``(x - mean) / sqrt(var + eps) * scale + shift`` with eps a constant of the model dtype."""
    centred = b.node("Sub", [x, mean], base + ".centred")
    std = b.node("Sqrt", [b.node("Add", [var, b.constant(eps)], base + ".var_eps")],
                 base + ".std")
    out = b.node("Div", [centred, std], base + (".normalized" if scale or shift else ""))
    if scale is not None:
        out = b.node("Mul", [out, scale], base + (".scaled" if shift else ""))
    if shift is not None:
        out = b.node("Add", [out, shift], base)
    return out


def batch_norm(b, node, base: str) -> None:
    blk = _block(b, node, nrm.BN_SAVED + 1)
    c, length, eps = int(blk[nrm.BN_C]), int(blk[nrm.BN_L]), float(blk[nrm.BN_EPS])
    mean_slot, var_slot = int(blk[nrm.BN_RUNNING_MEAN]), int(blk[nrm.BN_RUNNING_VAR])
    dims = b.dims(node.inputs[0])  # (C, H, W) images stay as they are, other shapes (C, L)
    if not (dims and dims[0] == c and int(np.prod(dims)) == c * length):
        dims = (c, length)
    x = b.shaped(node.inputs[0], dims)
    channel = (c,) + (1,) * (len(dims) - 1)  # a per-channel value against x's row
    spread = [0, *range(2, len(dims) + 1)]  # the axes a channel's statistics run over
    weight, bias = (s if len(node.inputs) > k and s >= 0 else -1
                    for k, s in ((1, node.inputs[1]), (2, node.inputs[2])))
    if mean_slot >= 0 and not b.double:
        scale = b.fixed(weight, (c,)) if weight >= 0 else b.array(np.ones(c), base + ".ones")
        shift = b.fixed(bias, (c,)) if bias >= 0 else b.array(np.zeros(c), base + ".zeros")
        out = b.node("BatchNormalization", [x, scale, shift, b.fixed(mean_slot, (c,)),
                                            b.fixed(var_slot, (c,))], base, epsilon=eps)
    else:
        if mean_slot >= 0:  # float64: eps as a float64 constant, not a float32 attribute
            mean, var = b.fixed(mean_slot, channel), b.fixed(var_slot, channel)
        else:  # no running statistics: every batch normalises with its own, as in nnjit
            mean = b.reduce("ReduceMean", x, spread, base + ".mean")
            centred = b.node("Sub", [x, mean], base + ".deviation")
            var = b.reduce("ReduceMean", b.node("Mul", [centred, centred], base + ".squares"),
                           spread, base + ".var")
        out = _normalize(b, x, mean, var, eps,
                         b.fixed(weight, channel) if weight >= 0 else None,
                         b.fixed(bias, channel) if bias >= 0 else None, base)
    b.set(node.out, out, dims)


def layer_norm(b, node, base: str) -> None:
    blk = _block(b, node, nrm.LN_EPS + 1)
    d, eps = int(blk[nrm.LN_D]), float(blk[nrm.LN_EPS])
    groups = b.trace.tape.slots[node.inputs[0]].cols // d
    x = b.shaped(node.inputs[0], (groups, d))
    weight, bias = (s if len(node.inputs) > k and s >= 0 else -1
                    for k, s in ((1, node.inputs[1]), (2, node.inputs[2])))
    if not b.double:
        scale = b.fixed(weight, (d,)) if weight >= 0 else b.array(np.ones(d), base + ".ones")
        inputs = [x, scale] + ([b.fixed(bias, (d,))] if bias >= 0 else [])
        out = b.node("LayerNormalization", inputs, base, axis=-1, epsilon=eps)
    else:
        mean = b.reduce("ReduceMean", x, [2], base + ".mean")
        centred = b.node("Sub", [x, mean], base + ".deviation")
        var = b.reduce("ReduceMean", b.node("Mul", [centred, centred], base + ".squares"), [2],
                       base + ".var")
        out = _normalize(b, x, mean, var, eps, b.fixed(weight, (d,)) if weight >= 0 else None,
                         b.fixed(bias, (d,)) if bias >= 0 else None, base)
    b.set(node.out, out, (groups, d))


# -- embedding and joining ----------------------------------------------------------------------
def embedding(b, node, base: str) -> None:
    slots = b.trace.tape.slots
    num, dim = slots[node.inputs[1]].rows, slots[node.inputs[1]].cols
    k = slots[node.out].cols // dim
    out = b.node("Gather", [b.fixed(node.inputs[1], (num, dim)),
                            b.shaped(node.inputs[0], (k,))], base, axis=0)
    b.set(node.out, out, (k, dim))


def concat(b, node, base: str) -> None:
    out = b.node("Concat", [b.flat(s) for s in node.inputs], base, axis=1)
    b.set(node.out, out, (b.trace.tape.slots[node.out].cols,))


def columns(b, node, base: str) -> None:
    start, width = node.aux[0], b.trace.tape.slots[node.out].cols
    out = b.node("Slice", [b.flat(node.inputs[0]), b.ints([start]), b.ints([start + width]),
                           b.ints([1])], base)
    b.set(node.out, out, (width,))


LAYER_HANDLERS = {Opcode.CONV2D: conv2d, Opcode.CONV2D_LANES: conv2d,
                  Opcode.CONV2D_WINOGRAD: conv2d,
                  Opcode.MAXPOOL2D: max_pool2d,
                  Opcode.AVGPOOL2D: avg_pool2d, Opcode.ADAPTIVE_AVGPOOL2D: adaptive_avg_pool2d,
                  Opcode.BATCH_NORM: batch_norm, Opcode.LAYER_NORM: layer_norm,
                  Opcode.EMBEDDING: embedding, Opcode.CONCAT: concat, Opcode.COLUMNS: columns}
