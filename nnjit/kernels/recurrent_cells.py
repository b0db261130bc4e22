"""One time step of the recurrent cells over a batch, forward and backward: Elman RNN (tanh or
ReLU), LSTM and GRU, with PyTorch's equations and gate order.

Shared layout (B rows, H hidden units, G = gates * H, step ``t``):

* ``p`` (B, T * G): every step's input projection ``x_t W_ih^T + b_ih``, step t in columns
  ``t*G .. (t+1)*G``; ``hh`` (B, G): ``h_{t-1} W_hh^T + b_hh`` for this step.
* ``h`` (and the LSTM's ``c``) (B, H): the state, updated in place; ``y`` (B, T * H): the
  outputs. Row b is padding at step t when ``has_lengths`` and ``t >= lengths[b]``: its output
  is 0 and its state stays as it was (PyTorch's packed sequences).
* The saved values are (B, k) views of this step: ``gates`` (activated), the LSTM's ``c_prev``
  and ``tanh_c``, the GRU's ``hh_n`` (``W_hn h_{t-1} + b_hn``, which r multiplies).

Backward: ``dh`` (and ``dc``) hold the gradient reaching the state after step t; the step adds
``dy``'s step-t columns, writes the pre-activation gradients of the recurrent product to ``dhh``
(zeros on padded rows) and those of the input projection to ``p``'s gradient ``dp`` (the same
except the GRU's n gate, which r scales on the recurrent side only), and leaves in ``dh`` the
part of the previous state's gradient that does not go through ``W_hh`` (the GRU's ``z`` path;
0 otherwise; padded rows keep theirs). The scan adds ``dhh @ W_hh``.
"""

from nnjit.kernels import gate_math as gm
from nnjit.kernels._jit import jit


@jit(inline="always")
def padded(t, b, lengths, has_lengths):
    """Whether step ``t`` of row ``b`` is past the row's length."""
    return has_lengths and t >= lengths[b]


@jit
def rnn_step_forward(p, t, hh, lengths, has_lengths, relu, h, y):
    """h (B, H) = tanh or relu(p[:, step t] + hh); y's step t = h (0 on padded rows)."""
    rows, hidden = h.shape
    dt = h.dtype
    zero = dt.type(0.0)
    base = t * hidden
    for b in range(rows):
        if padded(t, b, lengths, has_lengths):
            for j in range(hidden):
                y[b, base + j] = zero
            continue
        for j in range(hidden):
            v = p[b, base + j] + hh[b, j]
            v = max(zero, v) if relu else gm.tanh(v, dt)
            h[b, j] = v
            y[b, base + j] = v


@jit
def rnn_step_backward(y, dy, t, lengths, has_lengths, relu, dh, dhh, dp, need_p, acc_p):
    """Gradients of step t from dh (B, H) + dy's step t, through y's step t (= h_t)."""
    rows, hidden = dh.shape
    zero = dh.dtype.type(0.0)
    one = dh.dtype.type(1.0)
    base = t * hidden
    for b in range(rows):
        pad = padded(t, b, lengths, has_lengths)
        for j in range(hidden):
            v = y[b, base + j]
            g = zero
            if not pad:
                g = dh[b, j] + dy[b, base + j]
                g = (g if v > zero else zero) if relu else g * (one - v * v)
                dh[b, j] = zero
            dhh[b, j] = g
            if need_p:
                dp[b, base + j] = dp[b, base + j] + g if acc_p else g


@jit
def lstm_step_forward(p, t, hh, lengths, has_lengths, h, c, y, gates, c_prev, tanh_c):
    """i, f, g, o = sigma, sigma, tanh, sigma(p[:, step t] + hh); c = f c + i g; h = o tanh c."""
    rows, hidden = h.shape
    dt = h.dtype
    zero = dt.type(0.0)
    base = 4 * t * hidden
    for b in range(rows):
        for j in range(hidden):
            c_prev[b, j] = c[b, j]
        if padded(t, b, lengths, has_lengths):
            for j in range(hidden):
                y[b, t * hidden + j] = zero
            continue
        for j in range(4 * hidden):
            v = p[b, base + j] + hh[b, j]
            gates[b, j] = gm.tanh(v, dt) if 2 * hidden <= j < 3 * hidden else gm.sigmoid(v, dt)
        for j in range(hidden):
            cv = gates[b, hidden + j] * c[b, j] + gates[b, j] * gates[b, 2 * hidden + j]
            tc = gm.tanh(cv, dt)
            c[b, j] = cv
            tanh_c[b, j] = tc
            hv = gates[b, 3 * hidden + j] * tc
            h[b, j] = hv
            y[b, t * hidden + j] = hv


@jit
def lstm_step_backward(dy, t, gates, c_prev, tanh_c, lengths, has_lengths, dh, dc, dhh, dp,
                       need_p, acc_p):
    """Gradients of step t: dc (B, H) carries the cell's gradient back through f."""
    rows, hidden = dh.shape
    zero = dh.dtype.type(0.0)
    one = dh.dtype.type(1.0)
    base = 4 * t * hidden
    for b in range(rows):
        if padded(t, b, lengths, has_lengths):
            for j in range(4 * hidden):
                dhh[b, j] = zero
                if need_p and not acc_p:
                    dp[b, base + j] = zero
            continue
        for j in range(hidden):
            g = dh[b, j] + dy[b, t * hidden + j]
            i = gates[b, j]
            f = gates[b, hidden + j]
            gg = gates[b, 2 * hidden + j]
            o = gates[b, 3 * hidden + j]
            tc = tanh_c[b, j]
            dct = dc[b, j] + g * o * (one - tc * tc)
            dc[b, j] = dct * f
            dh[b, j] = zero
            dhh[b, j] = dct * gg * i * (one - i)
            dhh[b, hidden + j] = dct * c_prev[b, j] * f * (one - f)
            dhh[b, 2 * hidden + j] = dct * i * (one - gg * gg)
            dhh[b, 3 * hidden + j] = g * tc * o * (one - o)
        if need_p:
            for j in range(4 * hidden):
                dp[b, base + j] = dp[b, base + j] + dhh[b, j] if acc_p else dhh[b, j]


@jit
def gru_step_forward(p, t, hh, lengths, has_lengths, h, y, gates, hh_n):
    """r, z = sigma(p_rz + hh_rz); n = tanh(p_n + r hh_n); h = (1 - z) n + z h."""
    rows, hidden = h.shape
    dt = h.dtype
    zero = dt.type(0.0)
    one = dt.type(1.0)
    base = 3 * t * hidden
    for b in range(rows):
        if padded(t, b, lengths, has_lengths):
            for j in range(hidden):
                y[b, t * hidden + j] = zero
            continue
        for j in range(2 * hidden):
            gates[b, j] = gm.sigmoid(p[b, base + j] + hh[b, j], dt)
        for j in range(hidden):
            hn = hh[b, 2 * hidden + j]
            n = gm.tanh(p[b, base + 2 * hidden + j] + gates[b, j] * hn, dt)
            z = gates[b, hidden + j]
            hv = (one - z) * n + z * h[b, j]
            gates[b, 2 * hidden + j] = n
            hh_n[b, j] = hn
            h[b, j] = hv
            y[b, t * hidden + j] = hv


@jit
def gru_step_backward(dy, t, gates, hh_n, h_prev, lengths, has_lengths, dh, dhh, dp, need_p,
                      acc_p):
    """Gradients of step t; dh keeps the z path ``g z`` to the previous state."""
    rows, hidden = dh.shape
    zero = dh.dtype.type(0.0)
    one = dh.dtype.type(1.0)
    base = 3 * t * hidden
    for b in range(rows):
        if padded(t, b, lengths, has_lengths):
            for j in range(3 * hidden):
                dhh[b, j] = zero
                if need_p and not acc_p:
                    dp[b, base + j] = zero
            continue
        for j in range(hidden):
            g = dh[b, j] + dy[b, t * hidden + j]
            r = gates[b, j]
            z = gates[b, hidden + j]
            n = gates[b, 2 * hidden + j]
            dn = g * (one - z) * (one - n * n)
            dr = dn * hh_n[b, j] * r * (one - r)
            dz = g * (h_prev[b, j] - n) * z * (one - z)
            dh[b, j] = g * z
            dhh[b, j] = dr
            dhh[b, hidden + j] = dz
            dhh[b, 2 * hidden + j] = dn * r
            if need_p:
                dp[b, base + j] = dp[b, base + j] + dr if acc_p else dr
                dp[b, base + hidden + j] = dp[b, base + hidden + j] + dz if acc_p else dz
                dp[b, base + 2 * hidden + j] = (dp[b, base + 2 * hidden + j] + dn if acc_p
                                                else dn)
