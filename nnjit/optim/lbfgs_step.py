"""One ``torch.optim.LBFGS.step(closure)`` on flat vectors, its state in an
:class:`~nnjit.optim.lbfgs.LBFGS`'s array.

torch's step, statement for statement (so its early ends, counters and the state it leaves are
torch's); the vector work is :mod:`nnjit.kernels.lbfgs`, the line search
:mod:`nnjit.optim.strong_wolfe`. ``objective(g)`` evaluates the loss at the current parameters
and writes the gradient into ``g``: a full-batch forward and backward (one compiled call).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nnjit.kernels import lbfgs as kb
from nnjit.optim.lbfgs import COUNT, FUNC_EVALS, H_DIAG, HEAD, LBFGS, N_ITER, PREV_LOSS, SCALARS, T
from nnjit.optim.strong_wolfe import POOL_ROWS, strong_wolfe


class Workspace:
    """The vectors a step needs besides the state, made once per fit: the current gradient,
    the step's start point, a curvature pair before it is kept, the line search's gradients,
    and the float64 tail and two-loop scratch."""

    def __init__(self, opt: LBFGS, params: np.ndarray):
        n, dtype = params.size, params.dtype
        self.params = params
        self.flat_grad, self.x, self.y, self.s = (np.empty(n, dtype) for _ in range(4))
        self.search = np.empty((POOL_ROWS, n), dtype)  # (strong_wolfe's gradients)
        self.tail = np.empty(opt.tail_values(), dtype=np.float64)
        self.al = np.empty(opt.history_size, dtype=np.float64)


def lbfgs_step(opt: LBFGS, objective: Callable[[np.ndarray], float], ws: Workspace) -> float:
    """One step of ``opt`` on ``ws.params`` (moved in place); returns the loss at the step's
    start, as torch's ``step`` returns the closure's first loss."""
    params, flat_grad, tail = ws.params, ws.flat_grad, ws.tail
    d, prev_flat_grad, dirs, stps = opt.vectors()
    opt.read_tail(tail)
    history_size = opt.history_size
    ro = tail[len(SCALARS):]
    tol_grad, tol_change = opt.tolerance_grad, opt.tolerance_change
    max_iter, max_eval, lr = opt.max_iter, opt.max_eval, opt.lr

    loss = orig_loss = objective(flat_grad)
    current_evals = 1
    tail[FUNC_EVALS] += 1
    try:
        if kb.abs_max(flat_grad) <= tol_grad:
            return orig_loss
        t, h_diag = tail[T], tail[H_DIAG]
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            tail[N_ITER] += 1
            # -- the descent direction
            if tail[N_ITER] == 1:
                np.negative(flat_grad, out=d)
                tail[HEAD] = tail[COUNT] = 0
                h_diag = 1.0
            else:
                ys, yy = kb.curvature(flat_grad, prev_flat_grad, d, t, ws.y, ws.s)
                if ys > 1e-10:  # keep the pair, the oldest out when the ring is full
                    head, count = int(tail[HEAD]), int(tail[COUNT])
                    slot = (head + count) % history_size
                    if count == history_size:
                        tail[HEAD] = (head + 1) % history_size
                    else:
                        tail[COUNT] = count + 1
                    dirs[slot] = ws.y
                    stps[slot] = ws.s
                    ro[slot] = 1.0 / ys
                    h_diag = ys / yy
                kb.direction(flat_grad, dirs, stps, ro, ws.al, int(tail[HEAD]), int(tail[COUNT]),
                             h_diag, d)
            prev_flat_grad[:] = flat_grad
            tail[PREV_LOSS] = prev_loss = loss
            # -- the step length
            if tail[N_ITER] == 1:
                t = min(1.0, 1.0 / kb.abs_sum(flat_grad)) * lr
            else:
                t = lr
            gtd = kb.dot(flat_grad, d)
            if gtd > -tol_change:  # (torch keeps the new direction and t: so does the state)
                break
            ls_func_evals = 0
            if opt.line_search_fn is not None:
                ws.x[:] = params
                loss, t, ls_func_evals = strong_wolfe(
                    objective, params, ws.x, t, d, loss, flat_grad, gtd, ws.search,
                    tolerance_change=tol_change, max_ls=max_eval - current_evals)
                kb.step_from(ws.x, t, d, params)
                opt_cond = kb.abs_max(flat_grad) <= tol_grad
            else:
                kb.step_from(params, t, d, params)
                opt_cond = False
                if n_iter != max_iter:  # (torch evaluates no loss after the last iteration)
                    loss = objective(flat_grad)
                    opt_cond = kb.abs_max(flat_grad) <= tol_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            tail[FUNC_EVALS] += ls_func_evals
            # -- the ends of a step
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if kb.abs_max_scaled(d, t) <= tol_change:
                break
            if abs(loss - prev_loss) < tol_change:
                break
        tail[T], tail[H_DIAG] = t, h_diag
        return orig_loss
    finally:
        opt.write_tail(tail)
