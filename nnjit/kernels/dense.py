"""Dense (fully connected) layer kernels: ``y = x @ W.T + b`` and its backward.

Matrix products go through ``np.dot(a, b, out)`` (BLAS, no Python dispatch, no allocation). Weights
use PyTorch's ``(out_features, in_features)`` layout, so the products use ``.T`` views, which BLAS
handles without a copy.

The forward product has five implementations; :func:`forward_strategy` picks one from the shape
``B x I x O`` and from which OpenBLAS kernels run (measured grids of B 8-256, I 16-4096, O 3-256,
1 thread, float32, on the project's Zen 5 machine):

* **BLAS** ``np.dot(x, w.T, y)``: the default.
* **Transposed BLAS** ``y.T = w @ x.T`` into scratch, copied back with the bias: OpenBLAS is
  1.2-2x faster this way round for small batches and wide layers (us, AVX2 / AVX-512 kernels:
  32x4096x128 411 -> 325 / 322 -> 214, 16x784x256 100 -> 61, 32x64x128 6.6 -> 5.8 /
  4.4 -> 3.8).
* **Register-blocked dot products** (:mod:`nnjit.kernels.dense_vector`, AVX-512 hosts only: on
  AVX2 its 16 vector accumulators would not fit the registers) for inner dimensions of 256 or
  more and batches of at most 128 rows, where they beat OpenBLAS's best orientation.
* **Outer-product tiles** (:mod:`nnjit.kernels.dense_outer`, AVX-512 hosts) for inner dimensions
  below 256 and outputs a multiple of 4 vectors (64 float32 / 32 float64 values) with at least
  16 (float32) / 32 (float64) rows: ``w.T`` packed into scratch, 4 x 4 vector tiles started
  from the bias. 0.6-0.8x OpenBLAS's time from 16-32 rows up (32x64x128 float32 9.5 -> 6.2 us,
  200x64x128 42 -> 30 us); packing ``w.T`` makes it lose below that.
* **A register-blocked loop** that keeps a 2x2 block of outputs in registers and vectorises over
  the contiguous inner dimension of ``x`` and ``w``. Against OpenBLAS's AVX2 ("Haswell") kernels
  it wins for narrow outputs and small layers (16x64x10 0.35 vs 0.61, 32x128x10 1.0 vs 1.8,
  130x128x10 3.6 vs 5.6, 32x64x64 3.1 vs 3.6); against the AVX-512 ("SkylakeX") kernels only for
  O <= 10 with many rows, a long or a tiny inner dimension (144x128x10 3.5 vs 5.2, 32x4096x10
  25 vs 50, 16x16x3 0.12 vs 0.16). It is one nest (odd edges are recomputed, not handled by
  extra loops): edge loops cost ~0.5 s of cold compile.

The input gradient keeps BLAS (the same loops lost there, and the outer-product tiles were within
10% either way at the small layers' shapes); the weight gradient uses the register-blocked tiles
of :mod:`nnjit.kernels.dense_vector` for long inner dimensions and the outer-product tiles of
:mod:`nnjit.kernels.dense_outer` for short ones with batches of 128 rows or more, where they win.
"""

import numpy as np

from nnjit.kernels._jit import jit
from nnjit.kernels.dense_outer import (
    TILE_VECTORS,
    outer_forward,
    outer_weight_gradient,
    pack_transposed,
)
from nnjit.kernels.dense_vector import dot_forward, weight_gradient
from nnjit.kernels.simd import VECTOR_BYTES
from nnjit.kernels.views import view2d

# Which product computes the forward pass depends on the shape and on which OpenBLAS kernels run
# (``mode``: the Trainer passes :func:`nnjit.train.threads.dense_forward_mode`).
MODE_AVX2, MODE_AVX512 = 0, 1
# AVX2 BLAS: the register-blocked loop when I >= SMALL_MIN_INNER and either O <= SMALL_MAX_OUT or
# the batch has at most SMALL_MAX_ROWS rows and the weight at most SMALL_MAX_WEIGHT elements.
SMALL_MIN_INNER = 8
SMALL_MAX_OUT = 40
SMALL_MAX_ROWS = 32
SMALL_MAX_WEIGHT = 131072
# The transposed product ``y.T = w @ x.T`` (into scratch, then copied) is for batches of at most
# TRANSPOSED_MAX_ROWS rows: the program sizes its scratch for it only then.
TRANSPOSED_MAX_ROWS = 64
# AVX-512: the register-blocked dot products of nnjit.kernels.dense_vector for inner dimensions
# of at least DOT_MIN_INNER (a multiple of the lanes) and batches of at most DOT_MAX_ROWS rows
DOT_MIN_INNER = 256
DOT_MAX_ROWS = 128
# AVX-512: the outer-product tiles of nnjit.kernels.dense_outer for inner dimensions below
# OUTER_MAX_INNER, outputs a multiple of TILE_VECTORS vectors and at least OUTER_MIN_ROWS rows
# (float32; twice that in float64, whose vectors hold half as many values)
OUTER_MAX_INNER = 256
OUTER_MIN_INNER = 16
OUTER_MIN_ROWS = 16
# ... and for the weight gradient from OUTER_GRAD_MIN_ROWS rows and OUTER_GRAD_MIN_WEIGHT weights
OUTER_GRAD_MIN_ROWS = 128
OUTER_GRAD_MIN_WEIGHT = 8192
FORWARD_LOOP, FORWARD_BLAS, FORWARD_TRANSPOSED, FORWARD_DOT, FORWARD_OUTER = 0, 1, 2, 3, 4


def outer_scratch_size(inner: int, cols: int, itemsize: int) -> int:
    """Scratch elements :func:`dense_forward` needs for a (inner -> cols) layer's outer-product
    forward (the packed ``w.T`` and the bias), 0 if no shape of it takes that path."""
    lanes = VECTOR_BYTES // itemsize
    if OUTER_MIN_INNER <= inner < OUTER_MAX_INNER and cols % (TILE_VECTORS * lanes) == 0:
        return (inner + 1) * cols
    return 0


@jit(inline="always")
def forward_strategy(rows, inner, cols, mode, lanes):
    """FORWARD_LOOP, FORWARD_BLAS, FORWARD_TRANSPOSED, FORWARD_DOT or FORWARD_OUTER for a
    (rows x inner) @ (inner x cols) product under BLAS kernel ``mode``, ``lanes`` elements per
    64-byte vector (measured; see the module doc)."""
    if mode == MODE_AVX512:
        if (OUTER_MIN_INNER <= inner < OUTER_MAX_INNER and cols % (TILE_VECTORS * lanes) == 0
                and rows * lanes >= OUTER_MIN_ROWS * 16):
            return FORWARD_OUTER
        if inner >= DOT_MIN_INNER and inner % lanes == 0 and rows <= DOT_MAX_ROWS:
            return FORWARD_DOT
        if inner >= SMALL_MIN_INNER and cols <= 10 and (rows >= 128 or inner >= 4096
                                                       or inner <= 16):
            return FORWARD_LOOP
        if rows <= 32 and cols >= 32 and inner >= 64 and rows * inner * cols >= 131072:
            return FORWARD_TRANSPOSED
        if rows <= TRANSPOSED_MAX_ROWS and cols >= 128 and inner >= 1024:
            return FORWARD_TRANSPOSED
        return FORWARD_BLAS
    if inner >= SMALL_MIN_INNER and cols <= SMALL_MAX_OUT:
        return FORWARD_LOOP
    if rows <= TRANSPOSED_MAX_ROWS and cols >= 64 and inner * cols > SMALL_MAX_WEIGHT:
        return FORWARD_TRANSPOSED
    if inner >= SMALL_MIN_INNER and rows <= SMALL_MAX_ROWS and inner * cols <= SMALL_MAX_WEIGHT:
        return FORWARD_LOOP
    return FORWARD_BLAS


@jit
def dense_forward(x, w, b, y, has_bias, mode, scratch):
    """y (B, O) = x (B, I) @ w (O, I).T + b (O,) (b ignored unless ``has_bias``).

    ``mode`` is MODE_AVX2 or MODE_AVX512 (the BLAS kernels in use); ``scratch`` (1-D) is used by
    the transposed product (>= O * B elements, only for B <= TRANSPOSED_MAX_ROWS) and by the
    outer-product tiles (>= (I + 1) * O elements, :func:`outer_scratch_size`); with less, BLAS.
    """
    rows, inner = x.shape
    cols = y.shape[1]
    strategy = forward_strategy(rows, inner, cols, mode, VECTOR_BYTES // x.itemsize)
    if strategy == FORWARD_OUTER and scratch.shape[0] >= (inner + 1) * cols:
        # w.T and the bias packed once, then tiles that start from the bias (nnjit.kernels.
        # dense_outer)
        pack_transposed(w, b, has_bias, scratch)
        outer_forward(x, scratch, y)
        return
    if strategy == FORWARD_TRANSPOSED and scratch.shape[0] >= rows * cols:
        # OpenBLAS runs w (O, I) @ x.T (I, B) 1.2-2x faster than x @ w.T when B is small (its
        # kernels block over the long dimension); the (O, B) result is copied back transposed,
        # with the bias, in one pass.
        yt = view2d(scratch, 0, cols, rows)
        np.dot(w, x.T, yt)
        zero = y.dtype.type(0.0)
        for r in range(rows):
            for c in range(cols):
                y[r, c] = yt[c, r] + (b[c] if has_bias else zero)
        return
    if strategy == FORWARD_LOOP:
        # 2x2 output blocks, each four dot products over the contiguous inner dimension (four
        # independent reductions the compiler vectorises); see the module doc. An odd last row
        # or column is done as a block with itself (computed twice, stored twice): one loop
        # nest instead of three keeps the compile time down.
        zero = y.dtype.type(0.0)
        for r in range(0, rows, 2):
            r1 = min(r + 1, rows - 1)
            for c in range(0, cols, 2):
                c1 = min(c + 1, cols - 1)
                a00 = zero
                a01 = zero
                a10 = zero
                a11 = zero
                for k in range(inner):
                    x0 = x[r, k]
                    x1 = x[r1, k]
                    w0 = w[c, k]
                    w1 = w[c1, k]
                    a00 += x0 * w0
                    a01 += x0 * w1
                    a10 += x1 * w0
                    a11 += x1 * w1
                y[r, c] = a00
                y[r, c1] = a01
                y[r1, c] = a10
                y[r1, c1] = a11
    elif strategy == FORWARD_DOT:
        dot_forward(x, w, y)
    else:
        np.dot(x, w.T, y)
    if has_bias:
        for r in range(rows):
            for c in range(cols):
                y[r, c] += b[c]


@jit
def dense_backward_input(dy, w, dx, scratch, accumulate):
    """dx (B, I) (+)= dy (B, O) @ w (O, I); ``scratch`` (B, I) is used only when accumulating."""
    if accumulate:
        np.dot(dy, w, scratch)
        add_into(scratch, dx)
    else:
        np.dot(dy, w, dx)


@jit(inline="always")
def weight_gradient_by_tiles(rows, inner, cols, mode, lanes):
    """Whether :func:`nnjit.kernels.dense_vector.weight_gradient` computes a dense layer's
    weight gradient (measured against OpenBLAS's AVX-512 kernels: docs/performance.md): long
    inner dimensions, batches of a few dozen rows; in float64 (8 lanes) only with 32 outputs or
    more and batches of at most 64 rows, where it wins too."""
    if mode != MODE_AVX512 or inner < DOT_MIN_INNER or inner % lanes != 0 \
            or rows > DOT_MAX_ROWS:
        return False
    return lanes == 16 or (rows <= 64 and cols >= 32)


@jit(inline="always")
def weight_gradient_by_outer(rows, inner, cols, mode, lanes):
    """Whether :func:`nnjit.kernels.dense_outer.outer_weight_gradient` computes a dense layer's
    weight gradient (measured against OpenBLAS's AVX-512 kernels: docs/performance.md): short
    inner dimensions that are a multiple of its tile's 4 vectors, batches of 128 rows or more,
    8192 weights or more (below that OpenBLAS was as fast)."""
    return (mode == MODE_AVX512 and inner < OUTER_MAX_INNER
            and inner % (TILE_VECTORS * lanes) == 0 and rows >= OUTER_GRAD_MIN_ROWS
            and inner * cols >= OUTER_GRAD_MIN_WEIGHT)


@jit
def dense_backward_weight(dy, x, dw, scratch, accumulate, mode):
    """dw (O, I) (+)= dy (B, O).T @ x (B, I); ``scratch`` (O, I) is used only when accumulating
    through BLAS. ``mode``: as :func:`dense_forward`'s."""
    rows, inner = x.shape
    lanes = VECTOR_BYTES // x.itemsize
    if weight_gradient_by_tiles(rows, inner, dy.shape[1], mode, lanes):
        weight_gradient(dy, x, dw, accumulate)
    elif not accumulate and weight_gradient_by_outer(rows, inner, dy.shape[1], mode, lanes):
        outer_weight_gradient(dy, x, dw)
    elif accumulate:
        np.dot(dy.T, x, scratch)
        add_into(scratch, dw)
    else:
        np.dot(dy.T, x, dw)


@jit
def dense_backward_bias(dy, db, accumulate):
    """db (O,) (+)= column sums of dy (B, O)."""
    rows, cols = dy.shape
    if not accumulate:
        for c in range(cols):
            db[c] = 0
    for r in range(rows):
        for c in range(cols):
            db[c] += dy[r, c]


@jit
def add_into(src, dst):
    """dst (R, C) += src (R, C)."""
    rows, cols = dst.shape
    for r in range(rows):
        for c in range(cols):
            dst[r, c] += src[r, c]
