"""The stride-1 vector convolution kernels (nnjit.kernels.conv_vector) against the float64 NumPy
reference (forward) and the im2col kernels run in float64 (gradients), with hypothesis-drawn
geometries: groups, kernel sizes 1-5, dilations, "same" and asymmetric padding, channel counts
that are not multiples of the tiles, batches longer than the backward's sample chunk, batch 1.
Scratch and outputs start as NaN: a kernel that reads what it did not write fails.

The op registry's float64 finite-difference check draws "vector" too
(tests/ops/test_op_gradients.py); tests/ops/test_conv.py compares with torch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnjit.kernels import conv as kc
from nnjit.ops.conv import _reference, output_size, padding_of

#: The geometry block's row, typed as the conv family passes it (an int32 from the tape's
#: records): a Python int would compile each kernel a second time, just for these tests.
AUX = np.int32(0)


def _block(c, h, w, o, kernel, pads, dilation, groups, algo):
    cg, og = c // groups, o // groups
    pt, pb, pl, pr = pads
    oh = output_size(h, kernel[0], 1, pt, pb, dilation[0])
    ow = output_size(w, kernel[1], 1, pl, pr, dilation[1])
    block = (c, h, w, o, *kernel, 1, 1, pt, pl, *dilation, groups, oh, ow, algo,
             kc.samples_for(cg, *kernel, oh, ow, og, *dilation, algo))
    scratch = kc.scratch_elements(cg, *kernel, oh, ow, og, 1, 1, *dilation, algo)
    return np.array(block, np.float64), scratch, (oh, ow)


def _gradients(x, w, dy, hyper, scratch, dtype, accumulate):
    dx = np.full(x.size, 0.5 if accumulate else np.nan, dtype)
    dw = np.full(w.size, 0.25 if accumulate else np.nan, dtype)
    db = np.full(int(hyper[kc.G_O]), 0.0, dtype)
    kc.conv2d_backward(x.astype(dtype), w.astype(dtype), dy.astype(dtype), dx, dw, db, True,
                       accumulate, True, accumulate, True, False, hyper, AUX,
                       np.full(scratch, np.nan, dtype))
    return dx, dw


@st.composite
def geometries(draw):
    groups = draw(st.integers(1, 2))
    c = groups * draw(st.integers(1, 10))
    o = groups * draw(st.integers(1, 40))  # both weight-gradient tiles: few and many channels
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = draw(st.sampled_from([0, 1, 2, "same", (1, 2)]))
    pads = padding_of(padding, kernel, dilation, (1, 1), "test")
    h = max(1, (kernel[0] - 1) * dilation[0] + 1 - pads[0] - pads[1]) + draw(st.integers(0, 11))
    w = max(1, (kernel[1] - 1) * dilation[1] + 1 - pads[2] - pads[3]) + draw(st.integers(0, 11))
    n = draw(st.sampled_from([1, 2, 3, 9, 11]))
    return dict(n=n, c=c, o=o, h=h, w=w, kernel=kernel, dilation=dilation, padding=padding,
                pads=pads, groups=groups)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=40, deadline=None)
@given(g=geometries(), accumulate=st.booleans())
def test_vector_kernels_equal_the_reference(dtype, g, accumulate):
    rng = np.random.default_rng(0)
    n, c, o, h, w, groups = g["n"], g["c"], g["o"], g["h"], g["w"], g["groups"]
    kernel, dilation = g["kernel"], g["dilation"]
    hyper, scratch, (oh, ow) = _block(c, h, w, o, kernel, g["pads"], dilation, groups,
                                kc.ALGO_VECTOR)
    x = rng.standard_normal(n * c * h * w)
    weight = rng.standard_normal(o * (c // groups) * kernel[0] * kernel[1])
    bias = rng.standard_normal(o)
    y = np.full(n * o * oh * ow, np.nan, dtype)
    kc.conv2d_forward(x.astype(dtype), weight.astype(dtype), bias.astype(dtype), y, True, hyper,
                      AUX, np.full(scratch, np.nan, dtype))
    want = _reference(x.reshape(n, c, h, w), weight.reshape(o, c // groups, *kernel), bias, 1,
                      g["padding"], dilation, groups).ravel()
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * np.abs(want).max())

    dy = rng.standard_normal(y.size)
    dx, dw = _gradients(x, weight, dy, hyper, scratch, dtype, accumulate)
    ref_hyper, ref_scratch, _ = _block(c, h, w, o, kernel, g["pads"], dilation, groups,
                                       kc.ALGO_IM2COL)
    want_dx, want_dw = _gradients(x, weight, dy, ref_hyper, ref_scratch, np.float64, accumulate)
    np.testing.assert_allclose(dx, want_dx, rtol=tol, atol=tol * np.abs(want_dx).max())
    np.testing.assert_allclose(dw, want_dw, rtol=tol, atol=tol * np.abs(want_dw).max())


def test_a_scratch_span_too_small_is_an_index_error_not_a_wild_write():
    hyper, _, (oh, ow) = _block(3, 8, 8, 4, (3, 3), (1, 1, 1, 1), (1, 1), 1,
                                kc.ALGO_VECTOR)
    x = np.zeros(2 * 3 * 64, np.float32)
    w = np.zeros(4 * 27, np.float32)
    y = np.zeros(2 * 4 * oh * ow, np.float32)
    with pytest.raises(IndexError, match="scratch too small"):
        kc.conv2d_forward(x, w, np.zeros(4, np.float32), y, True, hyper, AUX,
                          np.zeros(10, np.float32))
    with pytest.raises(IndexError, match="scratch too small"):
        kc.conv2d_backward(x, w, y, x.copy(), w.copy(), np.zeros(4, np.float32), True, False,
                           True, False, False, False, hyper, AUX,
                           np.zeros(10, np.float32))
