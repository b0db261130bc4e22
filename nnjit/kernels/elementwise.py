"""Elementwise forward and backward kernels: activations, add, mul, gradient copy and dropout.

Contract shared by every kernel here:

- Arrays are 1-D, C-contiguous, all the same length ``n = len(x)`` and all the same dtype,
  float32 or float64; the same source compiles for both. Nothing is allocated: outputs are
  preallocated by the caller. Input and output may be the same array (each element is read
  before it is written).
- Constants are built in the array's dtype (``x.dtype.type(...)``) and scalar hyperparameters are
  cast once before the loop: a float64 literal would promote a float32 loop to float64.
- Every backward takes ``accumulate``: if True it does ``dx[i] += g``, else ``dx[i] = g`` (the
  caller knows whether it is the first writer of that gradient).
- Where the derivative is a simple function of the forward output, the backward takes the output
  ``y`` instead of ``x`` (as scikit-learn does), so the pre-activation need not be kept.
- Semantics follow ``torch.nn.functional`` (default arguments), NaN propagates.
- Loops whose iterations write disjoint elements use ``prange``: the serial builds here treat it as
  ``range`` (same code, same results); ``benchmarks/parallel_builds.py`` compiles parallel twins
  of the big ones from the same source. ``dropout_forward`` stays ``range``: its RNG stream is
  sequential.
"""

import math

from numba import prange

from nnjit.kernels._jit import jit
from nnjit.kernels.rng import next_double

# torch.nn.SELU constants (Klambauer et al., 2017).
SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805

_INV_SQRT2 = 0.7071067811865476  # 1 / sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)


@jit
def relu_forward(x, y):
    """y = max(x, 0) (NaN stays NaN). Shapes: x, y (n,)."""
    zero = x.dtype.type(0.0)
    for i in prange(x.shape[0]):
        v = x[i]
        y[i] = zero if v <= zero else v


@jit
def relu_backward(y, dy, dx, accumulate):
    """dx (+)= dy * (y > 0); the derivative at 0 is 0, as in PyTorch. Shapes: y, dy, dx (n,)."""
    zero = y.dtype.type(0.0)
    for i in prange(y.shape[0]):
        g = dy[i] if y[i] > zero else zero
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def leaky_relu_forward(x, y, slope):
    """y = x if x > 0 else slope * x. Shapes: x, y (n,); slope: float."""
    zero = x.dtype.type(0.0)
    s = x.dtype.type(slope)
    for i in prange(x.shape[0]):
        v = x[i]
        y[i] = v if v > zero else s * v


@jit
def leaky_relu_backward(x, dy, dx, accumulate, slope):
    """dx (+)= dy if x > 0 else slope * dy (slope at 0, as in PyTorch). Shapes: x, dy, dx (n,)."""
    zero = x.dtype.type(0.0)
    s = x.dtype.type(slope)
    for i in prange(x.shape[0]):
        g = dy[i] if x[i] > zero else s * dy[i]
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def elu_forward(x, y, alpha):
    """y = x if x > 0 else alpha * (exp(x) - 1) (PyTorch ELU). Shapes: x, y (n,); alpha: float."""
    zero = x.dtype.type(0.0)
    a = x.dtype.type(alpha)
    for i in prange(x.shape[0]):
        v = x[i]
        y[i] = v if v > zero else a * math.expm1(v)


@jit
def elu_backward(x, y, dy, dx, accumulate, alpha):
    """dx (+)= dy if x > 0 else dy * (y + alpha). Shapes: x, y, dy, dx (n,); alpha: float."""
    zero = x.dtype.type(0.0)
    a = x.dtype.type(alpha)
    for i in prange(x.shape[0]):
        # for x <= 0, d/dx alpha * (exp(x) - 1) = alpha * exp(x) = y + alpha: no exp needed
        g = dy[i] if x[i] > zero else dy[i] * (y[i] + a)
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def selu_forward(x, y):
    """y = scale * (x if x > 0 else alpha * (exp(x) - 1)), PyTorch constants. Shapes: x, y (n,)."""
    zero = x.dtype.type(0.0)
    sa = x.dtype.type(SELU_SCALE * SELU_ALPHA)
    s = x.dtype.type(SELU_SCALE)
    for i in prange(x.shape[0]):
        v = x[i]
        y[i] = s * v if v > zero else sa * math.expm1(v)


@jit
def selu_backward(x, y, dy, dx, accumulate):
    """dx (+)= dy * scale if x > 0 else dy * (y + scale * alpha). Shapes: x, y, dy, dx (n,)."""
    zero = x.dtype.type(0.0)
    sa = x.dtype.type(SELU_SCALE * SELU_ALPHA)
    s = x.dtype.type(SELU_SCALE)
    for i in prange(x.shape[0]):
        g = dy[i] * s if x[i] > zero else dy[i] * (y[i] + sa)
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def tanh_forward(x, y):
    """y = tanh(x). Shapes: x, y (n,)."""
    for i in prange(x.shape[0]):
        y[i] = math.tanh(x[i])


@jit
def tanh_backward(y, dy, dx, accumulate):
    """dx (+)= dy * (1 - y**2). Shapes: y, dy, dx (n,)."""
    one = y.dtype.type(1.0)
    for i in prange(y.shape[0]):
        g = dy[i] * (one - y[i] * y[i])
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def sigmoid_forward(x, y):
    """y = 1 / (1 + exp(-x)), stable for large |x|. Shapes: x, y (n,)."""
    zero = x.dtype.type(0.0)
    one = x.dtype.type(1.0)
    for i in prange(x.shape[0]):
        v = x[i]
        # exp(-|x|) never overflows; for x < 0 use sigmoid(x) = exp(x) / (1 + exp(x))
        e = math.exp(-abs(v))
        r = one / (one + e)
        y[i] = r if v >= zero else e * r


@jit
def sigmoid_backward(y, dy, dx, accumulate):
    """dx (+)= dy * y * (1 - y). Shapes: y, dy, dx (n,)."""
    one = y.dtype.type(1.0)
    for i in prange(y.shape[0]):
        g = dy[i] * y[i] * (one - y[i])
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def softplus_forward(x, y):
    """y = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) (PyTorch beta=1). Shapes: x, y (n,)."""
    zero = x.dtype.type(0.0)
    for i in prange(x.shape[0]):
        v = x[i]
        y[i] = (v if v > zero else zero) + math.log1p(math.exp(-abs(v)))


@jit
def softplus_backward(x, dy, dx, accumulate):
    """dx (+)= dy * sigmoid(x), computed stably. Shapes: x, dy, dx (n,)."""
    zero = x.dtype.type(0.0)
    one = x.dtype.type(1.0)
    for i in prange(x.shape[0]):
        v = x[i]
        e = math.exp(-abs(v))
        r = one / (one + e)
        g = dy[i] * (r if v >= zero else e * r)
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def gelu_forward(x, y):
    """y = x * Phi(x), exact erf form (PyTorch approximate='none'). Shapes: x, y (n,)."""
    half = x.dtype.type(0.5)
    c = x.dtype.type(_INV_SQRT2)
    for i in prange(x.shape[0]):
        v = x[i]
        # Phi(x) = erfc(-x / sqrt 2) / 2 keeps relative accuracy for x << 0, where 1 + erf cancels
        y[i] = half * v * math.erfc(-v * c)


@jit
def gelu_backward(x, dy, dx, accumulate):
    """dx (+)= dy * (Phi(x) + x * phi(x)). Shapes: x, dy, dx (n,)."""
    half = x.dtype.type(0.5)
    c = x.dtype.type(_INV_SQRT2)
    k = x.dtype.type(_INV_SQRT_2PI)
    for i in prange(x.shape[0]):
        v = x[i]
        g = dy[i] * (half * math.erfc(-v * c) + v * k * math.exp(-half * v * v))
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def add_forward(a, b, y):
    """y = a + b. Shapes: a, b, y (n,)."""
    for i in prange(a.shape[0]):
        y[i] = a[i] + b[i]


@jit
def add_backward(dy, da, accumulate):
    """da (+)= dy; called once per input of the addition. Shapes: dy, da (n,)."""
    for i in prange(dy.shape[0]):
        if accumulate:
            da[i] += dy[i]
        else:
            da[i] = dy[i]


@jit
def mul_forward(a, b, y):
    """y = a * b. Shapes: a, b, y (n,)."""
    for i in prange(a.shape[0]):
        y[i] = a[i] * b[i]


@jit
def mul_backward(dy, other, dx, accumulate):
    """dx (+)= dy * other, where other is the input not being differentiated. Shapes: (n,)."""
    for i in prange(dy.shape[0]):
        g = dy[i] * other[i]
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


@jit
def copy_grad(src, dst, accumulate):
    """dst (+)= src. Shapes: src, dst (n,)."""
    for i in prange(src.shape[0]):
        if accumulate:
            dst[i] += src[i]
        else:
            dst[i] = src[i]


@jit
def dropout_forward(x, y, mask, p, rng_state):
    """Keep each x[i] with probability 1 - p, scaled: mask[i] = 1/(1-p) or 0, y = x * mask.

    Shapes: x, y, mask (n,); p: float in [0, 1); rng_state: int64 (rng.STATE_WORDS,), advanced
    by n draws (untouched when p == 0, where mask = 1 and y = x).
    """
    one = x.dtype.type(1.0)
    zero = x.dtype.type(0.0)
    if p == 0.0:
        for i in range(x.shape[0]):
            mask[i] = one
            y[i] = x[i]
        return
    keep = 1.0 - p
    scale = x.dtype.type(1.0 / keep)
    for i in range(x.shape[0]):
        m = scale if next_double(rng_state) < keep else zero
        mask[i] = m
        y[i] = x[i] * m


@jit
def dropout_backward(mask, dy, dx, accumulate):
    """dx (+)= dy * mask (mask already holds the 1/(1-p) scale). Shapes: mask, dy, dx (n,)."""
    for i in prange(mask.shape[0]):
        g = dy[i] * mask[i]
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g
