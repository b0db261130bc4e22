"""nnjit.kernels.gate_math against NumPy: exp, sigmoid and tanh in float32 and float64 over the
range the recurrent cells see and past the clamp, within a few units of each dtype's
resolution."""

import numpy as np
import pytest

from nnjit.kernels import gate_math as gm
from nnjit.kernels._jit import jit


@jit
def _apply(x, out, which):
    dt = x.dtype
    for j in range(x.shape[0]):
        v = x[j]
        if which == 0:
            out[j] = gm.exp(v, dt)
        elif which == 1:
            out[j] = gm.sigmoid(v, dt)
        else:
            out[j] = gm.tanh(v, dt)


def _grid(dtype):
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-90, 90, 20001), rng.normal(0, 3, 20000),
                        [0.0, -0.0, 1e-30, -1e-30, 80.0, -80.0, 88.0, 1e4, -1e4]])
    return x.astype(dtype)


@pytest.mark.parametrize("dtype,ulps", [(np.float32, 4), (np.float64, 16)])
def test_exp_sigmoid_tanh_match_numpy(dtype, ulps):
    x = _grid(dtype)
    eps = np.finfo(dtype).eps
    out = np.empty_like(x)
    exact = x.astype(np.float64)
    _apply(x, out, 0)
    clamped = np.clip(exact, -80, 80)
    np.testing.assert_allclose(out, np.exp(clamped), rtol=ulps * eps, atol=0)
    _apply(x, out, 1)
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-clamped)), rtol=ulps * eps,
                               atol=np.finfo(dtype).tiny)
    _apply(x, out, 2)
    np.testing.assert_allclose(out, np.tanh(exact), rtol=0, atol=ulps * eps)
    assert np.array_equal(np.isfinite(out), np.ones_like(out, bool))
