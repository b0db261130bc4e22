"""2-D convolution kernels (NCHW, PyTorch's cross-correlation) and their backward.

A sample's row holds its image ``(C, H, W)`` row-major, the weight is PyTorch's
``(O, C/groups, KH, KW)`` laid out flat, a sample's output row is ``(O, OH, OW)``. The op's
geometry comes from the hyper table (``hyper[h + G_...]``, see :mod:`nnjit.ops.conv`).

Four algorithms; the recorder picks one per shape (:func:`nnjit.ops.conv.choose_algorithm`):

* **winograd** (``ALGO_WINOGRAD``, 3x3, stride 1, wide layers): Winograd's F(2x2, 3x3), 16
  multiplies per 2x2 outputs instead of 36 (:mod:`nnjit.kernels.conv_winograd`; an op family of
  its own, the ``conv_winograd`` family, like ``conv_lanes``).

* **lanes** (``ALGO_LANES``, stride 1, few channels): the samples in the vector lanes, every
  product exact (:mod:`nnjit.kernels.conv_lanes`; an op family of its own, the ``conv_lanes``
  family, so that a model compiles only the algorithms its layers use).
* **vector** (``ALGO_VECTOR``, stride 1): register-blocked products over shifted zero-padded
  frames, no column matrix and no BLAS (:mod:`nnjit.kernels.conv_vector`).
* **im2col + GEMM** (``ALGO_IM2COL``): per group, the receptive fields of a few samples are
  copied into a ``(C/g * KH * KW, samples * OH * OW)`` column matrix in the scratch span (one
  sample's for images of 1024 pixels or more, several side by side for small ones, so a product
  has about :data:`PRODUCT_COLUMNS` columns and BLAS runs near its peak) and one BLAS product does
  the work: forward ``y = W @ col``, weight gradient ``dW.T += col @ dy.T``, input gradient
  ``dcol = W.T @ dy`` scattered back (col2im). Strided convolutions run this (stride 1 only on
  request).

All loops use nnjit's compile options (``_jit``), no allocation: views of the arena and
of the scratch span only.
"""

import numpy as np

from nnjit.kernels import conv_lanes as kl
from nnjit.kernels import conv_winograd as kwino
from nnjit.kernels import conv_vector as kv
from nnjit.kernels._jit import jit
from nnjit.kernels.views import view1d, view2d

# the op's geometry block in the hyper table, in this order
(G_C, G_H, G_W, G_O, G_KH, G_KW, G_SH, G_SW, G_PH, G_PW, G_DH, G_DW, G_GROUPS, G_OH, G_OW,
 G_ALGO, G_SAMPLES) = range(17)
BLOCK_SIZE = 17
ALGO_IM2COL, ALGO_VECTOR, ALGO_LANES, ALGO_WINOGRAD = 0, 2, 3, 4  # (1 was the direct loops)
# im2col puts the columns of several samples side by side until a product has about this many
# columns: BLAS runs far below its peak on one small image's (16 x 150 x 100 for LeNet's conv2)
PRODUCT_COLUMNS = 2048
# ... but no more samples than keep the column matrix within about 640 KB of float32
COLUMN_ELEMENTS = 160_000
# ... and, for small layers, no more than keep a product's M*N*K within OpenBLAS's small-matrix
# limit on AVX-512 (100^3: below it, no packing): LeNet's conv2 (16 x 150 x 100 per sample)
# multiplies 4 samples (960k) in half the time per column that 10 samples (2.4M) take
SMALL_PRODUCT = 1_000_000


@jit(inline="always")
def _valid_columns(off, sw, width, ow):
    """Output columns ``q0 <= q < q1`` whose input column ``q * sw + off`` is inside the image."""
    q0 = (-off + sw - 1) // sw if off < 0 else 0
    last = width - 1 - off
    q1 = min(ow, last // sw + 1) if last >= 0 else 0
    q0 = min(q0, ow)
    return q0, max(q0, q1)


# The hot loops index views that start where the loop does (``view1d``), with the loop counter
# of a ``range`` from 0 as the index: numba then knows the index is not negative and drops its
# negative-index wraparound, which otherwise keeps LLVM from vectorising the copies (measured 5x
# slower with the geometry known only at run time).
@jit
def im2col(x, x0, c0, cg, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, buf, at, ld):
    """The receptive fields of channels c0..c0+cg of the image at x[x0:] (zeros over the
    padding) as a (cg*kh*kw, oh*ow) column block whose entry (row, j) is buf[at + row*ld + j]."""
    zero = buf.dtype.type(0.0)
    for c in range(cg):
        base = x0 + (c0 + c) * h * w
        for r in range(kh):
            for s in range(kw):
                row = (c * kh + r) * kw + s
                off = s * dw - pw
                q0, q1 = _valid_columns(off, sw, w, ow)
                n = q1 - q0
                for p in range(oh):
                    ih = p * sh - ph + r * dh
                    d = view1d(buf, at + row * ld + p * ow, ow)
                    if ih < 0 or ih >= h or n == 0:
                        for q in range(ow):
                            d[q] = zero
                        continue
                    for q in range(q0):
                        d[q] = zero
                    src = view1d(x, base + ih * w + off + q0 * sw, n * sw)
                    dv = view1d(buf, at + row * ld + p * ow + q0, n)
                    if sw == 1:
                        for t in range(n):
                            dv[t] = src[t]
                    else:
                        for t in range(n):
                            dv[t] = src[t * sw]
                    tail = view1d(buf, at + row * ld + p * ow + q1, ow - q1)
                    for t in range(ow - q1):
                        tail[t] = zero


@jit
def col2im(buf, at, ld, dx, x0, c0, cg, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
    """dx[x0:] += the adjoint of :func:`im2col` (the column block at buf[at:], rows ld apart):
    each column entry added to its input pixel."""
    for c in range(cg):
        base = x0 + (c0 + c) * h * w
        for r in range(kh):
            for s in range(kw):
                row = (c * kh + r) * kw + s
                off = s * dw - pw
                q0, q1 = _valid_columns(off, sw, w, ow)
                n = q1 - q0
                if n == 0:
                    continue
                for p in range(oh):
                    ih = p * sh - ph + r * dh
                    if ih < 0 or ih >= h:
                        continue
                    dst = view1d(dx, base + ih * w + off + q0 * sw, n * sw)
                    sv = view1d(buf, at + row * ld + p * ow + q0, n)
                    if sw == 1:
                        for t in range(n):
                            dst[t] += sv[t]
                    else:
                        for t in range(n):
                            dst[t * sw] += sv[t]


@jit(inline="always")
def _geometry(hyper, h):
    g = hyper[h:h + BLOCK_SIZE]
    return (int(g[G_C]), int(g[G_H]), int(g[G_W]), int(g[G_O]), int(g[G_KH]), int(g[G_KW]),
            int(g[G_SH]), int(g[G_SW]), int(g[G_PH]), int(g[G_PW]), int(g[G_DH]), int(g[G_DW]),
            int(g[G_GROUPS]), int(g[G_OH]), int(g[G_OW]), int(g[G_ALGO]), int(g[G_SAMPLES]))


@jit(inline="always")
def _samples_per_product(oh, ow, k, og):
    pq = oh * ow
    m = max(1, min(PRODUCT_COLUMNS // pq, COLUMN_ELEMENTS // (k * pq)))
    per_sample = og * k * pq
    return min(m, SMALL_PRODUCT // per_sample) if per_sample <= SMALL_PRODUCT else m


def samples_per_product(oh, ow, k, og):
    """Samples whose columns im2col puts side by side in one product: up to PRODUCT_COLUMNS
    columns, while the column matrix (``k`` rows) stays within COLUMN_ELEMENTS and, when one
    sample's product (``og`` output channels) is under SMALL_PRODUCT, the product too."""
    return _samples_per_product.py_func(oh, ow, k, og)


@jit(inline="always")
def input_gradient_by_columns(cg):
    """Whether a layer of the vector algorithm takes its input gradient through im2col's column
    matrix (col2im) instead: with fewer input channels per group than a tile has rows, the
    shifted product's rows are mostly padding and it covers the whole padded frame (LeNet's
    conv2, 6 -> 16 channels: docs/performance.md)."""
    return cg < kv.TILE_ROWS


def samples_for(cg, kh, kw, oh, ow, og, dh, dw, algo):
    """The geometry block's G_SAMPLES for ``algo``: samples per im2col product
    (:func:`samples_per_product`), or samples the vector backward holds at once
    (:func:`nnjit.kernels.conv_vector.samples_per_gradient`); :func:`scratch_elements` sizes the
    scratch for exactly this many."""
    if algo == ALGO_VECTOR:
        return kv.samples_per_gradient(cg, og, kh, kw, dh, dw, oh, ow)
    if algo == ALGO_LANES:
        return kl.MAX_LANES
    if algo == ALGO_WINOGRAD:
        return kwino.MAX_LANES
    return samples_per_product(oh, ow, cg * kh * kw, og)


def scratch_elements(cg, kh, kw, oh, ow, og, sh, sw, dh, dw, algo):
    """Elements of scratch the kernels need. im2col, for
    :func:`samples_per_product` samples: two column matrices (the input gradient's is the
    second), one output or output-gradient block and one weight gradient; the vector kernels:
    :func:`nnjit.kernels.conv_vector.scratch_elements`."""
    if algo == ALGO_LANES:
        return kl.scratch_elements(cg, og, kh, kw, dh, dw, oh, ow)
    if algo == ALGO_WINOGRAD:
        return kwino.scratch_elements(cg, og, oh, ow)
    k = cg * kh * kw
    m = samples_per_product(oh, ow, k, og)
    cols = m * oh * ow
    columns = 2 * k * cols + og * cols + og * k
    if algo != ALGO_VECTOR:
        return columns
    vector = kv.scratch_elements(cg, og, kh, kw, dh, dw, oh, ow)
    return max(vector, columns) if input_gradient_by_columns.py_func(cg) else vector


@jit
def conv2d_forward(x, w, b, y, has_bias, hyper, h, scratch):
    """y (N * O*OH*OW) = conv2d(x (N * C*H*W), w (O*C/g*KH*KW)) + b (O) (b unused unless
    ``has_bias``); geometry at ``hyper[h:]``; ``scratch`` holds one column matrix (im2col)."""
    c, hh, ww, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, oh, ow, algo, samples = _geometry(
        hyper, h)
    n = x.shape[0] // (c * hh * ww)
    cg = c // groups
    og = o // groups
    k = cg * kh * kw
    pq = oh * ow
    if algo == ALGO_VECTOR:
        kv.vector_forward(x, w, b, y, has_bias, c, hh, ww, o, kh, kw, ph, pw, dh, dw, groups, oh,
                          ow, scratch)
        return
    per = samples
    for i0 in range(0, n, per):
        m = min(per, n - i0)
        col = view2d(scratch, 0, k, m * pq)
        for g in range(groups):
            for t in range(m):
                im2col(x, (i0 + t) * c * hh * ww, g * cg, cg, hh, ww, kh, kw, sh, sw, ph, pw, dh,
                       dw, oh, ow, scratch, t * pq, m * pq)
            wg = view2d(w, g * og * k, og, k)
            if m == 1:
                np.dot(wg, col, view2d(y, (i0 * o + g * og) * pq, og, pq))
            else:  # (og, m samples' columns) -> each sample's (og, pq) block
                out = view2d(scratch, 2 * k * per * pq, og, m * pq)
                np.dot(wg, col, out)
                for t in range(m):
                    for oc in range(og):
                        yv = view1d(y, ((i0 + t) * o + g * og + oc) * pq, pq)
                        ov = view1d(scratch, 2 * k * per * pq + oc * m * pq + t * pq, pq)
                        for j in range(pq):
                            yv[j] = ov[j]
        if has_bias:
            for i in range(i0, i0 + m):
                for oc in range(o):
                    v = b[oc]
                    yv = view1d(y, (i * o + oc) * pq, pq)
                    for j in range(pq):
                        yv[j] += v


@jit
def conv2d_backward(x, w, dy, dx, dwt, db, need_x, acc_x, need_w, acc_w, need_b, acc_b, hyper, h,
                    scratch):
    """The gradients of :func:`conv2d_forward`: dx, dwt (the weight's) and db, each only when
    its ``need_`` flag is set, added to when its ``acc_`` flag is set (overwritten otherwise)."""
    c, hh, ww, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, oh, ow, algo, samples = _geometry(
        hyper, h)
    n = x.shape[0] // (c * hh * ww)
    cg = c // groups
    og = o // groups
    k = cg * kh * kw
    pq = oh * ow
    if need_b:
        if not acc_b:
            db[:] = 0
        for i in range(n):
            for oc in range(o):
                dyv = view1d(dy, (i * o + oc) * pq, pq)
                total = db.dtype.type(0.0)
                for j in range(pq):
                    total += dyv[j]
                db[oc] += total
    if not (need_x or need_w):
        return
    if need_x and not acc_x:
        dx[:] = 0
    if need_w and not acc_w:
        dwt[:] = 0
    if algo == ALGO_VECTOR:
        by_columns = need_x and input_gradient_by_columns(cg)
        kv.vector_backward(x, w, dy, dx, dwt, need_x and not by_columns, need_w, c, hh, ww, o,
                           kh, kw, ph, pw, dh, dw, groups, oh, ow, samples, scratch)
        if by_columns:
            _columns_backward(x, w, dy, dx, dwt, True, False, c, hh, ww, o, kh, kw, sh, sw, ph,
                              pw, dh, dw, groups, oh, ow, _samples_per_product(oh, ow, k, og),
                              scratch)
        return
    _columns_backward(x, w, dy, dx, dwt, need_x, need_w, c, hh, ww, o, kh, kw, sh, sw, ph, pw, dh,
                      dw, groups, oh, ow, samples, scratch)


@jit
def _columns_backward(x, w, dy, dx, dwt, need_x, need_w, c, hh, ww, o, kh, kw, sh, sw, ph, pw, dh,
                      dw, groups, oh, ow, per, scratch):
    """dx += and dwt += through im2col's column matrices, ``per`` samples per product."""
    n = x.shape[0] // (c * hh * ww)
    cg = c // groups
    og = o // groups
    k = cg * kh * kw
    pq = oh * ow
    dw_t = view2d(scratch, 2 * k * per * pq + og * per * pq, k, og)
    for i0 in range(0, n, per):
        m = min(per, n - i0)
        col = view2d(scratch, 0, k, m * pq)
        dcol = view2d(scratch, k * per * pq, k, m * pq)
        for g in range(groups):
            wg = view2d(w, g * og * k, og, k)
            if m == 1:
                dyg = view2d(dy, (i0 * o + g * og) * pq, og, pq)
            else:  # each sample's (og, pq) block side by side
                dyg = view2d(scratch, 2 * k * per * pq, og, m * pq)
                for t in range(m):
                    for oc in range(og):
                        src = view1d(dy, ((i0 + t) * o + g * og + oc) * pq, pq)
                        dst = view1d(scratch, 2 * k * per * pq + oc * m * pq + t * pq, pq)
                        for j in range(pq):
                            dst[j] = src[j]
            if need_w:
                for t in range(m):
                    im2col(x, (i0 + t) * c * hh * ww, g * cg, cg, hh, ww, kh, kw, sh, sw, ph, pw,
                           dh, dw, oh, ow, scratch, t * pq, m * pq)
                dwg = view1d(dwt, g * og * k, og * k)
                # (k, og) = col @ dy.T, added transposed: BLAS runs this orientation as fast or
                # faster at every shape measured (LeNet's conv2 16 x 1000 x 150: about 3x)
                np.dot(col, dyg.T, dw_t)
                for oc in range(og):
                    row = view1d(dwg, oc * k, k)
                    for j in range(k):
                        row[j] += dw_t[j, oc]
            if need_x:
                np.dot(wg.T, dyg, dcol)
                for t in range(m):
                    col2im(scratch, k * per * pq + t * pq, m * pq, dx, (i0 + t) * c * hh * ww,
                           g * cg, cg, hh, ww, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
