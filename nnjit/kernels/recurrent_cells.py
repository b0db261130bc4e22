"""One time step of the recurrent cells, forward and backward: Elman RNN (tanh or ReLU), LSTM
and GRU, with PyTorch's equations and gate order, over the rows of the batch whose step t is
valid.

The scan (:mod:`nnjit.kernels.recurrent`) keeps the rows sorted by decreasing length, so the
rows valid at step t are the first ``n`` of ``order`` (PyTorch's packed sequences): the state
``h`` (and the LSTM's ``c``), ``hh`` = ``h_{t-1} W_hh^T + b_hh`` and the saved values are
(n, .) matrices in that order; row k of them is batch row ``b = order[k]`` of ``p`` (B, T * G),
every step's input projection (step t in columns ``t*G .. (t+1)*G``), and of the outputs ``y``
(B, T * H) and their gradients. G = gates * H; the saved values are ``gates`` (activated), the
LSTM's ``c_prev`` and ``tanh_c``, the GRU's ``hh_n`` (``W_hn h_{t-1} + b_hn``, which r
multiplies).

Backward: ``dh`` (and ``dc``) hold the gradient reaching the state after step t; the step adds
``dy``'s step-t columns, writes the pre-activation gradients of the recurrent product to ``dhh``
and those of the input projection to ``p``'s gradient ``dp`` (the same except the GRU's n gate,
which r scales on the recurrent side only), and leaves in ``dh`` the part of the previous
state's gradient that does not go through ``W_hh`` (the GRU's ``z`` path; 0 otherwise). The
scan adds ``dhh @ W_hh``.

Every loop runs over one row's 1-D views indexed from 0 (a computed 2-D column index, or a loop
starting at a runtime offset, keeps numba's negative-index wraparound test, and LLVM leaves the
loop scalar: sigmoid over a row's last quarter ran 10x slower than over its first) and reads or
writes few arrays; activations run in place on one view.
"""

from nnjit.kernels import gate_math as gm
from nnjit.kernels._jit import jit


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


@jit
def sigmoid_in_place(v):
    """v (n,) = sigmoid(v)."""
    dt = v.dtype
    for j in range(v.shape[0]):
        v[j] = gm.sigmoid(v[j], dt)


@jit
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
def rnn_step_forward(p, t, hh, order, relu, h, y):
    """h (n, H) = tanh or relu(p's step t + hh); y's step t = h."""
    rows, hidden = h.shape
    zero = h.dtype.type(0.0)
    for k in range(rows):
        b = int(order[k])
        hr = h[k]
        add_rows(p[b, t * hidden:(t + 1) * hidden], hh[k], hr)
        if relu:
            for j in range(hidden):
                hr[j] = max(hr[j], zero)
        else:
            tanh_in_place(hr)
        copy_row(hr, y[b, t * hidden:(t + 1) * hidden])


@jit
def rnn_step_backward(y, dy, t, order, relu, dh, dhh, dp, need_p, acc_p):
    """Gradients of step t from dh (n, H) + dy's step t, through y's step t (= h_t)."""
    rows, hidden = dh.shape
    zero = dh.dtype.type(0.0)
    one = dh.dtype.type(1.0)
    for k in range(rows):
        b = int(order[k])
        gr = dhh[k]
        add_rows(dh[k], dy[b, t * hidden:(t + 1) * hidden], gr)
        yr = y[b, t * hidden:(t + 1) * hidden]
        for j in range(hidden):
            v = yr[j]
            gr[j] = (gr[j] if v > zero else zero) if relu else gr[j] * (one - v * v)
        fill_row(dh[k], zero)
        if need_p:
            put_grad(gr, dp[b, t * hidden:(t + 1) * hidden], acc_p)


@jit
def lstm_step_forward(p, t, hh, order, h, c, y, gates, c_prev, tanh_c, write_y):
    """i, f, g, o = sigma, sigma, tanh, sigma(p's step t + hh); c = f c + i g; h = o tanh c;
    y's step t = h when ``write_y`` (not under a projection, which writes its own)."""
    rows, hidden = h.shape
    g4 = 4 * hidden
    for k in range(rows):
        b = int(order[k])
        cr = c[k]
        copy_row(cr, c_prev[k])
        gr = gates[k]
        add_rows(p[b, t * g4:(t + 1) * g4], hh[k], gr)
        gi = gr[:hidden]
        gf = gr[hidden:2 * hidden]
        gg = gr[2 * hidden:3 * hidden]
        go = gr[3 * hidden:]
        sigmoid_in_place(gr[:2 * hidden])
        tanh_in_place(gg)
        sigmoid_in_place(go)
        for j in range(hidden):
            cr[j] = gf[j] * cr[j] + gi[j] * gg[j]
        tr = tanh_c[k]
        copy_row(cr, tr)
        tanh_in_place(tr)
        hr = h[k]
        for j in range(hidden):
            hr[j] = go[j] * tr[j]
        if write_y:
            copy_row(hr, y[b, t * hidden:(t + 1) * hidden])


@jit
def lstm_step_backward(dy, t, order, gates, c_prev, tanh_c, dh, dc, dhh, dp, need_p, acc_p,
                       add_dy):
    """Gradients of step t: dc (n, H) carries the cell's gradient back through f; dh (n, H)
    the gradient of h_t, plus dy's step t when ``add_dy`` (not under a projection)."""
    rows, hidden = dh.shape
    zero = dh.dtype.type(0.0)
    one = dh.dtype.type(1.0)
    g4 = 4 * hidden
    for k in range(rows):
        b = int(order[k])
        dr = dhh[k]
        gr = gates[k]
        gi = gr[:hidden]
        gf = gr[hidden:2 * hidden]
        gg = gr[2 * hidden:3 * hidden]
        go = gr[3 * hidden:]
        di = dr[:hidden]
        df = dr[hidden:2 * hidden]
        dg = dr[2 * hidden:3 * hidden]
        do = dr[3 * hidden:]
        tr = tanh_c[k]
        hr = dh[k]
        cr = dc[k]
        if add_dy:
            add_rows(hr, dy[b, t * hidden:(t + 1) * hidden], hr)  # dh_t, in place
        for j in range(hidden):  # o's gradient, then the cell's
            o = go[j]
            do[j] = hr[j] * tr[j] * o * (one - o)
            cr[j] += hr[j] * o * (one - tr[j] * tr[j])
        cp = c_prev[k]
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
def gru_step_forward(p, t, hh, order, h, y, gates, hh_n):
    """r, z = sigma(p_rz + hh_rz); n = tanh(p_n + r hh_n); h = (1 - z) n + z h: three loops a
    row, each reading and writing few views (module doc)."""
    rows, hidden = h.shape
    dt = h.dtype
    one = dt.type(1.0)
    g3 = 3 * hidden
    for k in range(rows):
        b = int(order[k])
        gr = gates[k]
        pr = p[b, t * g3:(t + 1) * g3]
        hhr = hh[k]
        rz = gr[:2 * hidden]
        prz = pr[:2 * hidden]
        hrz = hhr[:2 * hidden]
        for j in range(2 * hidden):
            rz[j] = gm.sigmoid(prz[j] + hrz[j], dt)
        gr_ = gr[:hidden]
        gz = gr[hidden:2 * hidden]
        nr = gr[2 * hidden:]
        hn = hh_n[k]
        hhn = hhr[2 * hidden:]
        pn = pr[2 * hidden:]
        for j in range(hidden):
            v = hhn[j]
            hn[j] = v
            nr[j] = gm.tanh(pn[j] + gr_[j] * v, dt)
        hr = h[k]
        yr = y[b, t * hidden:(t + 1) * hidden]
        for j in range(hidden):
            z = gz[j]
            v = (one - z) * nr[j] + z * hr[j]
            hr[j] = v
            yr[j] = v


@jit
def gru_step_backward(dy, t, order, gates, hh_n, h_prev, dh, dhh, dp, need_p, acc_p):
    """Gradients of step t; dh keeps the z path ``g z`` to the previous state."""
    rows, hidden = dh.shape
    one = dh.dtype.type(1.0)
    g3 = 3 * hidden
    for k in range(rows):
        b = int(order[k])
        dr = dhh[k]
        gr = gates[k]
        gr_ = gr[:hidden]
        gz = gr[hidden:2 * hidden]
        gn = gr[2 * hidden:]
        d_r = dr[:hidden]
        d_z = dr[hidden:2 * hidden]
        d_n = dr[2 * hidden:]
        hr = dh[k]
        add_rows(hr, dy[b, t * hidden:(t + 1) * hidden], hr)  # dh_t, in place
        hp = h_prev[k]
        hn = hh_n[k]
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
