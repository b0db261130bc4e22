"""Embedding kernels: rows of a weight table looked up by integer indices, and the scatter-add
of their gradients.

Indices come through an integer view of the arena (:mod:`nnjit.kernels.int_views`). An index
outside ``[0, N)`` is never read: its output row is zeros and the forward says so (the
dispatcher reports the record; the interpreter stops the task after the forward pass).
"""

from nnjit.kernels._jit import jit


@jit
def embedding_forward(idx, weight, out):
    """out (B, K * D)[r, j * D:(j + 1) * D] = weight (N, D)[idx (B, K)[r, j]].

    Returns False when some index is outside [0, N) (its output row is zeros), else True."""
    rows, k = idx.shape
    n, d = weight.shape
    ok = True
    zero = out.dtype.type(0.0)
    for r in range(rows):
        for j in range(k):
            v = idx[r, j]
            base = j * d
            if 0 <= v < n:
                for c in range(d):
                    out[r, base + c] = weight[v, c]
            else:
                ok = False
                for c in range(d):
                    out[r, base + c] = zero
    return ok


@jit
def embedding_backward(idx, dy, dw, padding_idx, accumulate):
    """dw (N, D) (+)= the rows of dy (B, K * D) scattered to their indices (duplicates add up);
    the row ``padding_idx`` (-1: none) and out-of-range indices receive nothing. Without
    ``accumulate`` (the first writer) dw is zeroed first."""
    rows, k = idx.shape
    n, d = dw.shape
    if not accumulate:
        for v in range(n):
            for c in range(d):
                dw[v, c] = 0
    for r in range(rows):
        for j in range(k):
            v = idx[r, j]
            if 0 <= v < n and v != padding_idx:
                base = j * d
                for c in range(d):
                    dw[v, c] += dy[r, base + c]
