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
T*B rows apart. First the state entering each step (with ``dhh`` of every step, packed the same
way, the weight gradient's (R, H) and (R, G) operands, R the valid steps of all rows), then per
kind: LSTM ``c_prev`` (H), gates (4H), ``tanh c`` (H); GRU gates (3H), ``hh_n`` (H).

The scratch span holds forward ``hh`` and the dense forward's spare (2*B*G), ``W_hh^T`` (G*H),
the sorted state ``h``, ``c`` (2*B*H); backward ``dhh`` of every step (T*B*G), ``dh``, ``dc``,
the product ``dhh @ W_hh`` (3*B*H) and the weight gradient's product (G*H); and the order (B):
:func:`scratch_size`.

Which products (measured, float32, 1 thread, OpenBLAS's AVX-512 kernels): a step's
``h_{t-1} W_hh^T`` for H <= 64 as ``h @ W_hh^T`` on a transposed copy made once per call (B=64
H=64 G=192: 14.7 us against the dense forward's 21.1; B=32 H=64 G=256: 10.6 against 30.5); for
larger H the dense forward's own choice (B=32 H=128 G=512: 57.9 against 62.2). Weight
gradients of products over at least :data:`TRANSPOSED_WEIGHT_ROWS` rows as ``(x^T dy)^T``
(6400 rows: G=192 H=64 3.5 ms against 5.0, H=8 0.71 against 1.45; at 1600 rows ``dy^T x``
stays faster: G=512 H=128 4.2 against 4.6).
"""

import numpy as np

from nnjit.kernels import recurrent_cells as rc
from nnjit.kernels import recurrent_product as rp
from nnjit.kernels._jit import jit
from nnjit.kernels.dense import add_into, dense_backward_bias, dense_forward
from nnjit.kernels.views import view1d, view2d

RNN_TANH, RNN_RELU, LSTM, GRU = 0, 1, 2, 3
TRANSPOSED_MAX_HIDDEN = 64
TRANSPOSED_WEIGHT_ROWS = 4096
#: gate blocks of H per kind, and H-wide blocks saved per row and step
GATES = (1, 1, 4, 3)
SAVED = (1, 1, 7, 5)


def scratch_size(g: int, rows: int, steps: int, hidden: int) -> int:
    """Scratch elements a scan of ``rows`` rows, ``g`` gate values per row and step needs
    (module doc)."""
    return max(2 * rows * g + g * hidden + 2 * rows * hidden,
               steps * rows * g + 3 * rows * hidden + g * hidden) + rows


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
                 y, h_n, c_n, saved, scratch, steps, reverse, mode):
    """Run ``steps`` steps (last to first when ``reverse``) from ``state`` (B, 2H: h | c) or
    zeros: y (B, T*H) the outputs, h_n and c_n (B, H) the final states (module doc)."""
    rows, hidden = h_n.shape
    g = w_hh.shape[0]
    cell = kind == LSTM
    spare = view1d(scratch, rows * g, rows * g)
    at = 2 * rows * g
    w_t = view2d(scratch, at, hidden, g)
    h = view2d(scratch, at + g * hidden, rows, hidden)
    c = view2d(scratch, at + g * hidden + rows * hidden, rows, hidden)
    order = view1d(scratch, at + g * hidden + 2 * rows * hidden, rows)
    sort_rows(lengths, has_lengths, order)
    zero = h.dtype.type(0.0)
    for k in range(rows):
        b = int(order[k])
        for j in range(hidden):
            h[k, j] = state[b, j] if has_state else zero
            c[k, j] = state[b, hidden + j] if has_state and cell else zero
    packed = rp.fits(scratch, hidden)
    transposed = hidden <= TRANSPOSED_MAX_HIDDEN and not packed
    if packed:
        rp.pack(w_hh, True, view1d(scratch, at, g * hidden))
    elif transposed:
        for q in range(g):
            for j in range(hidden):
                w_t[j, q] = w_hh[q, j]
    section = steps * rows * hidden
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        n = valid_rows(lengths, has_lengths, order, t)
        clear_padded(order, n, t, hidden, y, True)
        if n == 0:
            continue
        off = packed_offset(lengths, has_lengths, rows, t) * hidden
        hv = view2d(scratch, at + g * hidden, n, hidden)
        copy_into(hv, view2d(saved, off, n, hidden))
        hh = view2d(scratch, 0, n, g)
        if packed:
            rp.product(hv, view1d(scratch, at, g * hidden), hh,
                       rp.BIAS if has_bias else rp.ZEROS, b_hh)
        elif transposed:
            np.dot(hv, w_t, hh)
            if has_bias:
                for k in range(n):
                    rc.add_rows(hh[k], b_hh, hh[k])
        else:
            dense_forward(hv, w_hh, b_hh, hh, has_bias, mode, spare)
        if kind == LSTM:
            rc.lstm_step_forward(p, t, hh, order, hv,
                                 view2d(scratch, at + g * hidden + rows * hidden, n, hidden), y,
                                 view2d(saved, 2 * section + 4 * off, n, 4 * hidden),
                                 view2d(saved, section + off, n, hidden),
                                 view2d(saved, 6 * section + off, n, hidden))
        elif kind == GRU:
            rc.gru_step_forward(p, t, hh, order, hv, y,
                                view2d(saved, section + 3 * off, n, 3 * hidden),
                                view2d(saved, 4 * section + off, n, hidden))
        else:
            rc.rnn_step_forward(p, t, hh, order, kind == RNN_RELU, hv, y)
    for k in range(rows):
        b = int(order[k])
        rc.copy_row(h[k], h_n[b])
        if cell:
            rc.copy_row(c[k], c_n[b])


@jit
def scan_backward(kind, w_hh, y, dy, dh_n, dc_n, lengths, has_lengths, saved, scratch, steps,
                  reverse, dp, need_p, acc_p, dw, need_w, acc_w, db, need_b, acc_b, dstate,
                  need_state):
    """Backpropagation through the steps of :func:`scan_forward`: from the outputs' gradient
    dy and the final states' dh_n, dc_n (B, H), the gradients of p (B, T*G), W_hh (G, H),
    b_hh (G,) and the initial state (B, 2H), each written or added (``acc_*``) when needed."""
    rows, hidden = dh_n.shape
    g = w_hh.shape[0]
    cell = kind == LSTM
    at = steps * rows * g
    dh = view2d(scratch, at, rows, hidden)
    dc = view2d(scratch, at + rows * hidden, rows, hidden)
    order = view1d(scratch, at + 3 * rows * hidden + g * hidden, rows)
    sort_rows(lengths, has_lengths, order)
    zero = dh.dtype.type(0.0)
    for k in range(rows):
        b = int(order[k])
        for j in range(hidden):
            dh[k, j] = dh_n[b, j]
            dc[k, j] = dc_n[b, j] if cell else zero
    section = steps * rows * hidden
    w_p = view1d(scratch, at + 3 * rows * hidden, g * hidden)
    packed = rp.fits(scratch, hidden)
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
        dhv = view2d(scratch, at, n, hidden)
        if kind == LSTM:
            rc.lstm_step_backward(dy, t, order, view2d(saved, 2 * section + 4 * off, n, g),
                                  view2d(saved, section + off, n, hidden),
                                  view2d(saved, 6 * section + off, n, hidden), dhv,
                                  view2d(scratch, at + rows * hidden, n, hidden), dhh, dp, need_p,
                                  acc_p)
        elif kind == GRU:
            rc.gru_step_backward(dy, t, order, view2d(saved, section + 3 * off, n, g),
                                 view2d(saved, 4 * section + off, n, hidden),
                                 view2d(saved, off, n, hidden), dhv, dhh, dp, need_p, acc_p)
        else:
            rc.rnn_step_backward(y, dy, t, order, kind == RNN_RELU, dhv, dhh, dp, need_p,
                                 acc_p)
        if packed:
            rp.product(dhh, w_p, dhv, rp.ADD, w_p)
        else:
            dnew = view2d(scratch, at + 2 * rows * hidden, n, hidden)
            np.dot(dhh, w_hh, dnew)
            add_into(dnew, dhv)
    if need_state:
        for k in range(rows):
            b = int(order[k])
            rc.copy_row(dh[k], dstate[b, :hidden])
            rc.copy_row(dc[k], dstate[b, hidden:])
    total = packed_offset(lengths, has_lengths, rows, steps)
    dhh_all = view2d(scratch, 0, total, g)
    if need_w:
        if total > 0:
            weight_grad(dhh_all, view2d(saved, 0, total, hidden), dw,
                        view1d(scratch, at + 3 * rows * hidden, g * hidden), acc_w)
        elif not acc_w:
            copy_into(dw, dw, zero_out=True)
    if need_b:
        dense_backward_bias(dhh_all, db, acc_b)


@jit
def weight_grad(dy, x, dw, scratch, accumulate):
    """dw (O, I) (+)= dy (R, O).T @ x (R, I); ``scratch`` (>= O * I elements, 1-D). For O a
    multiple of the lanes as ``(x^T dy)^T`` through :func:`recurrent_product.reduce_product`,
    else through BLAS, as ``(x^T dy)^T`` for R >= TRANSPOSED_WEIGHT_ROWS (module doc)."""
    cols, inner = dw.shape
    if rp.fits(scratch, cols) or dy.shape[0] >= TRANSPOSED_WEIGHT_ROWS:
        tmp = view2d(scratch, 0, inner, cols)
        if rp.fits(scratch, cols):
            rp.reduce_product(x, dy, tmp, False)
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
def copy_state(h0, c0, has_c, col, out):
    """out (B, 2H) = [h0 (B, K*H)[:, col:col + H] | c0's same block, or zeros]."""
    rows, width = out.shape
    hidden = width // 2
    zero = out.dtype.type(0.0)
    for b in range(rows):
        for j in range(hidden):
            out[b, j] = h0[b, col + j]
            out[b, hidden + j] = c0[b, col + j] if has_c else zero


@jit
def copy_state_grad(dout, first, col, dx, accumulate):
    """dx (B, K*H)[:, col:col + H] (+)= dout (B, 2H)[:, first:first + H]; without
    ``accumulate`` (the first writer) the rest of dx is zeroed."""
    rows, width = dout.shape
    hidden = width // 2
    for b in range(rows):
        if not accumulate:
            for j in range(dx.shape[1]):
                dx[b, j] = dx.dtype.type(0.0)
        for j in range(hidden):
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
