"""Dense (fully connected) layer kernels: ``y = x @ W.T + b`` and its backward.

Matrix products go through ``np.dot(a, b, out)`` (BLAS, no Python dispatch, no allocation). Weights
use PyTorch's ``(out_features, in_features)`` layout, so the products use ``.T`` views, which BLAS
handles without a copy.

One exception, measured (1 thread, float32, OpenBLAS with its Haswell kernels, under load): the
forward product of a small layer runs faster as a hand-written loop that keeps a 2x2 block of
outputs in registers and vectorises over the contiguous inner dimension of both ``x`` and ``w``
(``B x I x O``, us: 16x16x3 0.15 vs 0.19, 16x64x10 0.35 vs 0.61, 32x128x10 1.0 vs 1.8,
32x128x40 2.4 vs 4.5, 130x128x10 3.6 vs 5.6, 16x784x10 2.3 vs 6.0; with at most 32 rows also
wider outputs: 32x64x64 3.1 vs 3.6, 32x64x128 5.9 vs 7.1, 32x256x128 24 vs 28, 32x512x64 19 vs
29). BLAS stays ahead for tiny inner dimensions (16x4x16: 0.22 vs 0.19), for wide outputs with
many rows (130x64x128: 25 vs 22; 64x64x64: 6.4 vs 5.8) and for big weights (32x4096x128: 946 vs
886), so :func:`dense_forward` picks the loop only inside those bounds (the ``SMALL_*``
constants). The loop is one nest (odd edges are recomputed, not handled by extra loops): with
separate edge loops 16x16x3 took 0.10 us, but the core's cold compile grew by ~0.5 s instead of
~0.1 s. End to end (alternating runs, load ~2): Iris 4-16-3 epoch 13.0 -> 12.5 us, Digits
64-128-10 batch 32 epoch 970 -> 956 us. The backward products keep BLAS (the same loops lost
there).
"""

import numpy as np

from nnjit.kernels._jit import jit


# The register-blocked forward loop is used when I >= SMALL_MIN_INNER and either O <= SMALL_MAX_OUT
# or the batch has at most SMALL_MAX_ROWS rows and the weight at most SMALL_MAX_WEIGHT elements.
SMALL_MIN_INNER = 8
SMALL_MAX_OUT = 40
SMALL_MAX_ROWS = 32
SMALL_MAX_WEIGHT = 131072


@jit
def dense_forward(x, w, b, y, has_bias):
    """y (B, O) = x (B, I) @ w (O, I).T + b (O,) (b ignored unless ``has_bias``)."""
    rows, inner = x.shape
    cols = y.shape[1]
    if inner >= SMALL_MIN_INNER and (cols <= SMALL_MAX_OUT or (
            rows <= SMALL_MAX_ROWS and inner * cols <= SMALL_MAX_WEIGHT)):
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
    else:
        np.dot(x, w.T, y)
    if has_bias:
        rows, cols = y.shape
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


@jit
def dense_backward_weight(dy, x, dw, scratch, accumulate):
    """dw (O, I) (+)= dy (B, O).T @ x (B, I); ``scratch`` (O, I) is used only when accumulating."""
    if accumulate:
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
