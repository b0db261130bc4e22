"""L-BFGS (Nocedal, 1980; Liu & Nocedal, 1989) for full-batch training, as ``torch.optim.LBFGS``.

The class holds the hyperparameters and the layout of the state; the step (torch's, with its
strong-Wolfe line search) is :mod:`nnjit.optim.lbfgs_step`, its vector kernels
:mod:`nnjit.kernels.lbfgs`, and :mod:`nnjit.train.lbfgs_fit` runs it from ``Trainer.fit``.

The whole state is one ``(rows, n)`` array in the arena dtype, like every optimizer's, so a
checkpoint saves and checks it as theirs: row 0 the last direction ``d``, row 1 the previous
gradient, then ``history_size`` rows of ``y`` and ``history_size`` rows of ``s`` (a ring), then
the scalars as float64 bytes (``t``, ``H_diag``, the previous loss, the iteration and evaluation
counts, the ring's head and count, then ``ro = 1 / y.s`` of each
pair), so a float32 state keeps them exactly too.
"""

from __future__ import annotations

import math

import numpy as np

from nnjit.checks import Choice, Int, Real
from nnjit.optim.base import Optimizer

#: The scalars at the start of the float64 tail, in order.
SCALARS = ("t", "h_diag", "prev_loss", "n_iter", "func_evals", "head", "count")
T, H_DIAG, PREV_LOSS, N_ITER, FUNC_EVALS, HEAD, COUNT = range(len(SCALARS))
_D, _PREV_G, _RING = 0, 1, 2  # rows of the vector part

_LR = Real(min=0, says="a number >= 0 (torch's rule)")
_MAX_ITER = Int(min=1)
_MAX_EVAL = Int(min=1, none_ok=True, says="an int >= 1 or None (max_iter * 5 // 4)")
_TOLERANCE = Real(min=0)
_HISTORY = Int(min=1)
_LINE_SEARCH = Choice("strong_wolfe", none_ok=True)


class LBFGS(Optimizer):
    r"""L-BFGS as ``torch.optim.LBFGS``: one :meth:`Trainer.fit` epoch is one ``step(closure)``
    over the whole training set (one batch), up to ``max_iter`` iterations.

    Each iteration moves along :math:`d = -H_k g`, :math:`H_k` the inverse-Hessian estimate of
    the last ``history_size`` pairs :math:`(s, y)` (the two-loop recursion), by ``lr`` (the
    first iteration ever by :math:`\min(1, 1/\lVert g\rVert_1)\,\mathrm{lr}`) or by the step
    the strong-Wolfe line search finds. Every loss-and-gradient evaluation is one compiled call
    over every training row; a trainer's ``regularizer`` adds its penalty to each. A step ends
    early when the gradient's largest entry is at most ``tolerance_grad``, or the move, the
    loss change or the directional derivative falls below ``tolerance_change``.

    Args:
        lr (alias learning_rate): step length (default 1).
        max_iter: iterations per step (default 20).
        max_eval: loss evaluations per step (default ``max_iter * 5 // 4``).
        tolerance_grad: first-order optimality tolerance (default 1e-7).
        tolerance_change: tolerance on the loss and parameter changes (default 1e-9).
        history_size: curvature pairs kept (default 100).
        line_search_fn: ``None`` (fixed steps) or ``"strong_wolfe"``.

    The state holds ``2 * history_size + 2`` vectors of the trainable parameters' size (torch
    keeps as many).
    """

    kind = -1  # no step of the compiled loop: nnjit.train.lbfgs_fit drives it
    n_buffers = 0  # (the rows depend on the parameter count: state_shape)
    full_batch = True

    def __init__(self, lr=None, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None, *,
                 learning_rate=None):
        if lr is None and learning_rate is None:
            lr = 1.0
        name = "lr" if learning_rate is None else "learning_rate"
        if lr is not None and learning_rate is not None and lr != learning_rate:
            raise ValueError("LBFGS: pass lr or learning_rate, not both")
        self.lr = _LR.check(f"LBFGS: {name}", lr if lr is not None else learning_rate)
        self.max_iter = _MAX_ITER.check("LBFGS: max_iter", max_iter)
        max_eval = _MAX_EVAL.check("LBFGS: max_eval", max_eval)
        self.max_eval = self.max_iter * 5 // 4 if max_eval is None else max_eval
        self.tolerance_grad = _TOLERANCE.check("LBFGS: tolerance_grad", tolerance_grad)
        self.tolerance_change = _TOLERANCE.check("LBFGS: tolerance_change", tolerance_change)
        self.history_size = _HISTORY.check("LBFGS: history_size", history_size)
        self.line_search_fn = _LINE_SEARCH.check("LBFGS: line_search_fn", line_search_fn)
        self.state = None
        self.iterations = 0  # steps taken (fit epochs)

    # -- the state layout ------------------------------------------------------------------------
    def tail_values(self) -> int:
        """float64 values in the state's tail: the scalars, then ``ro`` of each pair."""
        return len(SCALARS) + self.history_size

    def state_shape(self, n_params: int, dtype) -> tuple[int, int]:
        tail_rows = -(-8 * self.tail_values() // (max(n_params, 1) * np.dtype(dtype).itemsize))
        return _RING + 2 * self.history_size + tail_rows, n_params

    def build(self, n_params: int, dtype) -> np.ndarray:
        shape = self.state_shape(n_params, dtype)
        if self.state is None or self.state.shape != shape or self.state.dtype != dtype:
            self.state = np.zeros(shape, dtype=dtype)
            self.iterations = 0
        return self.state

    def vectors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views of the state's ``d``, previous gradient, ``y`` ring and ``s`` ring."""
        h, state = self.history_size, self.state
        return state[_D], state[_PREV_G], state[_RING:_RING + h], state[_RING + h:_RING + 2 * h]

    def _tail_bytes(self, state: np.ndarray) -> np.ndarray:
        tail = state[_RING + 2 * self.history_size:].reshape(-1).view(np.uint8)
        return tail[: 8 * self.tail_values()]

    def read_tail(self, out: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """Copy the float64 tail (scalars, then ``ro``) of ``state`` (default: this optimizer's)
        into ``out``; returns ``out``."""
        out.view(np.uint8)[:] = self._tail_bytes(self.state if state is None else state)
        return out

    def write_tail(self, tail: np.ndarray) -> None:
        """Store the float64 tail ``tail`` in the state."""
        self._tail_bytes(self.state)[:] = tail.view(np.uint8)

    def cast_state(self, state: np.ndarray, dtype) -> np.ndarray:
        """``state`` in ``dtype``: the vectors cast, the float64 tail's bytes moved as they are."""
        out = np.zeros(self.state_shape(state.shape[1], dtype), dtype=dtype)
        rows = _RING + 2 * self.history_size
        out[:rows] = state[:rows]
        self._tail_bytes(out)[:] = self._tail_bytes(np.ascontiguousarray(state))
        return out

    def state_problem(self, state: np.ndarray) -> str | None:
        """Why ``state`` (from an untrusted checkpoint) cannot be this optimizer's, or None: the
        ring's head and count index it, the counters are whole and the scalars finite."""
        tail = self.read_tail(np.empty(self.tail_values()), np.ascontiguousarray(state))
        h = self.history_size
        for i in (N_ITER, FUNC_EVALS, HEAD, COUNT):
            v = tail[i]
            if not (math.isfinite(v) and v == int(v) and v >= 0):
                return f"holds LBFGS {SCALARS[i]} {v!r}, expected a whole number >= 0"
        if tail[HEAD] >= h or tail[COUNT] > h:
            return (f"holds LBFGS ring head {tail[HEAD]:g} and count {tail[COUNT]:g}: they do "
                    f"not fit history_size {h}")
        if not (np.isfinite(tail[[T, H_DIAG]]).all() and np.isfinite(tail[len(SCALARS):]).all()
                and not np.isnan(tail[PREV_LOSS])):
            return "holds a non-finite LBFGS t, H_diag or ro, or a NaN previous loss"
        return None

    @property
    def n_iter(self) -> int:
        """Iterations taken over every step (torch's ``state["n_iter"]``)."""
        return self._scalar(N_ITER)

    @property
    def func_evals(self) -> int:
        """Loss evaluations over every step (torch's ``state["func_evals"]``)."""
        return self._scalar(FUNC_EVALS)

    def _scalar(self, index: int) -> int:
        if self.state is None:
            return 0
        return int(self.read_tail(np.empty(self.tail_values()))[index])

    def hyper_vector(self):
        return np.array([self.lr], dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, max_iter=self.max_iter, max_eval=self.max_eval,
                    tolerance_grad=self.tolerance_grad, tolerance_change=self.tolerance_change,
                    history_size=self.history_size, line_search_fn=self.line_search_fn)
