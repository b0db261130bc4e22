"""Joining kernels: column blocks copied into and out of wider rows (concatenation along
features, column slices) and their gradients.

The forward copies are called on integer views of the arena (:mod:`nnjit.kernels.int_views`):
a bitwise copy, so integer slots (indices) and float slots go through the same code.
"""

from nnjit.kernels._jit import jit


@jit
def put_columns(src, dst, first):
    """dst (B, F)[:, first:first + C] = src (B, C)."""
    rows, cols = src.shape
    for r in range(rows):
        for c in range(cols):
            dst[r, first + c] = src[r, c]


@jit
def take_columns(src, first, dst):
    """dst (B, C) = src (B, F)[:, first:first + C]."""
    rows, cols = dst.shape
    for r in range(rows):
        for c in range(cols):
            dst[r, c] = src[r, first + c]


@jit
def take_columns_grad(dy, first, dx, accumulate):
    """dx (B, C) (+)= dy (B, F)[:, first:first + C] (a concatenation's input gradient)."""
    rows, cols = dx.shape
    for r in range(rows):
        for c in range(cols):
            if accumulate:
                dx[r, c] += dy[r, first + c]
            else:
                dx[r, c] = dy[r, first + c]


@jit
def put_columns_grad(dy, dx, first, accumulate):
    """dx (B, F)[:, first:first + C] (+)= dy (B, C); without ``accumulate`` the other columns
    of dx are zeroed (a column slice's input gradient)."""
    rows, cols = dy.shape
    width = dx.shape[1]
    for r in range(rows):
        if not accumulate:
            for c in range(width):
                dx[r, c] = 0
        for c in range(cols):
            dx[r, first + c] += dy[r, c]
