"""``MLPClassifier`` and ``MLPRegressor``: scikit-learn's, with the training loop compiled.

They are scikit-learn's own estimators (subclasses: parameter validation, label encoding,
initial weights, ``predict``, ``predict_proba``, ``score``, tags and fitted attributes are its
code) whose stochastic solver runs in nnjit's compiled loop (:mod:`.stochastic_fit`) with
scikit-learn's arithmetic, so ``fit`` gives scikit-learn's loss curve, many times faster. Change
the import, keep the code::

    from nnjit.sklearn import MLPClassifier  # was: from sklearn.neural_network import ...

Beyond scikit-learn's parameters: ``dtype`` (``np.float32``, the default, or ``np.float64``: the
arena's; with float64 the fit follows scikit-learn's to rounding). ``sample_weight`` weights the
loss as scikit-learn's. ``solver="lbfgs"`` is scikit-learn's L-BFGS-B whose loss and gradient
are each one compiled call (:mod:`.lbfgs_fit`). A sparse X (CSR, CSC) is never densified: the
first layer reads each batch row's non-zeros in compiled code (:mod:`.engine_rows`). Not
supported: MLPRegressor's ``loss="poisson"`` with ``early_stopping=True`` (it raises a ValueError
that says so).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.neural_network import MLPClassifier as _SklearnMLPClassifier
from sklearn.neural_network import MLPRegressor as _SklearnMLPRegressor
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _check_sample_weight, validate_data

from nnjit.dtypes import SUPPORTED_DTYPES
from nnjit.sklearn.labels import (binarized_labels, checked_labels, plain_binarizer, plain_labels,
                                  transformed)
from nnjit.sklearn.lbfgs_fit import fit_lbfgs
from nnjit.sklearn.stochastic_fit import fit_stochastic

__all__ = ["MLPClassifier", "MLPRegressor"]


def _stochastic_solver(est) -> bool:
    """``partial_fit`` is there for the stochastic solvers only (as in scikit-learn)."""
    return est._check_solver()


class _CompiledSolver:
    """What both estimators change in scikit-learn's: the checks up front, the arena dtype of
    X, and the solvers."""

    def _fit(self, X, y, sample_weight=None, incremental=False):
        name = type(self).__name__
        if getattr(self, "loss", None) == "poisson" and self.early_stopping:
            # (its validation R^2 is no function of the validation loss the compiled loop has)
            raise ValueError(f"{name}: loss='poisson' with early_stopping=True is not "
                             "supported by nnjit.sklearn; use early_stopping=False, or "
                             "loss='squared_error'")
        self._arena_dtype = _arena_dtype(self.dtype, name)
        if sample_weight is not None:  # (scikit-learn's check, negative weights refused too)
            sample_weight = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
        return super()._fit(X, y, sample_weight=sample_weight, incremental=incremental)

    def _validate_input(self, X, y, incremental, reset):
        X, y = super()._validate_input(X, y, incremental, reset)
        return self._arena_X(X), y

    def _arena_X(self, X):
        """The validated X in the arena dtype."""
        if sp.issparse(X):  # (never densified: nnjit.sklearn.engine_rows)
            return X.tocsr().astype(self._arena_dtype, copy=False)
        return np.ascontiguousarray(X, dtype=self._arena_dtype)

    def _fit_stochastic(self, X, y, sample_weight, activations, deltas, coef_grads,
                        intercept_grads, layer_units, incremental):
        self._same_dtype_weights(X.dtype)
        fit_stochastic(self, X, y.reshape(len(y), -1), incremental, sample_weight)

    def _fit_lbfgs(self, X, y, sample_weight, activations, deltas, coef_grads, intercept_grads,
                   layer_units):
        self._same_dtype_weights(X.dtype)
        fitted = [self.coefs_[0].shape[0], *(c.shape[1] for c in self.coefs_)]
        if fitted != list(layer_units):  # (scikit-learn fails to reshape them, as here)
            raise ValueError(f"{type(self).__name__}: warm_start=True with solver='lbfgs' needs "
                             f"the fitted layer sizes {fitted[1:-1]}; hidden_layer_sizes is "
                             f"now {self.hidden_layer_sizes} (set warm_start=False to fit a "
                             "new network)")
        fit_lbfgs(self, X, y.reshape(len(y), -1), sample_weight, layer_units)


    def _same_dtype_weights(self, dtype) -> None:
        if any(c.dtype != dtype for c in self.coefs_):  # (warm start after a dtype change)
            self.coefs_ = [c.astype(dtype) for c in self.coefs_]
            self.intercepts_ = [b.astype(dtype) for b in self.intercepts_]
        # scikit-learn's _initialize copies the initial weights for its own solver's best-weights
        # restore; nnjit's solvers keep their snapshot in the compiled fit, so that second set of
        # weights (as large as coefs_) is not kept
        self._best_coefs, self._best_intercepts = list(self.coefs_), list(self.intercepts_)


def _arena_dtype(dtype, name: str) -> np.dtype:
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d not in SUPPORTED_DTYPES:
        raise ValueError(f"{name}: dtype must be np.float32 or np.float64, got {dtype!r}")
    return d


_CONSTRAINTS = {"dtype": "no_validation"}  # (checked by _arena_dtype, naming the argument)


class MLPClassifier(_CompiledSolver, _SklearnMLPClassifier):
    """scikit-learn's ``MLPClassifier`` (same parameters, defaults and fitted attributes) trained
    by nnjit's compiled loop; see :mod:`nnjit.sklearn.mlp`.

    Args:
        dtype: ``np.float32`` (default) or ``np.float64``: the arena's dtype. With float64 and
            the same ``random_state``, ``loss_curve_`` and ``n_iter_`` follow scikit-learn's.
        others: as :class:`sklearn.neural_network.MLPClassifier`.
    """

    _parameter_constraints = {**_SklearnMLPClassifier._parameter_constraints, **_CONSTRAINTS}

    def __init__(self, hidden_layer_sizes=(100,), activation="relu", *, solver="adam",
                 alpha=0.0001, batch_size="auto", learning_rate="constant",
                 learning_rate_init=0.001, power_t=0.5, max_iter=200, shuffle=True,
                 random_state=None, tol=1e-4, verbose=False, warm_start=False, momentum=0.9,
                 nesterovs_momentum=True, early_stopping=False, validation_fraction=0.1,
                 beta_1=0.9, beta_2=0.999, epsilon=1e-8, n_iter_no_change=10, max_fun=15000,
                 dtype=np.float32):
        super().__init__(
            hidden_layer_sizes=hidden_layer_sizes, activation=activation, solver=solver,
            alpha=alpha, batch_size=batch_size, learning_rate=learning_rate,
            learning_rate_init=learning_rate_init, power_t=power_t, max_iter=max_iter,
            shuffle=shuffle, random_state=random_state, tol=tol, verbose=verbose,
            warm_start=warm_start, momentum=momentum, nesterovs_momentum=nesterovs_momentum,
            early_stopping=early_stopping, validation_fraction=validation_fraction,
            beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, n_iter_no_change=n_iter_no_change,
            max_fun=max_fun)
        self.dtype = dtype

    def fit(self, X, y, sample_weight=None):
        """Fit the model to X (n_samples, n_features) and the labels y (n_samples,), or the
        multi-label indicator matrix (n_samples, n_labels); ``sample_weight`` (n_samples,)
        weights each row's loss as scikit-learn's (None: equal weights). Returns self."""
        return super().fit(X, y, sample_weight=sample_weight)

    def _validate_input(self, X, y, incremental, reset):
        # scikit-learn's, with a plain label vector's encoding done by nnjit.sklearn.labels
        first = not hasattr(self, "classes_") or (not self.warm_start and not incremental)
        binarizer = getattr(self, "_label_binarizer", None)
        if not plain_labels(y) or not (first or plain_binarizer(binarizer, y)):
            return super()._validate_input(X, y, incremental, reset)
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc"], multi_output=True,
                             dtype=(np.float64, np.float32), reset=reset)
        if first:  # (scikit-learn defines the classes)
            self._label_binarizer, Y = binarized_labels(y)
            self.classes_ = self._label_binarizer.classes_
        else:  # (a warm start or partial_fit: the labels among the fitted classes)
            checked_labels(y, self.classes_, self.warm_start)
            Y = transformed(binarizer, y)
        return self._arena_X(X), Y

    @available_if(_stochastic_solver)
    def partial_fit(self, X, y, sample_weight=None, classes=None):
        """One epoch over (X, y), rows weighted by ``sample_weight`` (None: equal weights);
        ``classes`` (all labels) is needed on the first call."""
        return super().partial_fit(X, y, sample_weight=sample_weight, classes=classes)


class MLPRegressor(_CompiledSolver, _SklearnMLPRegressor):
    """scikit-learn's ``MLPRegressor`` (same parameters, defaults and fitted attributes) trained
    by nnjit's compiled loop; see :mod:`nnjit.sklearn.mlp`.

    Args:
        dtype: ``np.float32`` (default) or ``np.float64``: the arena's dtype.
        others: as :class:`sklearn.neural_network.MLPRegressor`.
    """

    _parameter_constraints = {**_SklearnMLPRegressor._parameter_constraints, **_CONSTRAINTS}

    def __init__(self, loss="squared_error", hidden_layer_sizes=(100,), activation="relu", *,
                 solver="adam", alpha=0.0001, batch_size="auto", learning_rate="constant",
                 learning_rate_init=0.001, power_t=0.5, max_iter=200, shuffle=True,
                 random_state=None, tol=1e-4, verbose=False, warm_start=False, momentum=0.9,
                 nesterovs_momentum=True, early_stopping=False, validation_fraction=0.1,
                 beta_1=0.9, beta_2=0.999, epsilon=1e-8, n_iter_no_change=10, max_fun=15000,
                 dtype=np.float32):
        super().__init__(
            loss=loss, hidden_layer_sizes=hidden_layer_sizes, activation=activation,
            solver=solver, alpha=alpha, batch_size=batch_size, learning_rate=learning_rate,
            learning_rate_init=learning_rate_init, power_t=power_t, max_iter=max_iter,
            shuffle=shuffle, random_state=random_state, tol=tol, verbose=verbose,
            warm_start=warm_start, momentum=momentum, nesterovs_momentum=nesterovs_momentum,
            early_stopping=early_stopping, validation_fraction=validation_fraction,
            beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, n_iter_no_change=n_iter_no_change,
            max_fun=max_fun)
        self.dtype = dtype

    def fit(self, X, y, sample_weight=None):
        """Fit the model to X (n_samples, n_features) and the targets y (n_samples,) or
        (n_samples, n_outputs); ``sample_weight`` (n_samples,) weights each row's loss as
        scikit-learn's (None: equal weights). Returns self."""
        return super().fit(X, y, sample_weight=sample_weight)

    @available_if(_stochastic_solver)
    def partial_fit(self, X, y, sample_weight=None):
        """One epoch over (X, y), rows weighted by ``sample_weight`` (None: equal weights)."""
        return super().partial_fit(X, y, sample_weight=sample_weight)
