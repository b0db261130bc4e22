"""nnjit.kernels.recurrent.weight_grad (a recurrent layer's W_hh and W_ih gradients) against
NumPy in float64: the tiled path (outputs a multiple of the lanes, rows in chunks of
WEIGHT_CHUNK_ROWS, edge tiles repeated) and the BLAS one, written and accumulated."""

import numpy as np
import pytest

from nnjit.kernels import recurrent as kr

CHUNK = kr.WEIGHT_CHUNK_ROWS


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,cols,inner", [
    (1, 16, 1), (5, 32, 3), (CHUNK, 48, 8), (2 * CHUNK + 7, 192, 64), (CHUNK + 1, 64, 13),
    (70, 24, 5),  # 24 outputs: float32 takes BLAS (16 lanes), float64 the tiles (8 lanes)
    (4100, 40, 6),  # BLAS as (x^T dy)^T in float32 (>= TRANSPOSED_WEIGHT_ROWS rows)
])
@pytest.mark.parametrize("accumulate", [False, True])
def test_weight_grad_matches_numpy(dtype, rows, cols, inner, accumulate):
    rng = np.random.default_rng(rows + cols + inner)
    dy = rng.normal(size=(rows, cols)).astype(dtype)
    x = rng.normal(size=(rows, inner)).astype(dtype)
    start = rng.normal(size=(cols, inner)).astype(dtype)
    dw = start.copy()
    scratch = np.full(cols * inner, np.nan, dtype)  # (whatever it held before must not leak)
    kr.weight_grad(dy, x, dw, scratch, accumulate)
    expected = dy.astype(np.float64).T @ x.astype(np.float64)
    if accumulate:
        expected += start
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(dw, expected, rtol=tol, atol=tol * np.sqrt(rows))
