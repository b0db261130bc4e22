"""Tests for nnjit.kernels.dense: both forward paths (BLAS and the register-blocked loop)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnjit.kernels import dense as kd


def _case(rows, inner, cols, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, inner)).astype(dtype)
    w = rng.normal(size=(cols, inner)).astype(dtype)
    b = rng.normal(size=cols).astype(dtype)
    return x, w, b


def _blocked(rows, inner, cols):
    return inner >= kd.SMALL_MIN_INNER and (cols <= kd.SMALL_MAX_OUT or (
        rows <= kd.SMALL_MAX_ROWS and inner * cols <= kd.SMALL_MAX_WEIGHT))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [
    (16, 4, 16),  # BLAS: tiny inner dimension
    (16, 16, 3), (15, 16, 3), (16, 17, 5), (1, 8, 1), (2, 8, 2), (3, 9, 41),  # around the rule
    (32, 128, 10), (130, 128, 40), (33, 64, 128), (32, 64, 128), (31, 65, 63), (32, 4096, 41),
])
def test_dense_forward_matches_numpy(shape, dtype):
    rows, inner, cols = shape
    x, w, b = _case(rows, inner, cols, dtype)
    ref = x.astype(np.float64) @ w.T.astype(np.float64)
    # float32 rounding grows with the length of the dot products
    tol = (dict(rtol=1e-5, atol=2e-6 * inner) if dtype == np.float32
           else dict(rtol=1e-12, atol=1e-12))
    for has_bias in (True, False):
        y = np.full((rows, cols), np.nan, dtype=dtype)
        kd.dense_forward(x, w, b, y, has_bias)
        np.testing.assert_allclose(y, ref + b if has_bias else ref, **tol)


def test_both_paths_are_exercised():
    assert _blocked(16, 16, 3) and _blocked(130, 128, 10) and _blocked(33, 8, 40)
    assert _blocked(32, 64, 128) and not _blocked(33, 64, 128)
    assert not _blocked(16, 4, 16) and not _blocked(32, 4096, 128)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 9), inner=st.integers(1, 20), cols=st.integers(1, 45))
def test_dense_forward_any_shape_float64(rows, inner, cols):
    x, w, b = _case(rows, inner, cols, np.float64, seed=rows * 1000 + inner * 50 + cols)
    y = np.empty((rows, cols))
    kd.dense_forward(x, w, b, y, True)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-12, atol=1e-12)


def test_narrow_path_uses_only_the_batch_rows_of_an_arena_view():
    """The interpreter passes views with the current batch's rows; nothing past them is read."""
    x, w, b = _case(8, 16, 3, np.float32)
    arena = np.full(16 * 16, np.nan, dtype=np.float32)
    arena[: x.size] = x.ravel()
    y = np.empty((8, 3), dtype=np.float32)
    kd.dense_forward(arena[: x.size].reshape(8, 16), w, b, y, True)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)
