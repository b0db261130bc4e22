"""Kernels on the flat gradient block: global-norm clipping and gradient accumulation."""

import math

from nnjit.kernels._jit import jit
from nnjit.kernels.plateau import plateau_step  # noqa: F401  (the loop reads it from here)


@jit
def clip_by_global_norm(grads, max_norm):
    """Scale grads (n,) so their L2 norm is at most ``max_norm`` (PyTorch's ``clip_grad_norm_``:
    coefficient ``max_norm / (norm + 1e-6)``, capped at 1). Returns the norm before clipping."""
    total = 0.0
    for i in range(grads.shape[0]):
        g = float(grads[i])
        total += g * g
    norm = math.sqrt(total)
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0:
        c = grads.dtype.type(coef)
        for i in range(grads.shape[0]):
            grads[i] *= c
    return norm


@jit
def accumulate_gradients(grads, total, first):
    """total (n,) = grads if ``first`` else total + grads."""
    if first:
        for i in range(grads.shape[0]):
            total[i] = grads[i]
    else:
        for i in range(grads.shape[0]):
            total[i] += grads[i]


@jit
def mean_into(total, count, grads):
    """grads (n,) = total / count (the mean gradient over accumulated micro-batches)."""
    inv = grads.dtype.type(1.0 / count)
    for i in range(grads.shape[0]):
        grads[i] = total[i] * inv
