"""nnjit.kernels.blas.gemm against NumPy: every transpose pair, leading dimensions wider than the
rows, offsets, alpha and beta, float32 and float64; the untouched elements stay untouched; a block
outside its array is an IndexError before BLAS runs."""

import numpy as np
import pytest

from nnjit.kernels.blas import gemm


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k", [(3, 5, 7), (1, 1, 1), (16, 33, 9)])
def test_gemm_equals_numpy(dtype, trans_a, trans_b, m, n, k):
    rng = np.random.default_rng(0)
    pad = 3
    lda = (m if trans_a else k) + pad
    ldb = (k if trans_b else n) + pad
    ldc = n + pad
    a = rng.standard_normal((k if trans_a else m) * lda + 10).astype(dtype)
    b = rng.standard_normal((n if trans_b else k) * ldb + 10).astype(dtype)
    c = rng.standard_normal(m * ldc + 10).astype(dtype)
    am = a[2:2 + (k if trans_a else m) * lda].reshape(-1, lda)[:, :m if trans_a else k]
    bm = b[1:1 + (n if trans_b else k) * ldb].reshape(-1, ldb)[:, :k if trans_b else n]
    cm = c[4:4 + m * ldc].reshape(-1, ldc)[:, :n]
    want = 0.5 * (am.T if trans_a else am).astype(np.float64) @ (bm.T if trans_b else bm) \
        + 2.0 * cm
    before = c.copy()
    gemm(trans_a, trans_b, m, n, k, 0.5, a, 2, lda, b, 1, ldb, 2.0, c, 4, ldc)
    got = c[4:4 + m * ldc].reshape(-1, ldc)[:, :n]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    outside = np.ones(c.size, bool)
    outside[4:4 + m * ldc].reshape(-1, ldc)[:, :n] = False
    np.testing.assert_array_equal(c[outside], before[outside])


def test_a_block_outside_its_array_is_an_index_error():
    a = np.zeros(15, np.float32)
    ok = np.zeros(16, np.float32)
    with pytest.raises(IndexError, match="outside its array"):
        gemm(False, False, 4, 4, 4, 1.0, a, 0, 4, ok, 0, 4, 0.0, ok.copy(), 0, 4)
