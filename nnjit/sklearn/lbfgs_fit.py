"""scikit-learn's "lbfgs" MLP solver, its loss and gradient one compiled call each.

:func:`fit_lbfgs` replaces ``BaseMultilayerPerceptron._fit_lbfgs``: the same
``scipy.optimize.minimize(method="L-BFGS-B")`` over scikit-learn's packed parameter vector (every
``coefs_[i]`` raveled, then every ``intercepts_[i]``) with ``maxfun=max_fun``,
``maxiter=max_iter``, ``gtol=tol``, the same ``iprint``, ``n_iter_``, ``loss_`` and
ConvergenceWarning. Each evaluation of the loss and its gradient copies the vector into the
compiled program's arena and runs the compiled loop's GRADIENT task (forward, loss, backward over
all rows as one batch, without the GIL); the L2 term (``alpha`` over the rows, or the weight sum)
is added to both as scikit-learn adds it. The evaluations run in float64 whatever the estimator's
``dtype`` (scikit-learn's own L-BFGS-B computes in float64 from its second evaluation on: scipy
hands it float64 weights; a float32 loss stops its line search early), and the weights come back
in ``dtype``.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import scipy.optimize

from nnjit.data.adapt import empty_rows
from nnjit.engine import fields
from nnjit.engine.loop_arrays import StepArrays
from nnjit.engine.run_options import RunOptions
from nnjit.engine.status import TrainingDivergedError
from nnjit.sklearn.compiled_mlp import CompiledMLP, Structure
from nnjit.sklearn.engine_rows import EngineRows
from nnjit.sklearn.targets import engine_targets
from nnjit.sklearn.warn import warn
from nnjit.train.threads import dense_forward_mode, single_threaded_blas

_NONE = np.zeros(0, dtype=np.float64)


class LossGradient:
    """scikit-learn's ``_loss_grad_lbfgs`` of one fit: ``self(packed)`` -> (loss, gradient), the
    gradient a new float64 vector in the packed order."""

    def __init__(self, est, X, y, sample_weight, layer_units):
        dtype = np.dtype(np.float64)
        n = X.shape[0]
        rows = EngineRows(X, None, dtype)
        X = rows.X
        self.net = net = CompiledMLP(Structure(tuple(int(u) for u in layer_units),
                                               est.activation, est.out_activation_, dtype, n,
                                               sample_weight is not None, rows.sparse))
        rows.bind(net)
        program = net.program
        self.order = net.packed_order()  # arena position of each packed entry
        self.n_coefs = sum(a * b for a, b in pairwise(layer_units))
        self.alpha = float(est.alpha)
        self.sw_sum = float(n if sample_weight is None else np.sum(sample_weight))
        Y = engine_targets(y, est.out_activation_, dtype, sample_weight)
        self.data = (X, Y, X, Y, np.arange(n, dtype=np.int64))
        self.options = RunOptions(task=fields.TASK_GRADIENT, batch=n, eval_batch=n,
                                  dense_mode=dense_forward_mode())
        self.step = StepArrays(_NONE, np.zeros((2, 0), dtype=dtype), net.reg_spans, _NONE, _NONE,
                               empty_rows(dtype, None))
        self.state = np.zeros(fields.STATE_WIDTH, dtype=np.float64)
        self.history = np.zeros((1, len(fields.HISTORY_COLUMNS)), dtype=np.float64)
        self.out = empty_rows(dtype, 1)
        self.params = program.values  # (the arena: the order indexes it)
        self.grads = program.grads

    def __call__(self, packed: np.ndarray) -> tuple[float, np.ndarray]:
        self.params[self.order] = packed
        state = self.state
        state[:] = 0.0
        state[fields.ST_JOB] = -1
        try:
            self.net.program.run(self.options, self.data, self.step, state, self.net.best,
                                 self.history, self.out)
        except TrainingDivergedError:
            pass  # (scikit-learn hands L-BFGS-B the non-finite loss; its line search backs off)
        loss = state[fields.ST_BATCH_LOSS] / state[fields.ST_BATCH_COUNT]
        coefs = packed[: self.n_coefs].astype(np.float64)
        scale = self.alpha / self.sw_sum
        loss += 0.5 * scale * float(np.dot(coefs, coefs))
        grad = self.grads[self.order].astype(np.float64)
        grad[: self.n_coefs] += scale * coefs
        return float(loss), grad


def fit_lbfgs(est, X, y, sample_weight, layer_units) -> None:
    """Fit ``est`` (an nnjit.sklearn MLP whose ``coefs_`` are initialised) with L-BFGS-B on the
    validated ``X`` and binarized ``y`` (2-D), rows weighted by ``sample_weight`` (or None), as
    scikit-learn's ``_fit_lbfgs``: it sets ``_coef_indptr``, ``_intercept_indptr``,
    ``n_iter_``, ``loss_`` and the weights."""
    from sklearn.neural_network._multilayer_perceptron import _pack

    # scikit-learn's index of the packed vector (its _unpack and _loss_grad_lbfgs read it)
    est._coef_indptr, est._intercept_indptr = [], []
    start = 0
    for fan_in, fan_out in pairwise(layer_units):
        est._coef_indptr.append((start, start + fan_in * fan_out, (fan_in, fan_out)))
        start += fan_in * fan_out
    for fan_out in layer_units[1:]:
        est._intercept_indptr.append((start, start + fan_out))
        start += fan_out

    loss_grad = LossGradient(est, X, y, sample_weight, layer_units)
    iprint = 1 if est.verbose is True or est.verbose >= 1 else -1
    options = {"maxfun": est.max_fun, "maxiter": est.max_iter, "gtol": est.tol}
    if _scipy_takes_iprint():
        options["iprint"] = iprint
    with single_threaded_blas():
        result = scipy.optimize.minimize(loss_grad, _pack(est.coefs_, est.intercepts_),
                                         method="L-BFGS-B", jac=True, options=options)
    est.n_iter_ = _check_result(result, est.max_iter)
    est.loss_ = result.fun
    est._unpack(result.x)
    est.coefs_ = [c.astype(X.dtype, copy=False) for c in est.coefs_]
    est.intercepts_ = [b.astype(X.dtype, copy=False) for b in est.intercepts_]


def _scipy_takes_iprint() -> bool:
    """scikit-learn passes ``iprint`` to scipy's L-BFGS-B before scipy 1.15 only."""
    from sklearn.utils.fixes import _get_additional_lbfgs_options_dict

    return bool(_get_additional_lbfgs_options_dict("iprint", -1))


def _check_result(result, max_iter: int) -> int:
    """scikit-learn's ``_check_optimize_result("lbfgs", ...)``: the iterations, and its
    ConvergenceWarning when L-BFGS-B did not converge (attributed as scikit-learn's)."""
    from sklearn.exceptions import ConvergenceWarning

    n_iter = min(result.nit, max_iter)
    if result.status != 0:
        message = (f"lbfgs failed to converge after {n_iter} iteration(s) "
                   f"(status={result.status}):\n{result.message}\n")
        if n_iter == max_iter:
            message += ("\nIncrease the number of iterations to improve the convergence "
                        f"(max_iter={max_iter}).")
        message += ("\nYou might also want to scale the data as shown in:\n"
                    "    https://scikit-learn.org/stable/modules/preprocessing.html")
        warn(message, ConvergenceWarning)
    return n_iter
