"""Float64 NumPy references of the recurrent family's ops (:mod:`nnjit.ops.recurrent`), step by
step from PyTorch's equations: what the registry's gradient check compares the ops with."""

from __future__ import annotations

import numpy as np

GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}


def ragged_lengths(rows: int, steps: int) -> np.ndarray:
    """Lengths T, T-1, ..., 1, T, ... for ``rows`` sequences of ``steps`` steps: every length
    from 1 to T (the op check's variable-length case)."""
    return (steps - np.arange(rows) % steps).reshape(rows, 1).astype(np.int64)


def input_projection(x, w, b=None, T=1):
    """(B, T*I) -> (B, T*G): x_t @ w.T + b at every step."""
    rows = x.shape[0]
    y = x.reshape(rows * T, -1) @ w.T + (0.0 if b is None else b.reshape(1, -1))
    return y.reshape(rows, -1)


def state(h0, c0=None, H=1, index=0):
    """[h0[:, index] | c0[:, index] or zeros] of (B, K*H) initial states."""
    block = slice(index * H, (index + 1) * H)
    c = np.zeros_like(h0[:, block]) if c0 is None else c0[:, block]
    return np.concatenate([h0[:, block], c], axis=1)


def step_cat(a, b, T=1):
    """(B, T*F), (B, T*K) -> (B, T*(F+K)), joined per step."""
    rows = a.shape[0]
    return np.concatenate([a.reshape(rows, T, -1), b.reshape(rows, T, -1)],
                          axis=2).reshape(rows, -1)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def cell(kind, a, hh, h, c):
    """One step: ``a`` the input projection, ``hh`` = h W_hh^T + b_hh; returns (h, c)."""
    if kind == "rnn_tanh":
        return np.tanh(a + hh), c
    if kind == "rnn_relu":
        return np.maximum(a + hh, 0.0), c
    H = h.shape[1]
    if kind == "lstm":
        v = a + hh
        i, f, o = _sigmoid(v[:, :H]), _sigmoid(v[:, H:2 * H]), _sigmoid(v[:, 3 * H:])
        c = f * c + i * np.tanh(v[:, 2 * H:3 * H])
        return o * np.tanh(c), c
    r = _sigmoid(a[:, :H] + hh[:, :H])
    z = _sigmoid(a[:, H:2 * H] + hh[:, H:2 * H])
    n = np.tanh(a[:, 2 * H:] + r * hh[:, 2 * H:])
    return (1.0 - z) * n + z * h, c


def scan(p, w_hh, b_hh=None, T=1, kind="lstm", reverse=0, ragged=0, h0=None, c0=None,
         lengths=None):
    """(B, T*G) projections -> (B, T*H) outputs of ``kind``'s steps (reversed for
    ``reverse``; ``ragged``: :func:`ragged_lengths`); ``scan_states`` gives the final states."""
    return scan_states(p, w_hh, b_hh, T, kind, reverse, ragged, h0, c0, lengths)[0]


def scan_states(p, w_hh, b_hh=None, T=1, kind="lstm", reverse=0, ragged=0, h0=None, c0=None,
                lengths=None):
    """``(outputs (B, T*H), h_n (B, H), c_n (B, H))`` of :func:`scan`."""
    rows, H = p.shape[0], w_hh.shape[1]
    if ragged and lengths is None:
        lengths = ragged_lengths(rows, T)
    lengths = np.full(rows, T) if lengths is None else np.asarray(lengths).reshape(rows)
    h = np.zeros((rows, H)) if h0 is None else np.array(h0, np.float64)
    c = np.zeros((rows, H)) if c0 is None else np.array(c0, np.float64)
    steps = p.reshape(rows, T, -1)
    y = np.zeros((rows, T, H))
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        hh = h @ w_hh.T + (0.0 if b_hh is None else b_hh.reshape(1, -1))
        h_new, c_new = cell(kind, steps[:, t], hh, h, c)
        live = (t < lengths).reshape(rows, 1)
        h, c = np.where(live, h_new, h), np.where(live, c_new, c)
        y[:, t] = np.where(live, h_new, 0.0)
    return y.reshape(rows, -1), h, c
