"""Tests for nnjit.kernels.dense: the five forward paths (BLAS, transposed BLAS, the
register-blocked loop, the register-blocked dot products of nnjit.kernels.dense_vector, the
outer-product tiles of nnjit.kernels.dense_outer) under both BLAS modes, and the backward
products (the weight gradient's tiles among them)."""

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


MODES = (kd.MODE_AVX2, kd.MODE_AVX512)


def _strategy(rows, inner, cols, mode, lanes=16):
    return kd.forward_strategy(rows, inner, cols, mode, lanes)


def _forward(x, w, b, y, has_bias, mode, scratch=None):
    if scratch is None:  # (as the program sizes it; NaN: a read of an unwritten element shows)
        need = max(y.size, kd.outer_scratch_size(x.shape[1], y.shape[1], y.itemsize))
        scratch = np.full(need, np.nan, dtype=y.dtype)
    kd.dense_forward(x, w, b, y, has_bias, mode, scratch)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [
    (16, 4, 16),  # BLAS: tiny inner dimension
    (16, 16, 3), (15, 16, 3), (16, 17, 5), (1, 8, 1), (2, 8, 2), (3, 9, 41),  # around the rule
    (32, 128, 10), (130, 128, 40), (33, 64, 128), (32, 64, 128), (31, 65, 63), (32, 4096, 41),
    (17, 2100, 70), (45, 1030, 129), (1, 4096, 128), (2, 2100, 64),  # transposed in both modes
    (32, 4096, 128), (5, 256, 7), (1, 256, 1), (128, 272, 3), (33, 400, 130),  # AVX-512: dot
    (16, 16, 64), (37, 17, 64), (200, 64, 128), (32, 255, 192), (15, 64, 64), (31, 64, 96),
    (33, 15, 64), (33, 31, 32),  # AVX-512: outer-product tiles, and just outside their rule
])
@pytest.mark.parametrize("mode", MODES)
def test_dense_forward_matches_numpy(shape, dtype, mode):
    rows, inner, cols = shape
    x, w, b = _case(rows, inner, cols, dtype)
    ref = x.astype(np.float64) @ w.T.astype(np.float64)
    # float32 rounding grows with the length of the dot products
    tol = (dict(rtol=1e-5, atol=2e-6 * inner) if dtype == np.float32
           else dict(rtol=1e-12, atol=1e-12))
    for has_bias in (True, False):
        y = np.full((rows, cols), np.nan, dtype=dtype)
        _forward(x, w, b, y, has_bias, mode)
        np.testing.assert_allclose(y, ref + b if has_bias else ref, **tol)


def test_every_path_is_exercised():
    L, B, T, D = kd.FORWARD_LOOP, kd.FORWARD_BLAS, kd.FORWARD_TRANSPOSED, kd.FORWARD_DOT
    U = kd.FORWARD_OUTER
    avx2 = [_strategy(*s, kd.MODE_AVX2) for s in [(16, 16, 3), (130, 128, 10), (32, 64, 128),
                                                  (16, 4, 16), (32, 4096, 128), (128, 784, 256)]]
    assert avx2 == [L, L, L, B, T, B]
    avx512 = [_strategy(*s, kd.MODE_AVX512) for s in [(16, 16, 3), (144, 128, 10), (32, 64, 128),
                                                      (16, 64, 64), (45, 4100, 128), (32, 128, 10),
                                                      (45, 4096, 128), (128, 256, 3),
                                                      (129, 4096, 128)]]
    assert avx512 == [L, L, U, U, T, B, D, D, B]
    # float64 vectors hold 8 lanes: 264 columns are whole vectors of them, not of 16 float32
    assert _strategy(8, 264, 8, kd.MODE_AVX512, lanes=8) == D
    assert _strategy(8, 264, 8, kd.MODE_AVX512, lanes=16) != D


def test_dot_products_refuse_a_partial_vector():
    from nnjit.kernels.dense_vector import dot_forward

    x, w, _ = _case(4, 250, 4, np.float32)
    with pytest.raises(ValueError, match="multiple of the lanes"):
        dot_forward(x, w, np.empty((4, 4), np.float32))


@pytest.mark.parametrize(("shape", "strategy"), [((32, 64, 100), kd.FORWARD_TRANSPOSED),
                                                 ((32, 64, 128), kd.FORWARD_OUTER)])
def test_scratch_paths_need_enough_scratch(shape, strategy):
    """With too little scratch (a program laid out without it) the plain BLAS product runs."""
    x, w, b = _case(*shape, np.float32)
    assert _strategy(*shape, kd.MODE_AVX512) == strategy
    y = np.empty(shape[::2], dtype=np.float32)
    _forward(x, w, b, y, True, kd.MODE_AVX512, scratch=np.zeros(1, dtype=np.float32))
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("rows", "inner", "cols", "lanes", "outer"), [
    (16, 64, 64, 16, True), (15, 64, 64, 16, False), (32, 64, 32, 8, True),
    (31, 64, 32, 8, False), (16, 16, 128, 16, True), (16, 15, 128, 16, False),
    (200, 255, 64, 16, True), (200, 256, 64, 16, False), (200, 64, 96, 16, False),
    (200, 64, 96, 8, True), (4096, 30, 256, 16, True)])
def test_outer_product_tiles_where_they_win(rows, inner, cols, lanes, outer):
    """The outer-product forward under AVX-512 for short inner dimensions, outputs a multiple of
    4 vectors and 16 (float32) / 32 (float64) rows or more; never under AVX2; the program sizes
    its scratch for exactly the layers that can take it."""
    assert (_strategy(rows, inner, cols, kd.MODE_AVX512, lanes) == kd.FORWARD_OUTER) is outer
    assert _strategy(rows, inner, cols, kd.MODE_AVX2, lanes) != kd.FORWARD_OUTER
    size = kd.outer_scratch_size(inner, cols, 64 // lanes)
    if outer:
        assert size == (inner + 1) * cols
    assert (size > 0) is (16 <= inner < 256 and cols % (4 * lanes) == 0)  # any batch's rows


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 70), inner=st.sampled_from([15, 16, 17, 31, 64, 130, 255]),
       cols=st.sampled_from([32, 64, 96, 128, 192]), has_bias=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_outer_product_forward_any_shape(rows, inner, cols, has_bias, dtype):
    """Odd inner dimensions (a partial transpose block), edge rows, batch 1, both dtypes, in
    arena views: rows beyond the batch are neither read nor written."""
    x, w, b = _case(rows, inner, cols, dtype, seed=rows * 1000 + inner * 50 + cols)
    arena = np.full((rows + 3) * inner, np.nan, dtype=dtype)
    arena[: x.size] = x.ravel()
    out = np.full((rows + 3) * cols, np.nan, dtype=dtype)
    y = out[: rows * cols].reshape(rows, cols)
    _forward(arena[: x.size].reshape(rows, inner), w, b, y, has_bias, kd.MODE_AVX512)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + (b if has_bias else 0.0)
    tol = (dict(rtol=1e-5, atol=2e-6 * inner) if dtype == np.float32
           else dict(rtol=1e-12, atol=1e-12))
    np.testing.assert_allclose(y, want, **tol)
    assert np.isnan(out[rows * cols:]).all()


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 40), inner=st.sampled_from([1, 3, 8, 17, 64, 130]),
       cols=st.integers(1, 70), mode=st.sampled_from(MODES))
def test_dense_forward_any_shape_float64(rows, inner, cols, mode):
    x, w, b = _case(rows, inner, cols, np.float64, seed=rows * 1000 + inner * 50 + cols)
    y = np.empty((rows, cols))
    _forward(x, w, b, y, True, mode)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-12, atol=1e-12)


def test_narrow_path_uses_only_the_batch_rows_of_an_arena_view():
    """The interpreter passes views with the current batch's rows; nothing past them is read."""
    x, w, b = _case(8, 16, 3, np.float32)
    arena = np.full(16 * 16, np.nan, dtype=np.float32)
    arena[: x.size] = x.ravel()
    y = np.empty((8, 3), dtype=np.float32)
    _forward(arena[: x.size].reshape(8, 16), w, b, y, True, kd.MODE_AVX2)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)


@settings(max_examples=80, deadline=None)
@given(rows=st.integers(1, 70), inner=st.sampled_from([1, 4, 8, 17, 130, 256, 272, 1040]),
       cols=st.sampled_from([1, 3, 10, 11, 32, 40]), accumulate=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), mode=st.sampled_from(MODES))
def test_dense_backward_weight_any_shape(rows, inner, cols, accumulate, dtype, mode):
    """dW = dy.T @ x, written or accumulated, through BLAS or the register-blocked tiles (long
    inner dimensions under AVX-512), agrees with NumPy."""
    rng = np.random.default_rng(rows * 1000 + inner * 50 + cols)
    dy = rng.normal(size=(rows, cols)).astype(dtype)
    x = rng.normal(size=(rows, inner)).astype(dtype)
    start = rng.normal(size=(cols, inner)).astype(dtype)
    dw = start.copy()
    kd.dense_backward_weight(dy, x, dw, np.empty_like(dw), accumulate, mode)
    want = dy.astype(np.float64).T @ x.astype(np.float64) + (start if accumulate else 0.0)
    tol = dict(rtol=1e-5, atol=1e-5 * rows) if dtype == np.float32 else dict(rtol=1e-12,
                                                                             atol=1e-12)
    np.testing.assert_allclose(dw, want, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cols", [1, 3, 32, 40])
@pytest.mark.parametrize("inner", [256, 272, 1040])  # 16, 17 and 65 float32 vectors: edges
def test_accumulated_weight_gradient_tiles_add_each_edge_once(inner, cols, dtype):
    """Edge rows and vectors of a tile repeat the last one: accumulating adds them once (the
    tiles first added at each store, so dw's last row took the gradient eight times)."""
    rng = np.random.default_rng(inner + cols)
    dy = rng.normal(size=(5, cols)).astype(dtype)
    x = rng.normal(size=(5, inner)).astype(dtype)
    start = rng.normal(size=(cols, inner)).astype(dtype)
    dw = start.copy()
    kd.dense_backward_weight(dy, x, dw, np.empty_like(dw), True, kd.MODE_AVX512)
    want = dy.astype(np.float64).T @ x.astype(np.float64) + start
    np.testing.assert_allclose(dw, want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize(("rows", "inner", "cols", "lanes", "tiles"), [
    (32, 4096, 128, 16, True), (64, 3136, 10, 16, True), (128, 1024, 256, 16, True),
    (32, 4096, 128, 8, True), (32, 64, 128, 16, False), (129, 4096, 128, 16, False),
    (32, 4100, 128, 16, False), (64, 3136, 10, 8, False), (128, 1024, 256, 8, False)])
def test_weight_gradient_tiles_where_they_win(rows, inner, cols, lanes, tiles):
    """The tiles for long inner dimensions and batches of a few dozen rows under AVX-512
    (float64 only for 32+ outputs and 64 rows at most); BLAS elsewhere and under AVX2."""
    assert kd.weight_gradient_by_tiles(rows, inner, cols, kd.MODE_AVX512, lanes) is tiles
    assert kd.weight_gradient_by_tiles(rows, inner, cols, kd.MODE_AVX2, lanes) is False


@pytest.mark.parametrize(("rows", "inner", "cols", "lanes", "outer"), [
    (128, 64, 128, 16, True), (127, 64, 128, 16, False), (200, 64, 64, 16, False),
    (200, 128, 64, 16, True), (200, 48, 256, 16, False), (200, 32, 256, 8, True),
    (200, 256, 64, 16, False), (1437, 192, 128, 8, True)])
def test_outer_product_weight_gradient_where_it_wins(rows, inner, cols, lanes, outer):
    """Under AVX-512, short inner dimensions a multiple of 4 vectors, 128 rows or more and 8192
    weights or more; never under AVX2 (long inner dimensions: dense_vector's tiles)."""
    assert kd.weight_gradient_by_outer(rows, inner, cols, kd.MODE_AVX512, lanes) is outer
    assert kd.weight_gradient_by_outer(rows, inner, cols, kd.MODE_AVX2, lanes) is False


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(126, 210), inner=st.sampled_from([32, 64, 128, 192]),
       cols=st.sampled_from([1, 3, 63, 64, 65, 128, 257]), accumulate=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_outer_product_weight_gradient_any_shape(rows, inner, cols, accumulate, dtype):
    """dW from batches around the 128-row threshold through the outer-product tiles (edge rows
    of dW repeated) or BLAS (accumulating, or outside the rule), against float64 NumPy."""
    rng = np.random.default_rng(rows * 1000 + inner * 50 + cols)
    dy = rng.normal(size=(rows, cols)).astype(dtype)
    x = rng.normal(size=(rows, inner)).astype(dtype)
    start = rng.normal(size=(cols, inner)).astype(dtype)
    dw = start.copy()
    kd.dense_backward_weight(dy, x, dw, np.empty_like(dw), accumulate, kd.MODE_AVX512)
    want = dy.astype(np.float64).T @ x.astype(np.float64) + (start if accumulate else 0.0)
    tol = dict(rtol=1e-5, atol=1e-5 * rows) if dtype == np.float32 else dict(rtol=1e-12,
                                                                             atol=1e-12)
    np.testing.assert_allclose(dw, want, **tol)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 40), inner=st.sampled_from([1, 4, 17, 130]),
       cols=st.sampled_from([1, 3, 11, 40]), accumulate=st.booleans())
def test_dense_backward_input_and_bias_any_shape(rows, inner, cols, accumulate):
    rng = np.random.default_rng(rows * 1000 + inner * 50 + cols)
    dy = rng.normal(size=(rows, cols))
    w = rng.normal(size=(cols, inner))
    dx0 = rng.normal(size=(rows, inner))
    db0 = rng.normal(size=cols)
    dx, db = dx0.copy(), db0.copy()
    kd.dense_backward_input(dy, w, dx, np.empty_like(dx), accumulate)
    kd.dense_backward_bias(dy, db, accumulate)
    np.testing.assert_allclose(dx, dy @ w + (dx0 if accumulate else 0.0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(db, dy.sum(axis=0) + (db0 if accumulate else 0.0), rtol=1e-12,
                               atol=1e-12)
