"""The lanes convolution kernels (nnjit.kernels.conv_lanes: the samples in the vector lanes)
against the float64 NumPy reference (forward) and the im2col kernels run in float64 (gradients),
with hypothesis-drawn geometries: groups, kernel sizes 1-5, dilations, "same" and asymmetric
padding, channel counts that are not multiples of the 6 x 4 tiles, batches of one, of less than
a group of lanes and of several groups with a partial last one. Scratch and outputs start as
NaN: a kernel that reads what it did not write fails.

The op registry's float64 finite-difference check draws "lanes" too
(tests/ops/test_op_gradients.py); tests/ops/test_conv.py compares with torch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnjit.kernels import conv as kc
from nnjit.kernels import conv_lanes as kl
from nnjit.kernels import simd
from nnjit.kernels._jit import jit
from nnjit.ops.conv import _reference
from tests.kernels.test_conv_vector import _block, _gradients, geometries


def _geometry(hyper):
    c, h, w, o, kh, kw, _, _, ph, pw, dh, dw, groups, oh, ow, _, _ = kc._geometry.py_func(hyper, 0)
    return c, h, w, o, kh, kw, ph, pw, dh, dw, groups, oh, ow


def _lanes_gradients(x, w, dy, hyper, scratch, dtype, accumulate):
    dx = np.full(x.size, 0.5 if accumulate else 0.0, dtype)
    dw = np.full(w.size, 0.25 if accumulate else 0.0, dtype)
    db = np.full(int(hyper[kc.G_O]), 0.0, dtype)
    kl.backward(x.astype(dtype), w.astype(dtype), dy.astype(dtype), dx, dw, db, True, True, True,
                *_geometry(hyper), np.full(scratch, np.nan, dtype))
    return dx, dw, db


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=30, deadline=None)
@given(g=geometries(), n=st.sampled_from([1, 5, 16, 17, 35]), accumulate=st.booleans())
def test_lanes_kernels_equal_the_reference(dtype, g, n, accumulate):
    rng = np.random.default_rng(0)
    c, o, h, w, groups = g["c"], g["o"], g["h"], g["w"], g["groups"]
    kernel, dilation = g["kernel"], g["dilation"]
    hyper, scratch, (oh, ow) = _block(c, h, w, o, kernel, g["pads"], dilation, groups,
                                      kc.ALGO_LANES)
    x = rng.standard_normal(n * c * h * w)
    weight = rng.standard_normal(o * (c // groups) * kernel[0] * kernel[1])
    bias = rng.standard_normal(o)
    y = np.full(n * o * oh * ow, np.nan, dtype)
    kl.forward(x.astype(dtype), weight.astype(dtype), bias.astype(dtype), y, True,
               *_geometry(hyper), np.full(scratch, np.nan, dtype))
    want = _reference(x.reshape(n, c, h, w), weight.reshape(o, c // groups, *kernel), bias, 1,
                      g["padding"], dilation, groups).ravel()
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * np.abs(want).max())

    dy = rng.standard_normal(y.size)
    dx, dw, db = _lanes_gradients(x, weight, dy, hyper, scratch, dtype, accumulate)
    ref_hyper, ref_scratch, _ = _block(c, h, w, o, kernel, g["pads"], dilation, groups,
                                       kc.ALGO_IM2COL)
    want_dx, want_dw = _gradients(x, weight, dy, ref_hyper, ref_scratch, np.float64, accumulate)
    np.testing.assert_allclose(dx, want_dx, rtol=tol, atol=tol * np.abs(want_dx).max())
    np.testing.assert_allclose(dw, want_dw, rtol=tol, atol=tol * np.abs(want_dw).max())
    want_db = dy.reshape(n, o, -1).sum(axis=(0, 2))
    np.testing.assert_allclose(db, want_db, rtol=tol, atol=tol * np.abs(want_db).max())


@jit
def _transposes(a, b, c):
    simd.transpose(a, 3, 21, b, 5, 19, False)
    simd.transpose(a, 3, 21, c, 5, 19, True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_block_transposes_in_registers(dtype):
    n = 64 // np.dtype(dtype).itemsize
    a = np.arange(3 + 21 * n, dtype=dtype)
    b = np.full(5 + 19 * n, np.nan, dtype)
    c = np.ones_like(b)
    _transposes(a, b, c)
    block = np.array([a[3 + i * 21:3 + i * 21 + n] for i in range(n)])
    got = np.array([b[5 + i * 19:5 + i * 19 + n] for i in range(n)])
    added = np.array([c[5 + i * 19:5 + i * 19 + n] for i in range(n)])
    np.testing.assert_array_equal(got, block.T)
    np.testing.assert_array_equal(added, block.T + 1)
