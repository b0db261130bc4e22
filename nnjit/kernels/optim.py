"""Optimizer updates over the flat parameter block (PyTorch ``torch.optim`` semantics).

``params``, ``grads`` and every state buffer are 1-D C-contiguous arrays of one length and one
float dtype (float32 or float64). ``step`` is the 1-based step count. On ``step == 1`` the state is
initialised by the kernel itself (as PyTorch creates it lazily on the first step), so stale or
uninitialised buffers are fine. Hyperparameters arrive as Python floats and are cast to the array
dtype once, before the loop: a float64 scalar inside the loop would promote float32 arithmetic.
Each update is one pass over memory with no data-dependent branch, so LLVM vectorises it.
Update loops use ``prange`` (each iteration writes only element i): the serial builds here treat it
as ``range``; ``benchmarks/parallel_builds.py`` compiles parallel twins from the same source. The
L2 penalty is a reduction and stays ``range`` (and serial).
"""

import math

from numba import prange

from nnjit.kernels._jit import inlined, jit


@jit
def _fill_zero(x):
    """x[:] = 0. x: (n,)."""
    zero = x.dtype.type(0.0)
    for i in range(x.shape[0]):
        x[i] = zero


@jit
def sgd_update(params, grads, velocity, lr, momentum, dampening, nesterov, weight_decay, step,
               sklearn=False):
    """torch.optim.SGD step: g += wd*p; buf = g (step 1) or momentum*buf + (1-dampening)*g;
    g = g + momentum*buf (nesterov) or buf; p -= lr*g. momentum == 0: plain SGD, velocity unused.

    ``sklearn``: scikit-learn's ``SGDOptimizer`` instead (dampening and weight_decay 0): v =
    momentum*v - lr*g, then p += momentum*v - lr*g (nesterov) or p += v. Its velocity carries
    each step's rate, so the two differ once the rate changes ("invscaling", "adaptive"); the
    same loop runs it with other scalars (no second loop to compile).

    params, grads, velocity: (n,).
    """
    dt = params.dtype.type
    lr_ = dt(lr)
    wd = dt(weight_decay)
    n = params.shape[0]
    if momentum == 0.0:
        for i in prange(n):
            params[i] -= lr_ * (grads[i] + wd * params[i])
        return
    mom_n = dt(momentum)
    if sklearn:  # buf = v: v = momentum*v + (-lr)*g; p -= lr*(g - momentum/lr*v) or -1*v
        if step == 1:
            _fill_zero(velocity)
        mom = dt(momentum)
        damp = dt(-lr)
        if nesterov:
            mom_n = dt(-momentum / lr)
        else:
            lr_ = dt(-1.0)
    elif step == 1:
        # torch sets the buffer to the first gradient: 0*buf + 1*g, from a zeroed buffer.
        _fill_zero(velocity)
        mom = dt(0.0)
        damp = dt(1.0)
    else:
        mom = dt(momentum)
        damp = dt(1.0 - dampening)
    for i in prange(n):
        g = grads[i] + wd * params[i]
        buf = mom * velocity[i] + damp * g
        velocity[i] = buf
        # loop-invariant branch: LLVM unswitches it, the body stays vectorisable.
        params[i] -= lr_ * (g + mom_n * buf if nesterov else buf)


@jit(inline="always")
def _moment_terms(params, beta1, beta2, weight_decay, decoupled, lr):
    """``(b1, 1-b1, b2, 1-b2, l2, decay)`` in the arrays' dtype, for the Adam family's moments
    and weight decay: L2 added to the gradient (``l2``), or with ``decoupled`` applied to the
    weights (``decay``, AdamW's)."""
    dt = params.dtype.type
    return (dt(beta1), dt(1.0 - beta1), dt(beta2), dt(1.0 - beta2),
            dt(0.0) if decoupled else dt(weight_decay),
            dt(1.0 - lr * weight_decay) if decoupled else dt(1.0))


@jit(inline="always")
def _moments(m, v, i, g, b1, omb1, b2, omb2):
    """Update and return the first and second moments of element ``i`` with gradient ``g``."""
    mi = b1 * m[i] + omb1 * g
    vi = b2 * v[i] + omb2 * g * g
    m[i] = mi
    v[i] = vi
    return mi, vi


@jit
def adam_update(params, grads, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step,
                sklearn=False):
    """torch.optim.Adam step (L2: g += wd*p) or, with ``decoupled``, torch.optim.AdamW
    (p *= 1 - lr*wd first); m, v are the first and second moments. amsgrad is not supported.

    ``sklearn``: scikit-learn's ``AdamOptimizer`` instead (weight_decay 0): p += -lr_t*m /
    (sqrt(v) + eps) with lr_t = lr*sqrt(1-beta2^t)/(1-beta1^t), i.e. eps added to the
    uncorrected sqrt(v): torch's update with eps/sqrt(1-beta2^t) for eps (no second loop).

    params, grads, m, v: (n,).
    """
    dt = params.dtype.type
    if step == 1:
        _fill_zero(m)
        _fill_zero(v)
    # Bias corrections in float64 outside the loop; the loop sees only array-dtype scalars.
    step_size = dt(lr / (1.0 - beta1**step))
    inv_bc2_sqrt_f64 = 1.0 / math.sqrt(1.0 - beta2**step)
    inv_bc2_sqrt = dt(inv_bc2_sqrt_f64)
    b1, omb1, b2, omb2, l2, decay = _moment_terms(params, beta1, beta2, weight_decay, decoupled,
                                                  lr)
    eps_ = dt(eps * inv_bc2_sqrt_f64) if sklearn else dt(eps)
    for i in prange(params.shape[0]):
        p = params[i]
        g = grads[i] + l2 * p
        mi, vi = _moments(m, v, i, g, b1, omb1, b2, omb2)
        params[i] = p * decay - step_size * mi / (math.sqrt(vi) * inv_bc2_sqrt + eps_)


@jit
def rmsprop_update(
    params, grads, square_avg, momentum_buf, lr, alpha, eps, weight_decay, momentum, step
):
    """torch.optim.RMSprop step (centered=False): g += wd*p; sq = alpha*sq + (1-alpha)*g^2;
    buf = momentum*buf + g/(sqrt(sq)+eps), p -= lr*buf; momentum == 0: p -= lr*g/(sqrt(sq)+eps)
    and momentum_buf is unused.

    params, grads, square_avg, momentum_buf: (n,).
    """
    dt = params.dtype.type
    use_momentum = momentum != 0.0
    if step == 1:
        _fill_zero(square_avg)
        if use_momentum:
            _fill_zero(momentum_buf)
    lr_ = dt(lr)
    a = dt(alpha)
    oma = dt(1.0 - alpha)
    eps_ = dt(eps)
    wd = dt(weight_decay)
    mom = dt(momentum)
    n = params.shape[0]
    if use_momentum:
        for i in prange(n):
            g = grads[i] + wd * params[i]
            sq = a * square_avg[i] + oma * g * g
            square_avg[i] = sq
            buf = mom * momentum_buf[i] + g / (math.sqrt(sq) + eps_)
            momentum_buf[i] = buf
            params[i] -= lr_ * buf
    else:
        for i in prange(n):
            g = grads[i] + wd * params[i]
            sq = a * square_avg[i] + oma * g * g
            square_avg[i] = sq
            params[i] -= lr_ * g / (math.sqrt(sq) + eps_)


@jit
def adagrad_update(params, grads, sums, lr, lr_decay, weight_decay, initial, eps, step):
    """torch.optim.Adagrad step: g += wd*p; sum += g^2; p -= clr * g / (sqrt(sum) + eps) with
    clr = lr / (1 + (step - 1) * lr_decay); ``sums`` starts at ``initial``."""
    dt = params.dtype.type
    if step == 1:
        start = dt(initial)
        for i in range(sums.shape[0]):
            sums[i] = start
    clr = dt(lr / (1.0 + (step - 1) * lr_decay))
    wd = dt(weight_decay)
    eps_ = dt(eps)
    for i in prange(params.shape[0]):
        g = grads[i] + wd * params[i]
        s = sums[i] + g * g
        sums[i] = s
        params[i] -= clr * g / (math.sqrt(s) + eps_)


@jit
def adadelta_update(params, grads, square_avg, acc_delta, lr, rho, eps, weight_decay, step):
    """torch.optim.Adadelta step: g += wd*p; sq = rho*sq + (1-rho)*g^2; delta =
    sqrt(acc + eps) / sqrt(sq + eps) * g; acc = rho*acc + (1-rho)*delta^2; p -= lr*delta."""
    dt = params.dtype.type
    if step == 1:
        _fill_zero(square_avg)
        _fill_zero(acc_delta)
    lr_ = dt(lr)
    r = dt(rho)
    omr = dt(1.0 - rho)
    eps_ = dt(eps)
    wd = dt(weight_decay)
    for i in prange(params.shape[0]):
        g = grads[i] + wd * params[i]
        sq = r * square_avg[i] + omr * g * g
        square_avg[i] = sq
        delta = math.sqrt(acc_delta[i] + eps_) / math.sqrt(sq + eps_) * g
        acc_delta[i] = r * acc_delta[i] + omr * delta * delta
        params[i] -= lr_ * delta


@jit
def adamax_update(params, grads, m, u, lr, beta1, beta2, eps, weight_decay, step):
    """torch.optim.Adamax step: g += wd*p; m = b1*m + (1-b1)*g; u = max(b2*u, |g| + eps);
    p -= lr / (1 - b1^step) * m / u."""
    dt = params.dtype.type
    if step == 1:
        _fill_zero(m)
        _fill_zero(u)
    clr = dt(lr / (1.0 - beta1**step))
    b1 = dt(beta1)
    omb1 = dt(1.0 - beta1)
    b2 = dt(beta2)
    eps_ = dt(eps)
    wd = dt(weight_decay)
    for i in prange(params.shape[0]):
        g = grads[i] + wd * params[i]
        mi = b1 * m[i] + omb1 * g
        ui = max(b2 * u[i], abs(g) + eps_)
        m[i] = mi
        u[i] = ui
        params[i] -= clr * mi / ui


@jit
def nadam_update(params, grads, m, v, mu_product, lr, beta1, beta2, eps, weight_decay,
                 momentum_decay, decoupled, step):
    """torch.optim.NAdam step (Dozat's Nesterov momentum with PyTorch's momentum decay
    schedule); ``decoupled``: weight decay as AdamW's. ``mu_product[0]`` carries the product of
    the momentum coefficients over the steps (torch's ``mu_product`` state, in the arrays'
    dtype as torch keeps it in the default dtype)."""
    dt = params.dtype.type
    if step == 1:
        _fill_zero(m)
        _fill_zero(v)
        mu_product[0] = dt(1.0)
    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
    product = mu_product[0] * dt(mu)
    mu_product[0] = product
    c_grad = dt(-lr * (1.0 - mu) / (1.0 - float(product)))
    c_avg = dt(-lr * mu_next / (1.0 - float(product) * mu_next))
    inv_bc2 = dt(1.0 / (1.0 - beta2**step))
    b1, omb1, b2, omb2, l2, decay = _moment_terms(params, beta1, beta2, weight_decay, decoupled,
                                                  lr)
    eps_ = dt(eps)
    for i in prange(params.shape[0]):
        p = params[i] * decay
        g = grads[i] + l2 * p
        mi, vi = _moments(m, v, i, g, b1, omb1, b2, omb2)
        denom = math.sqrt(vi * inv_bc2) + eps_
        params[i] = p + c_grad * g / denom + c_avg * mi / denom


@jit
def radam_update(params, grads, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """torch.optim.RAdam step: Adam's moments, the variance rectified once its approximated
    length ``rho_t`` exceeds 5 (before: a bias-corrected momentum step); ``decoupled`` as in
    :func:`nadam_update`."""
    dt = params.dtype.type
    if step == 1:
        _fill_zero(m)
        _fill_zero(v)
    bc1 = 1.0 - beta1**step
    bc2 = 1.0 - beta2**step
    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    rho_t = rho_inf - 2.0 * step * beta2**step / bc2
    rectified = rho_t > 5.0
    rect = (math.sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf
                      / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)) if rectified else 1.0)
    step_size = dt(lr / bc1)
    scale = dt(math.sqrt(bc2) * rect)
    b1, omb1, b2, omb2, l2, decay = _moment_terms(params, beta1, beta2, weight_decay, decoupled,
                                                  lr)
    eps_ = dt(eps)
    for i in prange(params.shape[0]):
        p = params[i] * decay
        g = grads[i] + l2 * p
        mi, vi = _moments(m, v, i, g, b1, omb1, b2, omb2)
        if rectified:  # (loop-invariant: unswitched)
            params[i] = p - step_size * mi * scale / (math.sqrt(vi) + eps_)
        else:
            params[i] = p - step_size * mi


@jit
def _l2_span(p, g, c):
    """g += c*p; return sum(p^2) in float64. p, g: (n,) views of one span."""
    total = 0.0
    for i in range(p.shape[0]):
        g[i] += c * p[i]
        q = float(p[i])  # square and sum in float64 (also under NUMBA_DISABLE_JIT)
        total += q * q
    return total


@jit
def l2_penalty(params, grads, spans, coef):
    """Add coef*p to grads over the spans and return the penalty 0.5*coef*sum(p^2) (float64).

    params, grads: (n,); spans: (s, 2) int64 rows [offset, length]. Elements outside are untouched.
    """
    c = params.dtype.type(coef)
    total = 0.0
    for r in range(spans.shape[0]):
        # Slicing makes a view (no allocation); indexing from 0 lets LLVM drop the
        # negative-index wraparound and vectorise the span loop.
        lo = spans[r, 0]
        hi = lo + spans[r, 1]
        total += _l2_span(params[lo:hi], grads[lo:hi], c)
    return 0.5 * coef * total


# -- the optimizer steps: one per optimizer family, each compiled on its own when a fit uses it
# (an entry of the compiled loop's dispatch table, nnjit.engine.dispatch), with one signature:
# ``step(kind, params, grads, opt_state, opt_hyper, lr, step) -> True``. ``opt_state`` (2, n)
# holds the optimizer's buffers; ``opt_hyper`` its hyperparameters in the order of
# :meth:`nnjit.optim.Optimizer.hyper_vector` (entry 0, the base rate, is unused). scikit-learn's
# kinds share torch's step (one inlined loop, a flag).
OPT_SGD, OPT_ADAM, OPT_RMSPROP, OPT_SKLEARN_SGD, OPT_SKLEARN_ADAM = 0, 1, 2, 3, 4
OPT_ADAGRAD, OPT_ADADELTA, OPT_ADAMAX, OPT_NADAM, OPT_RADAM = 5, 6, 7, 8, 9

_sgd, _adam, _rmsprop = inlined(sgd_update), inlined(adam_update), inlined(rmsprop_update)


@jit(inline="always")
def sgd_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """SGD (momentum, dampening, Nesterov, weight decay) or scikit-learn's SGD."""
    _sgd(params, grads, opt_state[0], lr, opt_hyper[1], opt_hyper[2], opt_hyper[3] != 0.0,
         opt_hyper[4], step, kind == OPT_SKLEARN_SGD)
    return True


@jit(inline="always")
def adam_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """Adam, AdamW (decoupled weight decay) or scikit-learn's Adam."""
    _adam(params, grads, opt_state[0], opt_state[1], lr, opt_hyper[1], opt_hyper[2],
          opt_hyper[3], opt_hyper[4], opt_hyper[5] != 0.0, step, kind == OPT_SKLEARN_ADAM)
    return True


@jit(inline="always")
def rmsprop_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """RMSprop (centered or not, momentum, weight decay)."""
    _rmsprop(params, grads, opt_state[0], opt_state[1], lr, opt_hyper[1], opt_hyper[2],
             opt_hyper[3], opt_hyper[4], step)
    return True


@jit(inline="always")
def adagrad_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """Adagrad (lr_decay, weight decay, initial accumulator value)."""
    adagrad_update(params, grads, opt_state[0], lr, opt_hyper[1], opt_hyper[2], opt_hyper[3],
                   opt_hyper[4], step)
    return True


@jit(inline="always")
def adadelta_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """Adadelta (rho, eps, weight decay)."""
    adadelta_update(params, grads, opt_state[0], opt_state[1], lr, opt_hyper[1], opt_hyper[2],
                    opt_hyper[3], step)
    return True


@jit(inline="always")
def adamax_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """Adamax (betas, eps, weight decay)."""
    adamax_update(params, grads, opt_state[0], opt_state[1], lr, opt_hyper[1], opt_hyper[2],
                  opt_hyper[3], opt_hyper[4], step)
    return True


@jit(inline="always")
def nadam_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """NAdam (betas, eps, weight decay, momentum decay, decoupled weight decay); the third state
    row's first value is its momentum product."""
    nadam_update(params, grads, opt_state[0], opt_state[1], opt_state[2], lr, opt_hyper[1],
                 opt_hyper[2], opt_hyper[3], opt_hyper[4], opt_hyper[5], opt_hyper[6] != 0.0,
                 step)
    return True


@jit(inline="always")
def radam_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """RAdam (betas, eps, weight decay, decoupled weight decay)."""
    radam_update(params, grads, opt_state[0], opt_state[1], lr, opt_hyper[1], opt_hyper[2],
                 opt_hyper[3], opt_hyper[4], opt_hyper[5] != 0.0, step)
    return True


#: The state rows (buffers of the parameters' length) each kind's step reads and writes: the
#: engine refuses a fit whose state has fewer (a forged kind would index past the array).
STATE_ROWS = {OPT_SGD: 1, OPT_SKLEARN_SGD: 1, OPT_ADAM: 2, OPT_SKLEARN_ADAM: 2, OPT_RMSPROP: 2,
              OPT_ADAGRAD: 1, OPT_ADADELTA: 2, OPT_ADAMAX: 2, OPT_NADAM: 3, OPT_RADAM: 2}

#: Each optimizer kind's step, and the name its compiled entry goes by.
STEPS = {OPT_SGD: ("SGD", sgd_step), OPT_SKLEARN_SGD: ("SGD", sgd_step),
         OPT_ADAM: ("Adam", adam_step), OPT_SKLEARN_ADAM: ("Adam", adam_step),
         OPT_RMSPROP: ("RMSprop", rmsprop_step), OPT_ADAGRAD: ("Adagrad", adagrad_step),
         OPT_ADADELTA: ("Adadelta", adadelta_step), OPT_ADAMAX: ("Adamax", adamax_step),
         OPT_NADAM: ("NAdam", nadam_step), OPT_RADAM: ("RAdam", radam_step)}
