"""Register-blocked dense products for the batch sizes of small MLPs (AVX-512 hosts): the
forward product for long inner dimensions (:func:`dot_forward`) and the weight gradient
(:func:`weight_gradient`).

``y = x @ w.T`` with ``x (B, I)`` and ``w (O, I)`` both contiguous along ``I``: a tile of 4 rows
of ``x`` by 4 rows of ``w`` keeps 16 vector accumulators (:mod:`nnjit.kernels.simd`), each a
lane-wise partial dot product along ``I``; per step 8 vector loads feed 16 FMAs, and each
accumulator's lanes are summed once at the end. No operand is transposed or packed, which is
where OpenBLAS loses at these shapes: it packs the whole weight for a product of a few dozen
rows. It beats OpenBLAS's best orientation for long inner dimensions and batches of a few dozen
rows, and loses for short inner dimensions (the lane sums dominate) and for batches of 200 rows
or more, which :func:`nnjit.kernels.dense.forward_strategy` leaves to BLAS (the measurements:
docs/performance.md, "Fewer passes, and the small products").

Edge rows and columns of a tile repeat the last one (computed twice, stored twice): one loop
nest, no edge loops (they cost compile time). ``I`` must be a multiple of the vector's lanes.
"""

from nnjit.kernels import simd
from nnjit.kernels._jit import jit

L1_HALF = 16384  # bytes: the share of a 32 KiB L1 data cache a kernel's reused operand may take


@jit
def dot_forward(x, w, y):
    """y (B, O) = x (B, I) @ w (O, I).T for ``I`` a multiple of the lanes (module doc); x, w, y
    C-contiguous."""
    rows, inner = x.shape
    cols = y.shape[1]
    xf = x.reshape(rows * inner)
    wf = w.reshape(cols * inner)
    nv = simd.lanes(xf)
    if inner % nv != 0:
        raise ValueError("dot_forward: the inner dimension must be a multiple of the lanes")
    last_r, last_o = rows - 1, cols - 1
    for o0 in range(0, cols, 4):
        o1, o2, o3 = min(o0 + 1, last_o), min(o0 + 2, last_o), min(o0 + 3, last_o)
        wa0, wa1, wa2, wa3 = o0 * inner, o1 * inner, o2 * inner, o3 * inner
        for r0 in range(0, rows, 4):
            r1, r2, r3 = min(r0 + 1, last_r), min(r0 + 2, last_r), min(r0 + 3, last_r)
            xa0, xa1, xa2, xa3 = r0 * inner, r1 * inner, r2 * inner, r3 * inner
            z = simd.zeros(xf)
            c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = z
            c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = z
            for i in range(0, inner, nv):
                a0 = simd.load(xf, xa0 + i)
                a1 = simd.load(xf, xa1 + i)
                a2 = simd.load(xf, xa2 + i)
                a3 = simd.load(xf, xa3 + i)
                b = simd.load(wf, wa0 + i)
                c00 = simd.fma(a0, b, c00)
                c10 = simd.fma(a1, b, c10)
                c20 = simd.fma(a2, b, c20)
                c30 = simd.fma(a3, b, c30)
                b = simd.load(wf, wa1 + i)
                c01 = simd.fma(a0, b, c01)
                c11 = simd.fma(a1, b, c11)
                c21 = simd.fma(a2, b, c21)
                c31 = simd.fma(a3, b, c31)
                b = simd.load(wf, wa2 + i)
                c02 = simd.fma(a0, b, c02)
                c12 = simd.fma(a1, b, c12)
                c22 = simd.fma(a2, b, c22)
                c32 = simd.fma(a3, b, c32)
                b = simd.load(wf, wa3 + i)
                c03 = simd.fma(a0, b, c03)
                c13 = simd.fma(a1, b, c13)
                c23 = simd.fma(a2, b, c23)
                c33 = simd.fma(a3, b, c33)
            y[r3, o3] = simd.total(c33)
            y[r3, o2] = simd.total(c32)
            y[r3, o1] = simd.total(c31)
            y[r3, o0] = simd.total(c30)
            y[r2, o3] = simd.total(c23)
            y[r2, o2] = simd.total(c22)
            y[r2, o1] = simd.total(c21)
            y[r2, o0] = simd.total(c20)
            y[r1, o3] = simd.total(c13)
            y[r1, o2] = simd.total(c12)
            y[r1, o1] = simd.total(c11)
            y[r1, o0] = simd.total(c10)
            y[r0, o3] = simd.total(c03)
            y[r0, o2] = simd.total(c02)
            y[r0, o1] = simd.total(c01)
            y[r0, o0] = simd.total(c00)


@jit
def weight_gradient(dy, x, dw, accumulate):
    """dw (O, I) (+)= dy (B, O).T @ x (B, I) for ``I`` a multiple of the lanes; all C-contiguous.

    A tile of 8 rows of ``dw`` by 3 vectors along ``I`` is 24 vector accumulators: per row of the
    batch, 3 vector loads of ``x`` and 8 broadcasts of ``dy`` feed 24 FMAs, and the tile is
    stored once (no zeroing pass, no transposed copy). The ``I`` blocks are the outer loop, so a
    block of ``x`` (B rows x 3 vectors) and all of ``dy`` stay in L1 while every row block of
    ``dw`` is made from them. Edge rows and vectors repeat the last one, as in
    :func:`dot_forward`.
    """
    rows, inner = x.shape
    cols = dy.shape[1]
    xf = x.reshape(rows * inner)
    df = dy.reshape(rows * cols)
    wf = dw.reshape(cols * inner)
    nv = simd.lanes(xf)
    if inner % nv != 0:
        raise ValueError("weight_gradient: the inner dimension must be a multiple of the lanes")
    last_i, last_o = inner - nv, cols - 1
    # dy's columns in chunks whose rows fit in half of a 32 KiB L1 (all of them for float32 and
    # 32 rows); the x block of 3 vectors per row takes most of the rest
    chunk = max(8, L1_HALF // (rows * dy.itemsize) // 8 * 8)
    for c0 in range(0, cols, chunk):
        _weight_gradient_columns(xf, df, wf, rows, inner, cols, nv, c0, min(c0 + chunk, cols),
                                 last_i, last_o, accumulate)


@jit
def _weight_gradient_columns(xf, df, wf, rows, inner, cols, nv, c0, c1, last_i, last_o,
                             accumulate):
    """The rows ``[c0, c1)`` of dw (:func:`weight_gradient`)."""
    for i0 in range(0, inner, 3 * nv):
        i1, i2 = min(i0 + nv, last_i), min(i0 + 2 * nv, last_i)
        for o0 in range(c0, c1, 8):
            o1, o2, o3 = min(o0 + 1, last_o), min(o0 + 2, last_o), min(o0 + 3, last_o)
            o4, o5, o6, o7 = (min(o0 + 4, last_o), min(o0 + 5, last_o), min(o0 + 6, last_o),
                              min(o0 + 7, last_o))
            # Accumulating starts from dw's tile, so a repeated edge row or vector stores the
            # same sum twice (adding at the store would add it twice).
            c00, c01, c02 = _start3(wf, o0 * inner, i0, i1, i2, accumulate)
            c10, c11, c12 = _start3(wf, o1 * inner, i0, i1, i2, accumulate)
            c20, c21, c22 = _start3(wf, o2 * inner, i0, i1, i2, accumulate)
            c30, c31, c32 = _start3(wf, o3 * inner, i0, i1, i2, accumulate)
            c40, c41, c42 = _start3(wf, o4 * inner, i0, i1, i2, accumulate)
            c50, c51, c52 = _start3(wf, o5 * inner, i0, i1, i2, accumulate)
            c60, c61, c62 = _start3(wf, o6 * inner, i0, i1, i2, accumulate)
            c70, c71, c72 = _start3(wf, o7 * inner, i0, i1, i2, accumulate)
            for b in range(rows):
                xa, da = b * inner, b * cols
                a0 = simd.load(xf, xa + i0)
                a1 = simd.load(xf, xa + i1)
                a2 = simd.load(xf, xa + i2)
                s = simd.splat(df, da + o0)
                c00 = simd.fma(s, a0, c00)
                c01 = simd.fma(s, a1, c01)
                c02 = simd.fma(s, a2, c02)
                s = simd.splat(df, da + o1)
                c10 = simd.fma(s, a0, c10)
                c11 = simd.fma(s, a1, c11)
                c12 = simd.fma(s, a2, c12)
                s = simd.splat(df, da + o2)
                c20 = simd.fma(s, a0, c20)
                c21 = simd.fma(s, a1, c21)
                c22 = simd.fma(s, a2, c22)
                s = simd.splat(df, da + o3)
                c30 = simd.fma(s, a0, c30)
                c31 = simd.fma(s, a1, c31)
                c32 = simd.fma(s, a2, c32)
                s = simd.splat(df, da + o4)
                c40 = simd.fma(s, a0, c40)
                c41 = simd.fma(s, a1, c41)
                c42 = simd.fma(s, a2, c42)
                s = simd.splat(df, da + o5)
                c50 = simd.fma(s, a0, c50)
                c51 = simd.fma(s, a1, c51)
                c52 = simd.fma(s, a2, c52)
                s = simd.splat(df, da + o6)
                c60 = simd.fma(s, a0, c60)
                c61 = simd.fma(s, a1, c61)
                c62 = simd.fma(s, a2, c62)
                s = simd.splat(df, da + o7)
                c70 = simd.fma(s, a0, c70)
                c71 = simd.fma(s, a1, c71)
                c72 = simd.fma(s, a2, c72)
            # (repeated edge rows and vectors store the same values twice; the last row first)
            _store3(wf, o7 * inner, i0, i1, i2, c70, c71, c72)
            _store3(wf, o6 * inner, i0, i1, i2, c60, c61, c62)
            _store3(wf, o5 * inner, i0, i1, i2, c50, c51, c52)
            _store3(wf, o4 * inner, i0, i1, i2, c40, c41, c42)
            _store3(wf, o3 * inner, i0, i1, i2, c30, c31, c32)
            _store3(wf, o2 * inner, i0, i1, i2, c20, c21, c22)
            _store3(wf, o1 * inner, i0, i1, i2, c10, c11, c12)
            _store3(wf, o0 * inner, i0, i1, i2, c00, c01, c02)


@jit
def _start3(wf, row, i0, i1, i2, accumulate):
    """A row's 3 accumulators: dw's vectors when accumulating, else zeros."""
    if accumulate:
        return simd.load(wf, row + i0), simd.load(wf, row + i1), simd.load(wf, row + i2)
    z = simd.zeros(wf)
    return z, z, z


@jit
def _store3(wf, row, i0, i1, i2, d0, d1, d2):
    """Store 3 vectors of a row of dw, the last first."""
    simd.store(wf, row + i2, d2)
    simd.store(wf, row + i1, d1)
    simd.store(wf, row + i0, d0)
