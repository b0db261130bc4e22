"""The scan of a recurrent layer over time, forward and backpropagation through time, for one
direction of one layer; the cells' steps are :mod:`nnjit.kernels.recurrent_cells`.

The input projections of every step arrive computed (``p``, one product over all steps: the
family's RNN_INPUT op); a step adds ``h_{t-1} W_hh^T + b_hh`` (one product per step, the dense
forward's choice of product for its shape) and runs the cell. Backward runs the steps in the
other order, one ``dhh_t @ W_hh`` per step for the state's gradient, then ``W_hh``'s and
``b_hh``'s gradients as one product over every step's saved state.

``saved`` (flat, B*T*k*H values for the current batch of B rows) holds, time-major so every
step's block is a contiguous (B, .) matrix: the state entering each step (``T*B*H``: with
``dhh`` of every step, (T*B, H) and (T*B, G), the weight gradient's product), then per kind:
LSTM ``c_prev`` (T*B*H), gates (T*B*4H), ``tanh c`` (T*B*H); GRU gates (T*B*3H), ``hh_n``
(T*B*H). The scratch span holds ``hh`` and the dense forward's spare (2*B*G) forward, and
``dhh`` of every step (T*B*G), ``dh``, ``dc``, the product ``dhh @ W_hh`` (3*B*H) and the
weight gradient's transposed product (G*H) backward; forward also ``W_hh^T`` (G*H) for the
steps' products when H is at most :data:`TRANSPOSED_MAX_HIDDEN`: :func:`scratch_size`.

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
    return 2 * rows * g + steps * rows * g + 3 * rows * hidden + g * hidden


@jit
def lengths_valid(lengths, steps):
    """Whether every length is in 1..steps (PyTorch refuses a length of 0)."""
    for b in range(lengths.shape[0]):
        if not 1 <= lengths[b] <= steps:
            return False
    return True


@jit
def initial_state(state, has_state, h, c, has_cell):
    """h (B, H) = the first half of ``state`` (B, 2H) or zeros; c (an LSTM's, ``has_cell``)
    the second half."""
    rows, hidden = h.shape
    zero = h.dtype.type(0.0)
    for b in range(rows):
        for j in range(hidden):
            h[b, j] = state[b, j] if has_state else zero
            if has_cell:
                c[b, j] = state[b, hidden + j] if has_state else zero


@jit
def scan_forward(kind, p, w_hh, b_hh, has_bias, state, has_state, lengths, has_lengths,
                 y, h, c, saved, scratch, steps, reverse, mode):
    """Run ``steps`` steps (last to first when ``reverse``) from ``state`` (or zeros): y
    (B, T*H) the outputs, h and c (B, H) the final states (module doc)."""
    rows, hidden = h.shape
    g = w_hh.shape[0]
    block = rows * hidden
    initial_state(state, has_state, h, c, kind == LSTM)
    hh = view2d(scratch, 0, rows, g)
    spare = view1d(scratch, rows * g, rows * g)
    w_t = view2d(scratch, 2 * rows * g, hidden, g)
    transposed = hidden <= TRANSPOSED_MAX_HIDDEN
    if transposed:
        for k in range(g):
            for j in range(hidden):
                w_t[j, k] = w_hh[k, j]
    relu = kind == RNN_RELU
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        h_prev = view2d(saved, t * block, rows, hidden)
        for b in range(rows):
            for j in range(hidden):
                h_prev[b, j] = h[b, j]
        if transposed:
            np.dot(h, w_t, hh)
            if has_bias:
                for b in range(rows):
                    rc.add_rows(hh[b], b_hh, hh[b])
        else:
            dense_forward(h, w_hh, b_hh, hh, has_bias, mode, spare)
        if kind == LSTM:
            rc.lstm_step_forward(p, t, hh, lengths, has_lengths, h, c, y,
                                 view2d(saved, (2 * steps + 4 * t) * block, rows, 4 * hidden),
                                 view2d(saved, (steps + t) * block, rows, hidden),
                                 view2d(saved, (6 * steps + t) * block, rows, hidden))
        elif kind == GRU:
            rc.gru_step_forward(p, t, hh, lengths, has_lengths, h, y,
                                view2d(saved, (steps + 3 * t) * block, rows, 3 * hidden),
                                view2d(saved, (4 * steps + t) * block, rows, hidden))
        else:
            rc.rnn_step_forward(p, t, hh, lengths, has_lengths, relu, h, y)


@jit
def scan_backward(kind, w_hh, y, dy, dh_n, dc_n, lengths, has_lengths, saved, scratch, steps,
                  reverse, dp, need_p, acc_p, dw, need_w, acc_w, db, need_b, acc_b, dstate,
                  need_state):
    """Backpropagation through the steps of :func:`scan_forward`: from the outputs' gradient
    dy and the final states' dh_n, dc_n (B, H), the gradients of p (B, T*G), W_hh (G, H),
    b_hh (G,) and the initial state (B, 2H), each written or added (``acc_*``) when needed."""
    rows, hidden = dh_n.shape
    g = w_hh.shape[0]
    block = rows * hidden
    dhh_all = view2d(scratch, 0, steps * rows, g)
    at = steps * rows * g
    dh = view2d(scratch, at, rows, hidden)
    dc = view2d(scratch, at + block, rows, hidden)
    dnew = view2d(scratch, at + 2 * block, rows, hidden)
    zero = dh.dtype.type(0.0)
    for b in range(rows):
        for j in range(hidden):
            dh[b, j] = dh_n[b, j]
            dc[b, j] = dc_n[b, j] if kind == LSTM else zero
    relu = kind == RNN_RELU
    for s in range(steps):
        t = s if reverse else steps - 1 - s
        dhh = view2d(scratch, t * rows * g, rows, g)
        if kind == LSTM:
            rc.lstm_step_backward(dy, t, view2d(saved, (2 * steps + 4 * t) * block, rows, g),
                                  view2d(saved, (steps + t) * block, rows, hidden),
                                  view2d(saved, (6 * steps + t) * block, rows, hidden),
                                  lengths, has_lengths, dh, dc, dhh, dp, need_p, acc_p)
        elif kind == GRU:
            rc.gru_step_backward(dy, t, view2d(saved, (steps + 3 * t) * block, rows, g),
                                 view2d(saved, (4 * steps + t) * block, rows, hidden),
                                 view2d(saved, t * block, rows, hidden), lengths, has_lengths,
                                 dh, dhh, dp, need_p, acc_p)
        else:
            rc.rnn_step_backward(y, dy, t, lengths, has_lengths, relu, dh, dhh, dp, need_p,
                                 acc_p)
        # padded rows have dhh = 0: adding their product keeps their dh as it was
        np.dot(dhh, w_hh, dnew)
        add_into(dnew, dh)
    if need_state:
        for b in range(rows):
            for j in range(hidden):
                dstate[b, j] = dh[b, j]
                dstate[b, hidden + j] = dc[b, j]
    if need_w:
        weight_grad(dhh_all, view2d(saved, 0, steps * rows, hidden), dw,
                    view1d(scratch, at + 3 * block, g * hidden), acc_w)
    if need_b:
        dense_backward_bias(dhh_all, db, acc_b)


@jit
def weight_grad(dy, x, dw, scratch, accumulate):
    """dw (O, I) (+)= dy (R, O).T @ x (R, I), as ``(x^T dy)^T`` for R >= TRANSPOSED_WEIGHT_ROWS
    (module doc); ``scratch`` (>= O * I elements, 1-D)."""
    cols, inner = dw.shape
    if dy.shape[0] >= TRANSPOSED_WEIGHT_ROWS:
        tmp = view2d(scratch, 0, inner, cols)
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
