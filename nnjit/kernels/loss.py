"""Loss kernels fused with their gradient (the tape's "loss seed"), plus output probabilities.

Conventions shared by every loss kernel:

- ``logits``/``pred`` and ``dlogits``/``dpred`` are C-contiguous ``(b, k)`` arrays, ``targets`` is
  ``(b, t)``; all of one float dtype (float32 or float64, the same code compiles for both).
- The returned ``loss_sum`` is the float64 SUM over rows of the per-row loss; the caller divides.
- The gradient is written (not accumulated) and multiplied by ``inv_scale`` (a Python float: the
  caller passes ``1/b`` for cross-entropy, ``1/(b*k)`` for MSE and BCE, which reproduces PyTorch's
  ``reduction='mean'``). With ``write_grad=False`` (evaluation) the gradient array is not touched.
- ``wcol`` >= 0: column ``wcol`` of ``targets`` holds each row's weight (scikit-learn's
  ``sample_weight``): the row's loss, gradient and correct count are multiplied by it, and
  ``n_correct`` is the weighted count. -1 (the default): every row weighs 1.
- Scalars are cast to the array dtype before the loops: a float literal would promote float32
  arithmetic to float64 (3.6x slower). Loss sums are accumulated in float64, with explicit
  ``float()`` so that the NUMBA_DISABLE_JIT run (NumPy scalars, NEP 50) does the same.
"""

import math

import numpy as np
from numba.extending import overload

from nnjit.kernels._jit import jit


@jit
def _row_max_argmax(x, i):
    """Max and first argmax of row ``i`` of ``x``. x: (b, k), k >= 1 -> (x.dtype, int64)."""
    best = x[i, 0]
    arg = 0
    for j in range(1, x.shape[1]):
        if x[i, j] > best:
            best = x[i, j]
            arg = j
    return best, arg


@jit
def _row_sum_exp(x, i, m):
    """Sum over j of exp(x[i, j] - m), in x's dtype. x: (b, k)."""
    s = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        s += math.exp(x[i, j] - m)
    return s


def _clip_bounds(dtype):
    """(-log(1 - eps), -log(eps)) for the float ``dtype``'s eps: scikit-learn's log losses clip p
    to [eps, 1 - eps], so a row's -log p to these. Compiled: constants (the overload below)."""
    eps = float(np.finfo(dtype).eps)
    return -math.log1p(-eps), -math.log(eps)


@overload(_clip_bounds, inline="always")
def _clip_bounds_overload(dtype):
    bounds = _clip_bounds(np.float32 if dtype.dtype.bitwidth == 32 else np.float64)
    return lambda dtype: bounds


@jit
def softmax_ce(logits, targets, dlogits, target_is_index, inv_scale, write_grad, clip=False,
               wcol=-1):
    """Softmax cross-entropy and its gradient (softmax - target) * inv_scale.

    logits: (b, k); targets: (b, 1) class indices stored as floats if ``target_is_index``, else
    (b, k) one-hot or probabilities; dlogits: (b, k) written if ``write_grad``.
    A negative class index marks a row to ignore (PyTorch's ``ignore_index``, used for the nodes
    outside a graph's mask): it adds nothing to the sums and gets a zero gradient row.
    Returns (loss_sum: float64, n_correct: float64), n_correct counting rows whose logits argmax
    equals the target class (argmax of the target row for probability targets); ``wcol``: see
    the module doc. ``clip`` (class indices only): each row's loss as scikit-learn's ``log_loss`` counts it, p
    clipped to [eps, 1 - eps] (the dtype's machine epsilon; the gradient is not clipped).
    """
    b, k = logits.shape
    low, high = _clip_bounds(logits.dtype)
    zero = logits.dtype.type(0.0)
    one = logits.dtype.type(1.0)
    scale = logits.dtype.type(inv_scale)
    loss_sum = 0.0
    n_correct = 0.0
    for i in range(b):
        if target_is_index and targets[i, 0] < zero:
            if write_grad:
                for j in range(k):
                    dlogits[i, j] = zero
            continue
        m, pred = _row_max_argmax(logits, i)
        if write_grad:  # keep exp(x - m) in dlogits: each exponential is computed once
            s = zero
            for j in range(k):
                e = math.exp(logits[i, j] - m)
                dlogits[i, j] = e
                s += e
        else:
            s = _row_sum_exp(logits, i, m)
        # log-sum-exp with the max taken out: exp never overflows, log(s) >= 0.
        lse = m + math.log(s)
        w = float(targets[i, wcol]) if wcol >= 0 else 1.0
        if target_is_index:
            cls = int(targets[i, 0])
            row = float(lse) - float(logits[i, cls])
            loss_sum += w * (min(max(row, low), high) if clip else row)
        else:
            _, cls = _row_max_argmax(targets, i)
            row = 0.0
            for j in range(k):
                row += float(targets[i, j]) * (float(lse) - float(logits[i, j]))
            loss_sum += w * row
        if pred == cls:
            n_correct += w
        if write_grad:
            inv_s = one / s
            row_scale = scale * targets[i, wcol] if wcol >= 0 else scale
            for j in range(k):
                if target_is_index:
                    t = one if j == cls else zero
                else:
                    t = targets[i, j]
                dlogits[i, j] = (dlogits[i, j] * inv_s - t) * row_scale
    return loss_sum, n_correct


@jit
def counted_rows(targets):
    """Rows of class-index ``targets`` (b, 1) that are not ignored (index >= 0)."""
    n = 0
    zero = targets.dtype.type(0.0)
    for i in range(targets.shape[0]):
        if targets[i, 0] >= zero:
            n += 1
    return n


@jit
def mse(pred, targets, dpred, inv_scale, write_grad, wcol=-1):
    """Mean squared error (mean over k per row, summed over rows) and gradient 2*(p-t)*inv_scale.

    pred, dpred: (b, k); targets (b, k), or (b, k + 1) with the weights in column ``wcol`` = k.
    Returns (loss_sum: float64, n_correct: float64 = 0).
    """
    b, k = pred.shape
    two_scale = pred.dtype.type(2.0 * inv_scale)
    total = 0.0
    for i in range(b):
        row = 0.0
        row_scale = two_scale * targets[i, wcol] if wcol >= 0 else two_scale
        for j in range(k):
            d = pred[i, j] - targets[i, j]
            dd = float(d)
            row += dd * dd
            if write_grad:
                dpred[i, j] = d * row_scale
        total += float(targets[i, wcol]) * row if wcol >= 0 else row
    return total / k, 0.0


@jit
def bce_with_logits(logits, targets, dlogits, inv_scale, write_grad, clip=False, wcol=-1):
    """Binary cross-entropy on logits (mean over k per row, summed over rows), gradient
    (sigmoid(x) - t) * inv_scale.

    logits, dlogits: (b, k); targets (b, k), or (b, k + 1) with the weights in column ``wcol``
    = k. Returns (loss_sum: float64, n_correct: float64), n_correct counting rows where every
    (x > 0) equals (t > 0.5). ``clip``: each element's loss as
    scikit-learn's ``binary_log_loss`` of 0/1 targets counts it (see softmax_ce).
    """
    b, k = logits.shape
    low, high = _clip_bounds(logits.dtype)
    zero = logits.dtype.type(0.0)
    one = logits.dtype.type(1.0)
    half = logits.dtype.type(0.5)
    scale = logits.dtype.type(inv_scale)
    total = 0.0
    n_correct = 0.0
    for i in range(b):
        row_ok = True
        row = 0.0
        w = float(targets[i, wcol]) if wcol >= 0 else 1.0
        row_scale = scale * targets[i, wcol] if wcol >= 0 else scale
        for j in range(k):
            x = logits[i, j]
            t = targets[i, j]
            # exp(-|x|) <= 1: no overflow in the loss nor in either branch of the sigmoid.
            e = math.exp(-abs(x))
            element = float(max(x, zero) - x * t + math.log1p(e))
            row += min(max(element, low), high) if clip else element
            if (x > zero) != (t > half):
                row_ok = False
            if write_grad:
                sig = one / (one + e) if x >= zero else e / (one + e)
                dlogits[i, j] = (sig - t) * row_scale
        total += w * row
        if row_ok:
            n_correct += w
    return total / k, n_correct


@jit
def poisson(logits, targets, dlogits, inv_scale, write_grad, full=False, wcol=-1):
    """Poisson loss of log-rates ``logits`` (the prediction is exp(logits)) against counts
    (mean over k per row, summed over rows): exp(x) - t x per element (PyTorch's
    ``PoissonNLLLoss(log_input=True)``), with ``full`` the deviance half scikit-learn's
    ``poisson_loss`` counts, xlogy(t, t / exp(x)) - t + exp(x); gradient (exp(x) - t) *
    inv_scale either way.

    logits, dlogits: (b, k); targets (b, k), or (b, k + 1) with the weights in column ``wcol``
    = k. Returns (loss_sum: float64, n_correct: float64 = 0).
    """
    b, k = logits.shape
    zero = logits.dtype.type(0.0)
    scale = logits.dtype.type(inv_scale)
    total = 0.0
    for i in range(b):
        row = 0.0
        row_scale = scale * targets[i, wcol] if wcol >= 0 else scale
        for j in range(k):
            x = logits[i, j]
            t = targets[i, j]
            p = math.exp(x)
            element = float(p) - float(t) * float(x)
            if full:
                element -= float(t)
                if t > zero:
                    element += float(t) * math.log(float(t))
            row += element
            if write_grad:
                dlogits[i, j] = (p - t) * row_scale
        total += float(targets[i, wcol]) * row if wcol >= 0 else row
    return total / k, 0.0


@jit
def softmax_rows(logits, out):
    """Row-wise softmax (max-shifted). logits, out: (b, k); out may be logits."""
    b, k = logits.shape
    one = logits.dtype.type(1.0)
    for i in range(b):
        m, _ = _row_max_argmax(logits, i)
        s = _row_sum_exp(logits, i, m)
        inv_s = one / s
        for j in range(k):
            out[i, j] = math.exp(logits[i, j] - m) * inv_s


@jit
def sigmoid_all(logits, out):
    """Elementwise logistic sigmoid, overflow-free. logits, out: (b, k); out may be logits."""
    b, k = logits.shape
    zero = logits.dtype.type(0.0)
    one = logits.dtype.type(1.0)
    for i in range(b):
        for j in range(k):
            x = logits[i, j]
            e = math.exp(-abs(x))
            out[i, j] = one / (one + e) if x >= zero else e / (one + e)


@jit
def first_nonfinite(x):
    """Index of the first NaN or +-inf in x, or -1. x: (n,) -> int64.

    Relies on the house flag set leaving out ``nnan``/``ninf`` (with them LLVM folds this to -1).
    """
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return i
    return -1
