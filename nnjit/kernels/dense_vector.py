"""A register-blocked dense forward product for long inner dimensions (AVX-512 hosts).

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
