"""Register-blocked dense products for short inner dimensions (AVX-512 hosts): the small layers
of an MLP on tabular data (Digits' 64 -> 128, a grid search's 64 -> 64 at 200 rows).

Both kernels are outer products: a scalar broadcast times a vector of a contiguous row, added
into a tile of 4 x 4 vector accumulators (:mod:`nnjit.kernels.simd`) that is stored once. The
accumulators run along the product's output columns, so no lane sums are needed; that is where
:mod:`nnjit.kernels.dense_vector`'s dot products lose when the inner dimension is short.

* :func:`outer_forward`: ``y (B, O) = x (B, I) @ w (O, I).T + b``. Its vectors are rows of
  ``w.T``, which :func:`pack_transposed` writes into scratch once per call (with the bias after
  them, so a tile starts from the bias): for 64 x 128 float32 weights about 1.5 us of a 6 us
  product. Each step of the inner loop is 4 loads of ``w.T``, 4 broadcasts of ``x`` and 16 FMAs.
* :func:`outer_weight_gradient`: ``dw (O, I) = dy (B, O).T @ x (B, I)``, vectors along ``I``
  (rows of ``x``), the batch as the reduction: 4 loads of ``x``, 4 broadcasts of ``dy`` and 16
  FMAs per batch row. Nothing is packed.

Both run one loop nest, :func:`outer_tiles` (a strided left operand): numba links a kernel's
code into each caller's module, where LLVM optimises it again, so one nest instead of two keeps
the cold compile down.

The vector dimension must be a multiple of 4 vectors (64 float32 or 32 float64 values): the
tiles then have no vector edge, and :func:`nnjit.kernels.dense.forward_strategy` /
:func:`nnjit.kernels.dense.weight_gradient_by_outer` choose these kernels only there. Edge rows
of a tile repeat the last one (computed twice, stored twice: one loop nest, no edge loops, which
cost compile time). Measured against OpenBLAS: docs/performance.md, "The small products".
"""

from nnjit.kernels import simd
from nnjit.kernels._jit import jit

#: vectors per tile along the contiguous dimension (the 4 x 4 tile's width)
TILE_VECTORS = 4


@jit(inline="always")  # (one caller: its own compile would only add numba's fixed cost)
def pack_transposed(w, b, has_bias, wt):
    """wt[i * O + o] = w[o, i] for w (O, I), then wt[I * O + o] = b[o] (0 without a bias); ``wt``
    1-D with at least (I + 1) * O elements. O must be a multiple of the lanes."""
    cols, inner = w.shape
    wf = w.reshape(cols * inner)
    nv = simd.lanes(wf)
    body = inner - inner % nv
    # lanes x lanes blocks through shuffles; the last inner % lanes columns of w element by element
    for o0 in range(0, cols, nv):
        for i0 in range(0, body, nv):
            simd.transpose(wf, o0 * inner + i0, inner, wt, i0 * cols + o0, cols, False)
    for o in range(cols):
        for i in range(body, inner):
            wt[i * cols + o] = w[o, i]
    zero = wt.dtype.type(0.0)
    for o in range(cols):
        wt[inner * cols + o] = b[o] if has_bias else zero


@jit(inline="always")  # (a wrapper: inlined, no compile of its own)
def outer_forward(x, wt, y):
    """y (B, O) = x (B, I) @ w.T + b from ``wt`` as :func:`pack_transposed` wrote it; O a
    multiple of TILE_VECTORS vectors; x, y C-contiguous."""
    rows, inner = x.shape
    cols = y.shape[1]
    outer_tiles(x.reshape(rows * inner), inner, 1, wt, y.reshape(rows * cols), rows, inner, cols,
                True)


@jit(inline="always")
def outer_weight_gradient(dy, x, dw):
    """dw (O, I) = dy (B, O).T @ x (B, I); I a multiple of TILE_VECTORS vectors; all
    C-contiguous."""
    rows, inner = x.shape
    cols = dy.shape[1]
    # dy.T's row o is dy's column o: stride 1 between rows, ``cols`` along the reduction
    outer_tiles(dy.reshape(rows * cols), 1, cols, x.reshape(rows * inner),
                dw.reshape(cols * inner), cols, rows, inner, False)


@jit
def outer_tiles(a, a_row, a_step, b, c, rows, depth, width, from_bias):
    """c (rows, width) = a (rows, depth) @ b (depth, width) [+ b's row ``depth``], all flat:
    a[r * a_row + k * a_step], b and c C-contiguous, ``width`` a multiple of TILE_VECTORS
    vectors. Both products of this module are this one nest (one compile): the forward with a =
    x and b = the packed w.T, started from the bias row; the weight gradient with a = dy.T (a
    strided view) and b = x, started from zeros."""
    nv = simd.lanes(b)
    last_r = rows - 1
    for j0 in range(0, width, TILE_VECTORS * nv):
        j1, j2, j3 = j0 + nv, j0 + 2 * nv, j0 + 3 * nv
        for r0 in range(0, rows, 4):
            r1, r2, r3 = min(r0 + 1, last_r), min(r0 + 2, last_r), min(r0 + 3, last_r)
            a0, a1, a2, a3 = r0 * a_row, r1 * a_row, r2 * a_row, r3 * a_row
            if from_bias:
                c00 = c10 = c20 = c30 = simd.load(b, depth * width + j0)
                c01 = c11 = c21 = c31 = simd.load(b, depth * width + j1)
                c02 = c12 = c22 = c32 = simd.load(b, depth * width + j2)
                c03 = c13 = c23 = c33 = simd.load(b, depth * width + j3)
            else:
                c00 = c10 = c20 = c30 = c01 = c11 = c21 = c31 = simd.zeros(b)
                c02 = c12 = c22 = c32 = c03 = c13 = c23 = c33 = simd.zeros(b)
            for k in range(depth):
                bk, ak = k * width, k * a_step
                w0 = simd.load(b, bk + j0)
                w1 = simd.load(b, bk + j1)
                w2 = simd.load(b, bk + j2)
                w3 = simd.load(b, bk + j3)
                s = simd.splat(a, a0 + ak)
                c00 = simd.fma(s, w0, c00)
                c01 = simd.fma(s, w1, c01)
                c02 = simd.fma(s, w2, c02)
                c03 = simd.fma(s, w3, c03)
                s = simd.splat(a, a1 + ak)
                c10 = simd.fma(s, w0, c10)
                c11 = simd.fma(s, w1, c11)
                c12 = simd.fma(s, w2, c12)
                c13 = simd.fma(s, w3, c13)
                s = simd.splat(a, a2 + ak)
                c20 = simd.fma(s, w0, c20)
                c21 = simd.fma(s, w1, c21)
                c22 = simd.fma(s, w2, c22)
                c23 = simd.fma(s, w3, c23)
                s = simd.splat(a, a3 + ak)
                c30 = simd.fma(s, w0, c30)
                c31 = simd.fma(s, w1, c31)
                c32 = simd.fma(s, w2, c32)
                c33 = simd.fma(s, w3, c33)
            # (repeated edge rows store the same values twice; the last row first)
            _store4(c, r3 * width + j0, nv, c30, c31, c32, c33)
            _store4(c, r2 * width + j0, nv, c20, c21, c22, c23)
            _store4(c, r1 * width + j0, nv, c10, c11, c12, c13)
            _store4(c, r0 * width + j0, nv, c00, c01, c02, c03)


@jit(inline="always")
def _store4(flat, at, nv, c0, c1, c2, c3):
    """flat[at : at + 4 * nv] = the 4 vectors, the last first."""
    simd.store(flat, at + 3 * nv, c3)
    simd.store(flat, at + 2 * nv, c2)
    simd.store(flat, at + nv, c1)
    simd.store(flat, at, c0)
