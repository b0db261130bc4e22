"""Sparse rows times dense matrices: the inner loops of every sparse x dense product in nnjit.

A sparse row is a span ``[lo, hi)`` of a CSR matrix's arrays: ``indices`` (int64 column
indices) and ``data`` (values) of its non-zeros. The dense matrix ``w`` (F, O) has one row per
sparse column, so each non-zero reads (or, backward, adds into) one contiguous row of it and the
inner loop over O vectorises. Users:

- the graph family's CSR_DENSE (:func:`nnjit.kernels.graph_ops.csr_dense_forward`), whose weight
  is (O, F): it transposes it into an (F, O) scratch first, which pays on full-graph products
  (every row of the scratch read many times);
- the sparse family's SPARSE_LINEAR (:mod:`nnjit.ops.sparse`), whose weight is kept (F, O) (as
  scikit-learn's ``coefs_[0]``): minibatches of a wide CSR input read a few rows of it each, where
  a transposition of all F rows per batch would cost more than the product.

``data`` may be of another float dtype than ``w`` (the sparse family keeps the values float64):
each value is cast to ``w``'s dtype once, so the arithmetic is in ``w``'s dtype. Nothing is
allocated. The row kernels check no bounds (the callers' CSR arrays are checked when built) and
are inlined into their callers (``inline="always"``), so a row's loop compiles into its caller's
loop over rows as CSR_DENSE's own loops did (a call per row is measurably slower at few output
columns).
"""

from nnjit.kernels._jit import jit


@jit(inline="always")
def row_times(indices, data, lo, hi, w, out, r):
    """``out[r, :]`` += sum over non-zeros k in [lo, hi) of ``data[k] * w[indices[k], :]``
    (out (N, O), w (F, O))."""
    n_out = out.shape[1]
    for k in range(lo, hi):
        v = out.dtype.type(data[k])
        j = indices[k]
        for o in range(n_out):
            out[r, o] += v * w[j, o]


@jit(inline="always")
def row_outer_add(indices, data, lo, hi, dy, r, dw):
    """``dw[indices[k], :] += data[k] * dy[r, :]`` for the non-zeros k in [lo, hi): sparse row
    r's share of ``X.T @ dy`` (dy (N, O), dw (F, O))."""
    n_out = dy.shape[1]
    for k in range(lo, hi):
        v = dw.dtype.type(data[k])
        j = indices[k]
        for o in range(n_out):
            dw[j, o] += v * dy[r, o]


@jit
def sparse_linear_forward(ids, n_rows, indptr, indices, values, w, b, out, has_bias):
    """out (B, O) = X[ids] @ w + b: row r of the batch is row ``ids[r, 0]`` of the CSR matrix X
    (``n_rows`` rows: indptr, indices, values), w (F, O), b (O,) (ignored unless
    ``has_bias``). Returns False when some id is outside [0, n_rows) (its row is b alone).

    The bias is added after the row's sum, as scikit-learn's forward pass adds its intercept
    (and nnjit's dense one its bias): the same rounding as theirs where the sums agree."""
    zero = out.dtype.type(0.0)
    ok = True
    for r in range(out.shape[0]):
        for o in range(out.shape[1]):
            out[r, o] = zero
        k = ids[r, 0]
        if 0 <= k < n_rows:
            row_times(indices, values, indptr[k], indptr[k + 1], w, out, r)
        else:
            ok = False
        if has_bias:
            for o in range(out.shape[1]):
                out[r, o] += b[o]
    return ok


@jit
def sparse_linear_backward_w(ids, n_rows, indptr, indices, values, dy, dw, accumulate):
    """dw (F, O) (+)= X[ids].T @ dy (B, O); without ``accumulate`` (the first writer) dw is
    zeroed first. Ids outside [0, n_rows) add nothing. No input gradient: X is data."""
    if not accumulate:
        zero = dw.dtype.type(0.0)
        for j in range(dw.shape[0]):
            for o in range(dw.shape[1]):
                dw[j, o] = zero
    for r in range(dy.shape[0]):
        k = ids[r, 0]
        if 0 <= k < n_rows:
            row_outer_add(indices, values, indptr[k], indptr[k + 1], dy, r, dw)
