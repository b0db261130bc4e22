"""Dense (fully connected) layer kernels: ``y = x @ W.T + b`` and its backward.

Matrix products go through ``np.dot(a, b, out)`` (BLAS, no Python dispatch, no allocation); it beat
hand-written loops at every size down to 16x8x8. Weights use PyTorch's ``(out_features,
in_features)`` layout, so the products use ``.T`` views, which BLAS handles without a copy.
"""

import numpy as np

from nnjit.kernels._jit import jit


@jit
def dense_forward(x, w, b, y, has_bias):
    """y (B, O) = x (B, I) @ w (O, I).T + b (O,) (b ignored unless ``has_bias``)."""
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
