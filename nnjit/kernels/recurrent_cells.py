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

Every loop runs over one row's 1-D views (indexing a 2-D array by a computed column keeps
numba's negative-index wraparound test, which stops vectorisation: an add over a GRU step took
4x longer) and reads or writes few arrays, and the activations run in place on one array (a
loop applying sigmoid to the sum of two arrays was not vectorised at all).
"""

from nnjit.kernels import gate_math as gm
from nnjit.kernels._jit import jit


@jit(inline="always")
def padded(t, b, lengths, has_lengths):
    """Whether step ``t`` of row ``b`` is past the row's length."""
    return has_lengths and t >= lengths[b]


@jit(inline="always")
def add_rows(a, b, out):
    """out (n,) = a + b."""
    for j in range(out.shape[0]):
        out[j] = a[j] + b[j]


@jit(inline="always")
def copy_row(src, dst):
    """dst (n,) = src (a loop: numba's ``dst[:] = src`` may copy through a new array)."""
    for j in range(dst.shape[0]):
        dst[j] = src[j]


@jit(inline="always")
def fill_row(dst, value):
    for j in range(dst.shape[0]):
        dst[j] = value


@jit(inline="always")
def sigmoid_in_place(v):
    """v (n,) = sigmoid(v)."""
    dt = v.dtype
    for j in range(v.shape[0]):
        v[j] = gm.sigmoid(v[j], dt)


@jit(inline="always")
def tanh_in_place(v):
    """v (n,) = tanh(v)."""
    dt = v.dtype
    for j in range(v.shape[0]):
        v[j] = gm.tanh(v[j], dt)


@jit(inline="always")
def put_grad(src, dst, accumulate):
    """dst (n,) (+)= src."""
    for j in range(dst.shape[0]):
        dst[j] = dst[j] + src[j] if accumulate else src[j]


@jit
def rnn_step_forward(p, t, hh, lengths, has_lengths, relu, h, y):
    """h (B, H) = tanh or relu(p[:, step t] + hh); y's step t = h (0 on padded rows)."""
    rows, hidden = h.shape
    zero = h.dtype.type(0.0)
    for b in range(rows):
        yr = y[b, t * hidden:(t + 1) * hidden]
        if padded(t, b, lengths, has_lengths):
            fill_row(yr, zero)
            continue
        hr = h[b]
        add_rows(p[b, t * hidden:(t + 1) * hidden], hh[b], hr)
        if relu:
            for j in range(hidden):
                hr[j] = max(hr[j], zero)
        else:
            tanh_in_place(hr)
        copy_row(hr, yr)


@jit
def rnn_step_backward(y, dy, t, lengths, has_lengths, relu, dh, dhh, dp, need_p, acc_p):
    """Gradients of step t from dh (B, H) + dy's step t, through y's step t (= h_t)."""
    rows, hidden = dh.shape
    zero = dh.dtype.type(0.0)
    one = dh.dtype.type(1.0)
    for b in range(rows):
        gr = dhh[b]
        if padded(t, b, lengths, has_lengths):
            fill_row(gr, zero)
        else:
            add_rows(dh[b], dy[b, t * hidden:(t + 1) * hidden], gr)
            yr = y[b, t * hidden:(t + 1) * hidden]
            for j in range(hidden):
                v = yr[j]
                gr[j] = (gr[j] if v > zero else zero) if relu else gr[j] * (one - v * v)
            fill_row(dh[b], zero)
        if need_p:
            put_grad(gr, dp[b, t * hidden:(t + 1) * hidden], acc_p)


@jit
def lstm_step_forward(p, t, hh, lengths, has_lengths, h, c, y, gates, c_prev, tanh_c):
    """i, f, g, o = sigma, sigma, tanh, sigma(p[:, step t] + hh); c = f c + i g; h = o tanh c."""
    rows, hidden = h.shape
    zero = h.dtype.type(0.0)
    g4 = 4 * hidden
    for b in range(rows):
        cr = c[b]
        copy_row(cr, c_prev[b])
        yr = y[b, t * hidden:(t + 1) * hidden]
        if padded(t, b, lengths, has_lengths):
            fill_row(yr, zero)
            continue
        gr = gates[b]
        add_rows(p[b, t * g4:(t + 1) * g4], hh[b], gr)
        gi = gr[:hidden]
        gf = gr[hidden:2 * hidden]
        gg = gr[2 * hidden:3 * hidden]
        go = gr[3 * hidden:]
        sigmoid_in_place(gr[:2 * hidden])
        tanh_in_place(gg)
        sigmoid_in_place(go)
        for j in range(hidden):
            cr[j] = gf[j] * cr[j] + gi[j] * gg[j]
        tr = tanh_c[b]
        copy_row(cr, tr)
        tanh_in_place(tr)
        hr = h[b]
        for j in range(hidden):
            hr[j] = go[j] * tr[j]
        copy_row(hr, yr)


@jit
def lstm_step_backward(dy, t, gates, c_prev, tanh_c, lengths, has_lengths, dh, dc, dhh, dp,
                       need_p, acc_p):
    """Gradients of step t: dc (B, H) carries the cell's gradient back through f."""
    rows, hidden = dh.shape
    zero = dh.dtype.type(0.0)
    one = dh.dtype.type(1.0)
    g4 = 4 * hidden
    for b in range(rows):
        dr = dhh[b]
        if padded(t, b, lengths, has_lengths):
            fill_row(dr, zero)
        else:
            gr = gates[b]
            gi = gr[:hidden]
            gf = gr[hidden:2 * hidden]
            gg = gr[2 * hidden:3 * hidden]
            go = gr[3 * hidden:]
            di = dr[:hidden]
            df = dr[hidden:2 * hidden]
            dg = dr[2 * hidden:3 * hidden]
            do = dr[3 * hidden:]
            tr = tanh_c[b]
            hr = dh[b]
            cr = dc[b]
            add_rows(hr, dy[b, t * hidden:(t + 1) * hidden], hr)  # dh_t, in place
            for j in range(hidden):  # o's gradient, then the cell's
                o = go[j]
                do[j] = hr[j] * tr[j] * o * (one - o)
                cr[j] += hr[j] * o * (one - tr[j] * tr[j])
            cp = c_prev[b]
            for j in range(hidden):
                i = gi[j]
                f = gf[j]
                g = gg[j]
                d = cr[j]
                di[j] = d * g * i * (one - i)
                df[j] = d * cp[j] * f * (one - f)
                dg[j] = d * i * (one - g * g)
                cr[j] = d * f
            fill_row(hr, zero)
        if need_p:
            put_grad(dr, dp[b, t * g4:(t + 1) * g4], acc_p)


@jit
def gru_step_forward(p, t, hh, lengths, has_lengths, h, y, gates, hh_n):
    """r, z = sigma(p_rz + hh_rz); n = tanh(p_n + r hh_n); h = (1 - z) n + z h."""
    rows, hidden = h.shape
    zero = h.dtype.type(0.0)
    one = h.dtype.type(1.0)
    g3 = 3 * hidden
    for b in range(rows):
        yr = y[b, t * hidden:(t + 1) * hidden]
        if padded(t, b, lengths, has_lengths):
            fill_row(yr, zero)
            continue
        gr = gates[b]
        pr = p[b, t * g3:(t + 1) * g3]
        hhr = hh[b]
        rz = gr[:2 * hidden]
        add_rows(pr[:2 * hidden], hhr[:2 * hidden], rz)
        sigmoid_in_place(rz)
        gr_ = gr[:hidden]
        gz = gr[hidden:2 * hidden]
        nr = gr[2 * hidden:]
        hn = hh_n[b]
        copy_row(hhr[2 * hidden:], hn)
        pn = pr[2 * hidden:]
        for j in range(hidden):
            nr[j] = pn[j] + gr_[j] * hn[j]
        tanh_in_place(nr)
        hr = h[b]
        for j in range(hidden):
            z = gz[j]
            hr[j] = (one - z) * nr[j] + z * hr[j]
        copy_row(hr, yr)


@jit
def gru_step_backward(dy, t, gates, hh_n, h_prev, lengths, has_lengths, dh, dhh, dp, need_p,
                      acc_p):
    """Gradients of step t; dh keeps the z path ``g z`` to the previous state."""
    rows, hidden = dh.shape
    zero = dh.dtype.type(0.0)
    one = dh.dtype.type(1.0)
    g3 = 3 * hidden
    for b in range(rows):
        dr = dhh[b]
        if padded(t, b, lengths, has_lengths):
            fill_row(dr, zero)
            if need_p and not acc_p:
                fill_row(dp[b, t * g3:(t + 1) * g3], zero)
            continue
        gr = gates[b]
        gr_ = gr[:hidden]
        gz = gr[hidden:2 * hidden]
        gn = gr[2 * hidden:]
        d_r = dr[:hidden]
        d_z = dr[hidden:2 * hidden]
        d_n = dr[2 * hidden:]
        hr = dh[b]
        add_rows(hr, dy[b, t * hidden:(t + 1) * hidden], hr)  # dh_t, in place
        hp = h_prev[b]
        hn = hh_n[b]
        for j in range(hidden):
            r = gr_[j]
            z = gz[j]
            n = gn[j]
            g = hr[j]
            dn = g * (one - z) * (one - n * n)
            d_r[j] = dn * hn[j] * r * (one - r)
            d_z[j] = g * (hp[j] - n) * z * (one - z)
            d_n[j] = dn  # (p's gradient; r scales the recurrent side below)
            hr[j] = g * z
        if need_p:
            put_grad(dr, dp[b, t * g3:(t + 1) * g3], acc_p)
        for j in range(hidden):
            d_n[j] *= gr_[j]
