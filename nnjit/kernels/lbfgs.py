"""L-BFGS on flat vectors: the two-loop recursion over a ring of curvature pairs, the pair
update, and the vector reductions ``torch.optim.LBFGS`` takes between loss evaluations.

Vectors are in the arena dtype (float32 or float64, as torch's parameters); every reduction
accumulates in float64. The ring (``dirs``: the ``y`` rows, ``stps``: the ``s`` rows, ``ro``:
``1 / y.s``) holds ``count`` pairs, the oldest at row ``head``; nothing here allocates.
"""

import numpy as np

from nnjit.kernels._jit import jit


@jit
def dot(a, b):
    """``sum(a * b)`` in float64."""
    total = 0.0
    for k in range(a.size):
        total += np.float64(a[k]) * np.float64(b[k])
    return total


@jit
def abs_max(a):
    """``max(|a|)`` in float64 (0 for an empty vector); NaN when ``a`` holds one."""
    top = 0.0
    for k in range(a.size):
        v = abs(np.float64(a[k]))
        if np.isnan(v):
            return v
        top = max(top, v)
    return top


@jit
def abs_max_scaled(a, t):
    """``max(|a * t|)``, the products rounded to ``a``'s dtype as torch's ``a.mul(t)``."""
    c = a.dtype.type(t)
    top = 0.0
    for k in range(a.size):
        v = abs(np.float64(a[k] * c))
        if np.isnan(v):
            return v
        top = max(top, v)
    return top


@jit
def abs_sum(a):
    """``sum(|a|)`` in float64."""
    total = 0.0
    for k in range(a.size):
        total += abs(np.float64(a[k]))
    return total


@jit
def step_from(x, t, d, out):
    """``out = x + t * d`` (``out`` may be ``x``)."""
    c = x.dtype.type(t)
    for k in range(x.size):
        out[k] = x[k] + c * d[k]


@jit
def curvature(g, prev_g, d, t, y, s):
    """The pair of the last move: ``y = g - prev_g``, ``s = t * d``; returns ``(y.s, y.y)``."""
    c = d.dtype.type(t)
    ys = 0.0
    yy = 0.0
    for k in range(g.size):
        yk = g[k] - prev_g[k]
        sk = d[k] * c
        y[k] = yk
        s[k] = sk
        ys += np.float64(yk) * np.float64(sk)
        yy += np.float64(yk) * np.float64(yk)
    return ys, yy


@jit
def _axpy(a, x, y):
    """``y += a * x``."""
    c = y.dtype.type(a)
    for k in range(y.size):
        y[k] += c * x[k]


@jit
def direction(g, dirs, stps, ro, al, head, count, h_diag, d):
    """``d = -H g``: the two-loop recursion over the ring's ``count`` pairs (oldest at row
    ``head`` of ``dirs``/``stps``/``ro``), ``h_diag`` the initial inverse Hessian's scale;
    ``al`` (float64, >= count) is its scratch. torch's loop, one buffer for ``q`` and ``d``."""
    size = dirs.shape[0]
    for k in range(g.size):
        d[k] = -g[k]
    for i in range(count - 1, -1, -1):
        r = (head + i) % size
        al[i] = dot(stps[r], d) * ro[r]
        _axpy(-al[i], dirs[r], d)
    c = d.dtype.type(h_diag)
    for k in range(d.size):
        d[k] *= c
    for i in range(count):
        r = (head + i) % size
        be = dot(dirs[r], d) * ro[r]
        _axpy(al[i] - be, stps[r], d)
