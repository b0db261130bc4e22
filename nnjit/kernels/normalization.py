"""Batch and layer normalisation kernels over flat row-major arrays of the arena's dtype.

Batch norm reads ``x`` as ``(rows, C, L)`` (``L = H * W`` for images, 1 for ``(B, C)``): one mean
and variance per channel over ``rows * L`` values. Layer norm reads each row as groups of ``D``
consecutive values (the normalised trailing dims), one mean and variance per group. Sums are
accumulated in float64 whatever the arena's dtype; variances are two-pass (no cancellation).
"""

import math

from nnjit.kernels._jit import jit


@jit(inline="always")
def _rectified(v, relu):
    """``v``, or ReLU(v) when ``relu`` (a ReLU folded into the batch norm; NaN stays NaN)."""
    return 0.0 if relu and v <= 0.0 else v


@jit
def batch_norm_train_forward(x, y, w, b, has_w, has_b, rows, C, L, eps, save, relu):
    """Normalise with the batch's statistics: ``save[c]`` = mean, ``save[C + c]`` = 1/std and
    ``save[2C + c]`` = the biased variance, kept for the backward and the running statistics.
    ``relu``: a ReLU follows, applied as the values are written (:mod:`nnjit.engine.fusion`)."""
    n = rows * L
    CL = C * L
    for c in range(C):
        s = 0.0
        for r in range(rows):
            base = r * CL + c * L
            for j in range(L):
                s += x[base + j]
        mean = s / n
        q = 0.0
        for r in range(rows):
            base = r * CL + c * L
            for j in range(L):
                d = x[base + j] - mean
                q += d * d
        invstd = 1.0 / math.sqrt(q / n + eps)
        scale = invstd * (w[c] if has_w else 1.0)
        shift = (b[c] if has_b else 0.0) - mean * scale
        save[c] = mean
        save[C + c] = invstd
        save[2 * C + c] = q / n
        for r in range(rows):
            base = r * CL + c * L
            for j in range(L):
                y[base + j] = _rectified(x[base + j] * scale + shift, relu)


@jit
def batch_norm_update_running(save, rows, C, L, factor, running_mean, running_var):
    """PyTorch's running-statistics rule: ``stat = (1 - factor) * stat + factor * batch``, the
    variance unbiased (``n / (n - 1)``; a single value keeps the biased 0)."""
    n = rows * L
    unbias = n / (n - 1.0) if n > 1 else 1.0
    keep = 1.0 - factor
    for c in range(C):
        var = save[2 * C + c]
        running_mean[c] = keep * running_mean[c] + factor * save[c]
        running_var[c] = keep * running_var[c] + factor * var * unbias


@jit
def batch_norm_eval_forward(x, y, w, b, has_w, has_b, rows, C, L, eps, running_mean,
                            running_var, relu):
    """Normalise with the running statistics (evaluation); ``relu`` as in training."""
    CL = C * L
    for c in range(C):
        invstd = 1.0 / math.sqrt(running_var[c] + eps)
        scale = invstd * (w[c] if has_w else 1.0)
        shift = (b[c] if has_b else 0.0) - running_mean[c] * scale
        for r in range(rows):
            base = r * CL + c * L
            for j in range(L):
                y[base + j] = _rectified(x[base + j] * scale + shift, relu)


@jit
def batch_norm_backward(x, dy, w, has_w, rows, C, L, save, dx, need_x, acc_x, dw, need_w, acc_w,
                        db, need_b, acc_b, y, relu):
    """Gradients of the training forward (batch statistics, which depend on x). ``relu``: the
    forward's ReLU is folded in, so ``dy`` (the ReLU's output gradient) counts only where its
    output ``y`` is positive (PyTorch's ReLU derivative: 0 at 0)."""
    n = rows * L
    CL = C * L
    for c in range(C):
        mean = save[c]
        invstd = save[C + c]
        sum_dy = 0.0
        sum_dy_xhat = 0.0
        for r in range(rows):
            base = r * CL + c * L
            for j in range(L):
                g = dy[base + j] if not relu or y[base + j] > 0.0 else 0.0
                sum_dy += g
                sum_dy_xhat += g * (x[base + j] - mean) * invstd
        if need_w:
            dw[c] = dw[c] + sum_dy_xhat if acc_w else sum_dy_xhat
        if need_b:
            db[c] = db[c] + sum_dy if acc_b else sum_dy
        if need_x:
            k = (w[c] if has_w else 1.0) * invstd / n
            mean_dy = sum_dy
            for r in range(rows):
                base = r * CL + c * L
                for j in range(L):
                    xhat = (x[base + j] - mean) * invstd
                    d = dy[base + j] if not relu or y[base + j] > 0.0 else 0.0
                    g = k * (n * d - mean_dy - xhat * sum_dy_xhat)
                    dx[base + j] = dx[base + j] + g if acc_x else g


@jit
def layer_norm_forward(x, y, w, b, has_w, has_b, groups, D, eps):
    """Normalise each of ``groups`` runs of ``D`` values (all rows' groups, back to back)."""
    for g in range(groups):
        base = g * D
        s = 0.0
        for j in range(D):
            s += x[base + j]
        mean = s / D
        q = 0.0
        for j in range(D):
            d = x[base + j] - mean
            q += d * d
        invstd = 1.0 / math.sqrt(q / D + eps)
        for j in range(D):
            v = (x[base + j] - mean) * invstd
            if has_w:
                v *= w[j]
            if has_b:
                v += b[j]
            y[base + j] = v


@jit
def layer_norm_backward(x, dy, w, has_w, groups, D, eps, dx, need_x, acc_x, dw, need_w, acc_w,
                        db, need_b, acc_b):
    """Gradients of :func:`layer_norm_forward` (the statistics are recomputed from x: two
    scalars per group, cheaper than a saved slot the size of the batch)."""
    if need_w and not acc_w:
        for j in range(D):
            dw[j] = 0.0
    if need_b and not acc_b:
        for j in range(D):
            db[j] = 0.0
    for g in range(groups):
        base = g * D
        s = 0.0
        for j in range(D):
            s += x[base + j]
        mean = s / D
        q = 0.0
        for j in range(D):
            d = x[base + j] - mean
            q += d * d
        invstd = 1.0 / math.sqrt(q / D + eps)
        sum_g = 0.0  # over the group: dxhat and dxhat * xhat, dxhat = dy * w
        sum_g_xhat = 0.0
        for j in range(D):
            xhat = (x[base + j] - mean) * invstd
            gy = dy[base + j]
            if need_w:
                dw[j] += gy * xhat
            if need_b:
                db[j] += gy
            gh = gy * w[j] if has_w else gy
            sum_g += gh
            sum_g_xhat += gh * xhat
        if need_x:
            mg = sum_g / D
            mgx = sum_g_xhat / D
            for j in range(D):
                xhat = (x[base + j] - mean) * invstd
                gh = dy[base + j] * w[j] if has_w else dy[base + j]
                v = invstd * (gh - mg - xhat * mgx)
                dx[base + j] = dx[base + j] + v if acc_x else v
