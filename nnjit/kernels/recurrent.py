"""The scan of a recurrent layer over time, forward and backpropagation through time, for one
direction of one layer; the cells' steps are :mod:`nnjit.kernels.recurrent_cells`.

The input projections of every step arrive computed (``p``, one product over all steps: the
family's RNN_INPUT op); a step adds ``h_{t-1} W_hh^T + b_hh`` (one product per step) and runs
the cell. Backward runs the steps in the other order, one ``dhh_t @ W_hh`` per step for the
state's gradient, then ``W_hh``'s and ``b_hh``'s gradients as one product over every step.

Variable lengths as PyTorch's packed sequences: the rows are taken in order of decreasing
length (``order``, a stable sort), so the rows whose step t is valid are the first ``n_t`` and
every product and cell runs on them alone; padded steps cost nothing (their outputs and input
gradients are zeroed) and the state goes past them unchanged. The state lives in that order in
the scratch span and goes back to the batch's order at the end (``h_n``, ``c_n``, the initial
state's gradient). Without lengths the order is the identity and every row is valid.

``saved`` (flat) holds per step its valid rows' values, packed: step t's block starts at row
``sum_b min(lengths[b], t)`` (:func:`packed_offset`) of each section, and the sections are
T*B rows apart. First the state entering each step (W wide: H, or an LSTM's projection P; with
``dhh`` of every step, packed the same way, the weight gradient's (R, W) and (R, G) operands,
R the valid steps of all rows), then per kind (H wide): LSTM ``c_prev`` (H), gates (4H),
``tanh c`` (H) and with a projection the unprojected ``o tanh c`` (H, W_hr's gradient's
operand); GRU gates (3H), ``hh_n`` (H): :func:`saved_size`.

The scratch span holds forward ``hh`` (2*B*G), ``W_hh`` packed or transposed (G*W), the sorted
state ``h`` (B*W), ``c`` (B*H), the order (B) and W_hr^T (P*H); backward ``dhh`` of every step
(T*B*G), ``dh``, ``dc``, ``dhh @ W_hh`` (B*(2W+H)), W_hh packed or the weight gradient's
product (G*W), the order (B), and with a projection the projection's gradient of every step
(T*B*P), the unprojected one (B*H) and W_hr's gradient's product (P*H): :func:`scratch_size`.

Which products (float32, 1 thread, this project's AVX-512 machine; docs/performance.md): a
step's ``h_{t-1} W_hh^T`` and ``dhh W_hh`` through :mod:`recurrent_product` with W_hh packed
once per scan when W (and so G) is a multiple of the lanes (B=32 H=128 G=512: ~38 us, ~110
GFLOP/s, against OpenBLAS's ~62 us: it repacks W_hh every step), else ``h @ W_hh^T`` on a
transposed copy made once per scan. Weight gradients (W_hh's over every step, the input
projection's W_ih over every row) as ``(x^T dy)^T`` through
:func:`recurrent_product.weight_product` when G is a multiple of the lanes, dy read in place
in chunks of :data:`WEIGHT_CHUNK_ROWS` rows that stay in L2 (GRU 6400 x 192 x 64: ~1.7 ms
against OpenBLAS's ~3.0; the input's 6400 x 192 x 8: ~0.2 against ~0.85; LSTM 1120 x 512 x
128: 1.45 against 1.76), else through BLAS, as ``(x^T dy)^T`` for at least
:data:`TRANSPOSED_WEIGHT_ROWS` rows (6400 rows: G=192 H=64 3.5 ms against 5.0; at 1600 rows
``dy^T x`` stays faster: G=512 H=128 4.2 against 4.6).
"""

import numpy as np

from nnjit.kernels import recurrent_cells as rc
from nnjit.kernels import recurrent_product as rp
from nnjit.kernels._jit import jit
from nnjit.kernels.dense import add_into, dense_backward_bias
from nnjit.kernels.views import view1d, view2d

RNN_TANH, RNN_RELU, LSTM, GRU = 0, 1, 2, 3
TRANSPOSED_WEIGHT_ROWS = 4096
WEIGHT_CHUNK_ROWS = 256
#: gate blocks of H per kind, and H-wide blocks saved per row and step
GATES = (1, 1, 4, 3)
SAVED = (1, 1, 7, 5)


def scratch_size(g: int, rows: int, steps: int, hidden: int, width: int = 0) -> int:
    """Scratch elements a scan of ``rows`` rows, ``g`` gate values per row and step needs;
    ``width``: the state's (the LSTM's projection, ``proj_size``), else 0 (module doc)."""
    proj = width * hidden if width else 0
    width = width or hidden
    forward = 2 * rows * g + g * width + rows * width + rows * hidden + proj
    backward = steps * rows * g + 2 * rows * width + rows * hidden + g * width + (
        steps * rows * width + rows * hidden + proj if proj else 0)
    return max(forward, backward) + rows


def saved_size(kind: int, steps: int, hidden: int, width: int = 0) -> int:
    """Saved elements per row (module doc); ``width`` as :func:`scratch_size`'s."""
    extra = (width + hidden) if width else hidden
    return steps * ((SAVED[kind] - 1) * hidden + extra)


@jit
def lengths_valid(lengths, steps):
    """Whether every length is in 1..steps (PyTorch refuses a length of 0)."""
    for b in range(lengths.shape[0]):
        if not 1 <= lengths[b] <= steps:
            return False
    return True


@jit
def sort_rows(lengths, has_lengths, order):
    """order (B,) = the rows by decreasing length, ties in row order (the identity without
    lengths); indices held as floats (the scratch span's dtype: exact below 2**24)."""
    for k in range(order.shape[0]):
        order[k] = k
    if not has_lengths:
        return
    for k in range(1, order.shape[0]):  # insertion sort: stable, no allocation
        v = order[k]
        length = lengths[int(v)]
        j = k - 1
        while j >= 0 and lengths[int(order[j])] < length:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = v


@jit(inline="always")
def valid_rows(lengths, has_lengths, order, t):
    """How many rows (a prefix of ``order``) have a valid step t."""
    rows = order.shape[0]
    if not has_lengths:
        return rows
    n = 0
    while n < rows and lengths[int(order[n])] > t:
        n += 1
    return n


@jit(inline="always")
def packed_offset(lengths, has_lengths, rows, t):
    """Valid steps before step t, over every row: where step t's packed rows start."""
    if not has_lengths:
        return t * rows
    total = 0
    for b in range(rows):
        total += min(max(lengths[b], 0), t)
    return total


@jit
def copy_into(src, dst, zero_out=False):
    """dst (R, C) = src, or 0 with ``zero_out``."""
    zero = dst.dtype.type(0.0)
    for r in range(dst.shape[0]):
        for j in range(dst.shape[1]):
            dst[r, j] = zero if zero_out else src[r, j]


@jit
def clear_padded(order, n, t, width, out, clear):
    """Zero step t's ``width`` columns of ``out`` (B, T*width) for the rows order[n:]."""
    if clear:
        zero = out.dtype.type(0.0)
        for k in range(n, order.shape[0]):
            rc.fill_row(out[int(order[k]), t * width:(t + 1) * width], zero)


@jit
def scan_forward(kind, p, w_hh, b_hh, has_bias, state, has_state, lengths, has_lengths,
                 y, h_n, c_n, saved, scratch, steps, reverse, w_hr, proj):
    """Run ``steps`` steps (last to first when ``reverse``) from ``state`` (B, W+H: h | c) or
    zeros: y (B, T*W) the outputs, h_n (B, W) and c_n (B, H) the final states, W = H, or P with
    an LSTM's projection ``w_hr`` (P, H) (``proj``) (module doc)."""
    rows, width = h_n.shape
    g = w_hh.shape[0]
    hidden = g // GATES[kind]
    cell = kind == LSTM
    at = 2 * rows * g
    w_t = view2d(scratch, at, width, g)
    h_at = at + g * width
    c_at = h_at + rows * width
    order = view1d(scratch, c_at + rows * hidden, rows)
    wr = view1d(scratch, c_at + rows * hidden + rows, width * hidden if proj else 0)
    sort_rows(lengths, has_lengths, order)
    h = view2d(scratch, h_at, rows, width)
    c = view2d(scratch, c_at, rows, hidden)
    zero = h.dtype.type(0.0)
    for k in range(rows):
        b = int(order[k])
        for j in range(width):
            h[k, j] = state[b, j] if has_state else zero
        for j in range(hidden):
            c[k, j] = state[b, width + j] if has_state and cell else zero
    packed = rp.fits(scratch, width) and rp.fits(scratch, g)
    if packed:
        rp.pack(w_hh, True, view1d(scratch, at, g * width))
    else:
        copy_transposed(w_hh, w_t)
    if proj:
        copy_transposed(w_hr, view2d(wr, 0, hidden, width))
    section = steps * rows * hidden
    base = steps * rows * width
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        n = valid_rows(lengths, has_lengths, order, t)
        clear_padded(order, n, t, width, y, True)
        if n == 0:
            continue
        row = packed_offset(lengths, has_lengths, rows, t)
        off = row * hidden
        hv = view2d(scratch, h_at, n, width)
        copy_into(hv, view2d(saved, row * width, n, width))
        hh = view2d(scratch, 0, n, g)
        if packed:
            rp.product(hv, view1d(scratch, at, g * width), hh,
                       rp.BIAS if has_bias else rp.ZEROS, b_hh)
        else:
            np.dot(hv, w_t, hh)
            if has_bias:
                for k in range(n):
                    rc.add_rows(hh[k], b_hh, hh[k])
        if kind == LSTM:
            raw = view2d(saved, base + 6 * section + off, n, hidden) if proj else hv
            rc.lstm_step_forward(p, t, hh, order, raw, view2d(scratch, c_at, n, hidden), y,
                                 view2d(saved, base + section + 4 * off, n, 4 * hidden),
                                 view2d(saved, base + off, n, hidden),
                                 view2d(saved, base + 5 * section + off, n, hidden), not proj)
            if proj:  # h = raw @ W_hr^T; y's step t = h
                np.dot(raw, view2d(wr, 0, hidden, width), hv)
                for k in range(n):
                    rc.copy_row(hv[k], y[int(order[k]), t * width:(t + 1) * width])
        elif kind == GRU:
            rc.gru_step_forward(p, t, hh, order, hv, y,
                                view2d(saved, base + 3 * off, n, 3 * hidden),
                                view2d(saved, base + 3 * section + off, n, hidden))
        else:
            rc.rnn_step_forward(p, t, hh, order, kind == RNN_RELU, hv, y)
    for k in range(rows):
        b = int(order[k])
        rc.copy_row(h[k], h_n[b])
        if cell:
            rc.copy_row(c[k], c_n[b])


@jit
def copy_transposed(w, out):
    """out (C, R) = w (R, C).T."""
    for q in range(w.shape[0]):
        for j in range(w.shape[1]):
            out[j, q] = w[q, j]


@jit
def scan_backward(kind, w_hh, y, dy, dh_n, dc_n, lengths, has_lengths, saved, scratch, steps,
                  reverse, dp, need_p, acc_p, dw, need_w, acc_w, db, need_b, acc_b, dstate,
                  need_state, w_hr, proj, dw_hr):
    """Backpropagation through the steps of :func:`scan_forward`: from the outputs' gradient
    dy and the final states' dh_n (B, W), dc_n (B, H), the gradients of p (B, T*G), W_hh
    (G, W), b_hh (G,) and the initial state (B, W+H), each written or added (``acc_*``) when
    needed, and with ``proj`` W_hr's (P, H), written (its scan is its only reader)."""
    rows, width = dh_n.shape
    g = w_hh.shape[0]
    hidden = g // GATES[kind]
    cell = kind == LSTM
    at = steps * rows * g
    dh = view2d(scratch, at, rows, width)
    dc = view2d(scratch, at + rows * width, rows, hidden)
    dnew_at = at + rows * width + rows * hidden
    wp_at = dnew_at + rows * width
    order = view1d(scratch, wp_at + g * width, rows)
    dhp_at = wp_at + g * width + rows  # proj: dh of every step (as dhh), raw's grad, W_hr
    raw_at = dhp_at + steps * rows * width
    wr = view1d(scratch, raw_at + rows * hidden, width * hidden if proj else 0)
    sort_rows(lengths, has_lengths, order)
    zero = dh.dtype.type(0.0)
    for k in range(rows):
        b = int(order[k])
        for j in range(width):
            dh[k, j] = dh_n[b, j]
        for j in range(hidden):
            dc[k, j] = dc_n[b, j] if cell else zero
    section = steps * rows * hidden
    base = steps * rows * width
    w_p = view1d(scratch, wp_at, g * width)
    packed = rp.fits(scratch, width) and rp.fits(scratch, g)
    if packed:
        rp.pack(w_hh, False, w_p)
    for s in range(steps):
        t = s if reverse else steps - 1 - s
        n = valid_rows(lengths, has_lengths, order, t)
        clear_padded(order, n, t, g, dp, need_p and not acc_p)
        if n == 0:
            continue
        row = packed_offset(lengths, has_lengths, rows, t)
        off = row * hidden
        dhh = view2d(scratch, row * g, n, g)
        dhv = view2d(scratch, at, n, width)
        if kind == LSTM:
            draw = dhv
            if proj:
                draw = view2d(scratch, raw_at, n, hidden)
                dhp = view2d(scratch, dhp_at + row * width, n, width)
                for k in range(n):  # the projection's gradient (kept for W_hr's), then raw's
                    rc.add_rows(dhv[k], dy[int(order[k]), t * width:(t + 1) * width], dhp[k])
                np.dot(dhp, w_hr, draw)
            rc.lstm_step_backward(dy, t, order, view2d(saved, base + section + 4 * off, n, g),
                                  view2d(saved, base + off, n, hidden),
                                  view2d(saved, base + 5 * section + off, n, hidden), draw,
                                  view2d(scratch, at + rows * width, n, hidden), dhh, dp,
                                  need_p, acc_p, not proj)
        elif kind == GRU:
            rc.gru_step_backward(dy, t, order, view2d(saved, base + 3 * off, n, g),
                                 view2d(saved, base + 3 * section + off, n, hidden),
                                 view2d(saved, row * width, n, hidden), dhv, dhh, dp, need_p,
                                 acc_p)
        else:
            rc.rnn_step_backward(y, dy, t, order, kind == RNN_RELU, dhv, dhh, dp, need_p,
                                 acc_p)
        # dh (+)= dhh @ W_hh (an LSTM's dh is 0 after its cell, or holds the projection's)
        if packed:
            rp.product(dhh, w_p, dhv, rp.ZEROS if proj else rp.ADD, w_p)
        elif proj:
            np.dot(dhh, w_hh, dhv)
        else:
            dnew = view2d(scratch, dnew_at, n, width)
            np.dot(dhh, w_hh, dnew)
            add_into(dnew, dhv)
    if need_state:
        for k in range(rows):
            b = int(order[k])
            rc.copy_row(dh[k], dstate[b, :width])
            rc.copy_row(dc[k], dstate[b, width:])
    total = packed_offset(lengths, has_lengths, rows, steps)
    dhh_all = view2d(scratch, 0, total, g)
    if need_w:
        if total > 0:
            weight_grad(dhh_all, view2d(saved, 0, total, width), dw, w_p, acc_w)
        elif not acc_w:
            copy_into(dw, dw, zero_out=True)
    if need_b:
        dense_backward_bias(dhh_all, db, acc_b)
    if proj:
        if total > 0:
            weight_grad(view2d(scratch, dhp_at, total, width),
                        view2d(saved, base + 6 * section, total, hidden), dw_hr, wr, False)
        else:
            copy_into(dw_hr, dw_hr, zero_out=True)


@jit
def weight_grad(dy, x, dw, scratch, accumulate):
    """dw (O, I) (+)= dy (R, O).T @ x (R, I), as ``(x^T dy)^T`` through
    :func:`recurrent_product.weight_product` when O is a multiple of the lanes, else through
    BLAS for R >= TRANSPOSED_WEIGHT_ROWS (module doc); ``scratch`` (>= O * I elements, 1-D)."""
    cols, inner = dw.shape
    tiled = rp.fits(scratch, cols)
    if tiled or dy.shape[0] >= TRANSPOSED_WEIGHT_ROWS:
        tmp = view2d(scratch, 0, inner, cols)
        if tiled:
            rp.weight_product(x, dy, tmp, False, WEIGHT_CHUNK_ROWS)
        else:
            np.dot(x.T, dy, tmp)
        for o in range(cols):
            for k in range(inner):
                dw[o, k] = dw[o, k] + tmp[k, o] if accumulate else tmp[k, o]
        return
    tmp = view2d(scratch, 0, cols, inner)
    if accumulate:
        np.dot(dy.T, x, tmp)
        add_into(tmp, dw)
    else:
        np.dot(dy.T, x, dw)


@jit
def copy_state(h0, c0, has_c, col, width, out):
    """out (B, W+H) = [h0 (B, K*W)[:, col:col + W] | c0 (B, K*H)'s same block, or zeros]
    (W = H but for an LSTM's projection)."""
    rows = out.shape[0]
    hidden = out.shape[1] - width
    at = col // width * hidden
    zero = out.dtype.type(0.0)
    for b in range(rows):  # (a carried state's rows past its own: zeros)
        there = b < h0.shape[0]
        for j in range(width):
            out[b, j] = h0[b, col + j] if there else zero
        for j in range(hidden):
            out[b, width + j] = c0[b, at + j] if has_c and there else zero


@jit
def carry_state(final, col, carried):
    """carried (R, K*W)[:, col:col + W] = final (B, W) for the first min(B, R) rows: a stateful
    layer's final state, its next batch's initial one."""
    width = final.shape[1]
    for b in range(min(final.shape[0], carried.shape[0])):
        rc.copy_row(final[b], carried[b, col:col + width])


@jit
def copy_state_grad(dout, first, size, col, dx, accumulate):
    """dx (B, K*size)[:, col:col + size] (+)= dout (B, W+H)[:, first:first + size]; without
    ``accumulate`` (the first writer) the rest of dx is zeroed."""
    rows = dout.shape[0]
    for b in range(rows):
        if not accumulate:
            for j in range(dx.shape[1]):
                dx[b, j] = dx.dtype.type(0.0)
        for j in range(size):
            dx[b, col + j] += dout[b, first + j]


@jit
def step_cat(a, b, out, steps):
    """out (B, T*(F+K)) = a (B, T*F) and b (B, T*K) side by side at every step."""
    rows = a.shape[0]
    fa = a.shape[1] // steps
    fb = b.shape[1] // steps
    for r in range(rows):
        for t in range(steps):
            base = t * (fa + fb)
            for j in range(fa):
                out[r, base + j] = a[r, t * fa + j]
            for j in range(fb):
                out[r, base + fa + j] = b[r, t * fb + j]


@jit
def step_cat_grad(dout, steps, da, need_a, acc_a, db, need_b, acc_b):
    """The gradients of :func:`step_cat`'s inputs, each written or added when needed."""
    rows = da.shape[0]
    fa = da.shape[1] // steps
    fb = db.shape[1] // steps
    for r in range(rows):
        for t in range(steps):
            base = t * (fa + fb)
            if need_a:
                for j in range(fa):
                    g = dout[r, base + j]
                    da[r, t * fa + j] = da[r, t * fa + j] + g if acc_a else g
            if need_b:
                for j in range(fb):
                    g = dout[r, base + fa + j]
                    db[r, t * fb + j] = db[r, t * fb + j] + g if acc_b else g
