"""The Winograd F(2x2, 3x3) convolution kernels (nnjit.kernels.conv_winograd) against float64
NumPy references of the forward, the input gradient, the weight gradient and the bias gradient,
with hypothesis-drawn geometries: channel counts that are not multiples of the products' 6 x 4
tiles, odd image sizes (the last row and column of tiles reach past the output: partial tiles),
padding 0, 1, 2 and asymmetric, batches of one, of less than a group of lanes and of several
groups with a partial last one, gradients accumulated into existing values. Scratch and outputs
start as NaN: a kernel that reads what it did not write fails.

Float32 tolerance: the largest error measured against float64 here and at the VGG-style net's
conv2 (32 -> 32 channels, 28x28, batch 64) is 4e-7 of the largest value in every direction (the
transforms' adds and the halves of G are exact in binary), so 2e-5 leaves room for 40 channels.
The op registry's float64 finite-difference check draws "winograd" too
(tests/ops/test_op_gradients.py); tests/ops/test_conv_winograd.py compares with torch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnjit.kernels import conv_winograd as kw
from nnjit.ops.conv import _reference


def _gradients_reference(x, w, dy, pads):
    """float64 dx, dw, db of conv2d(x, w) padded by pads (top, bottom, left, right), stride 1."""
    pt, pb, pl, pr = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    oh, ow = dy.shape[2:]
    for r in range(3):
        for s in range(3):
            patch = xp[:, :, r:r + oh, s:s + ow]
            dw[:, :, r, s] = np.einsum("bopq,bcpq->oc", dy, patch)
            dxp[:, :, r:r + oh, s:s + ow] += np.einsum("bopq,oc->bcpq", dy, w[:, :, r, s])
    return dxp[:, :, pt:pt + x.shape[2], pl:pl + x.shape[3]], dw, dy.sum(axis=(0, 2, 3))


@st.composite
def geometries(draw):
    c = draw(st.integers(1, 40))
    o = draw(st.integers(1, 40))
    pads = draw(st.sampled_from([(0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (1, 2, 0, 1)]))
    h = max(1, 3 - pads[0] - pads[1]) + draw(st.integers(0, 10))
    w = max(1, 3 - pads[2] - pads[3]) + draw(st.integers(0, 10))
    n = draw(st.sampled_from([1, 5, 16, 17, 35]))
    return n, c, o, h, w, pads


def _assert_close(got, want, tol):
    np.testing.assert_allclose(got, want.ravel(), rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=30, deadline=None)
@given(g=geometries(), accumulate=st.booleans())
def test_winograd_kernels_equal_the_reference(dtype, g, accumulate):
    n, c, o, h, w, pads = g
    rng = np.random.default_rng(0)
    oh, ow = h + pads[0] + pads[1] - 2, w + pads[2] + pads[3] - 2
    scratch = kw.scratch_elements(c, o, oh, ow)
    x = rng.standard_normal((n, c, h, w))
    weight = rng.standard_normal((o, c, 3, 3))
    bias = rng.standard_normal(o)
    geometry = (c, h, w, o, pads[0], pads[2], oh, ow)
    y = np.full(n * o * oh * ow, np.nan, dtype)
    kw.forward(x.ravel().astype(dtype), weight.ravel().astype(dtype), bias.astype(dtype), y,
               True, *geometry, np.full(scratch, np.nan, dtype))
    want = _reference(np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:])), weight, bias)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    _assert_close(y, want, tol)

    dy = rng.standard_normal((n, o, oh, ow))
    start = 0.5 if accumulate else 0.0
    dx = np.full(x.size, start, dtype)
    dw = np.full(weight.size, start, dtype)
    db = np.full(o, start, dtype)
    kw.backward(x.ravel().astype(dtype), weight.ravel().astype(dtype), dy.ravel().astype(dtype),
                dx, dw, db, True, True, True, *geometry, np.full(scratch, np.nan, dtype))
    want_dx, want_dw, want_db = _gradients_reference(x, weight, dy, pads)
    _assert_close(dx - start, want_dx, tol)
    _assert_close(dw - start, want_dw, tol)
    _assert_close(db - start, want_db, tol)


@pytest.mark.parametrize("need", [(True, False, False), (False, True, False),
                                  (False, False, True)])
def test_each_gradient_alone_leaves_the_others_untouched(need):
    n, c, o, h, w = 3, 2, 3, 5, 7
    rng = np.random.default_rng(1)
    x, weight = rng.standard_normal((n, c, h, w)), rng.standard_normal((o, c, 3, 3))
    dy = rng.standard_normal((n, o, h, w))
    dx, dw, db = np.zeros(x.size), np.zeros(weight.size), np.zeros(o)
    kw.backward(x.ravel(), weight.ravel(), dy.ravel(), dx, dw, db, *need, c, h, w, o, 1, 1, h, w,
                np.full(kw.scratch_elements(c, o, h, w), np.nan))
    for got, want, needed in zip((dx, dw, db), _gradients_reference(x, weight, dy, (1,) * 4),
                                 need):
        if needed:
            _assert_close(got, want, 1e-12)
        else:
            assert not got.any()
