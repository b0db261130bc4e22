"""torch's strong-Wolfe line search (``torch.optim.lbfgs._strong_wolfe``, ported there from
minFunc's Lua ``lswolfe``) and its cubic interpolation, on flat vectors.

The branches, brackets and counters are torch's, in the same order, so an L-BFGS step takes the
same trial steps. torch keeps its gradients as tensors it never changes after making them; here
they are rows of a preallocated pool, referred to by index, and a new evaluation writes into a
row no live name refers to.
"""

from __future__ import annotations

import math

from nnjit.kernels import lbfgs as kb

#: Pool rows: an evaluation starts with at most two gradients alive (the start's and g_prev, or
#: the bracket's two) and writes into a third.
POOL_ROWS = 3


def cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """The minimiser of the cubic through ``(x1, f1, g1)`` and ``(x2, f2, g2)``, clamped to
    ``bounds`` (default: between the points); their middle when the cubic has none."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def strong_wolfe(objective, params, x, t, d, f, g, gtd, pool, c1=1e-4, c2=0.9,
                 tolerance_change=1e-9, max_ls=25):
    """Search along ``d`` from ``x`` (loss ``f``, gradient ``g``, slope ``gtd``) starting at
    step ``t``. ``objective(grad)`` evaluates at ``params``, which this sets to ``x + t d``
    before each call. Writes the gradient at the chosen step into ``g`` and returns
    ``(loss, t, evaluations)``; ``params`` is left at the last trial point."""
    d_norm = kb.abs_max(d)
    pool[0] = g  # (torch's g.clone())
    g_row = 0
    live = [g_row]

    def evaluate(step):
        row = next(r for r in range(POOL_ROWS) if r not in live)
        kb.step_from(x, step, d, params)
        value = objective(pool[row])
        return value, row, kb.dot(pool[row], d)

    f_new, g_new, gtd_new = evaluate(t)
    ls_func_evals = 1
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g_row, gtd
    done = False
    ls_iter = 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while ls_iter < max_ls:
        live = [g_row, g_prev, g_new]
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                              bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
        live = [g_row, g_prev]
        f_new, g_new, gtd_new = evaluate(t)
        ls_func_evals += 1
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g_row, g_new]
        # (torch keeps bracket_gtd from before: the zoom below does not run)

    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                              bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        live = list(bracket_g)
        f_new, g_new, gtd_new = evaluate(t)
        ls_func_evals += 1
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new, gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new, gtd_new
    g[:] = pool[bracket_g[low_pos]]
    return bracket_f[low_pos], bracket[low_pos], ls_func_evals

