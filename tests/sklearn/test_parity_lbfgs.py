"""nnjit.sklearn's solver="lbfgs" follows scikit-learn's: each loss-and-gradient evaluation (one
compiled GRADIENT run) equals scikit-learn's ``_loss_grad_lbfgs`` to rounding (measured ~1e-15
relative), and whole float64 fits from the same initial weights give the same ``n_iter_``,
``loss_`` and ``coefs_`` within 1e-10.

L-BFGS-B amplifies rounding differences along its path (its line search and curvature pairs
branch on them), so the whole-fit comparisons run a few dozen iterations: the two fits then
agree to ~1e-13; after a few hundred iterations of a non-convex fit they may part.
"""

import warnings
from itertools import pairwise

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn import datasets
from sklearn import neural_network as sk
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network._multilayer_perceptron import _pack

import nnjit.sklearn as nks
from nnjit.sklearn.lbfgs_fit import LossGradient

TOL = 1e-10

X_DIGITS, Y_DIGITS = datasets.load_digits(return_X_y=True)
X_DIGITS = X_DIGITS[:400] / 16.0
Y_DIGITS = Y_DIGITS[:400]
X_REG, Y_REG = datasets.make_regression(n_samples=200, n_features=8, n_targets=2, noise=5.0,
                                        random_state=0)
Y_REG = Y_REG / Y_REG.std(axis=0)


def _weights(n, seed=0):
    w = np.random.RandomState(seed).uniform(0.0, 3.0, n)
    w[::13] = 0.0
    return w


def _problem(kind):
    """(estimator name, X, y) of each output kind: softmax, logistic (multi-label), identity."""
    if kind == "softmax":
        return "MLPClassifier", X_DIGITS, Y_DIGITS
    if kind == "logistic":
        return "MLPClassifier", X_DIGITS, np.column_stack([Y_DIGITS % 2, Y_DIGITS > 4])
    return "MLPRegressor", X_REG, Y_REG


def _both(cls, X, y, sample_weight=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = getattr(nks, cls)(dtype=np.float64, solver="lbfgs", **kw).fit(
            X, y, sample_weight=sample_weight)
        theirs = getattr(sk, cls)(solver="lbfgs", **kw).fit(X, y, sample_weight=sample_weight)
    return ours, theirs


def _assert_same_fit(ours, theirs, tol=TOL):
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.loss_ == pytest.approx(theirs.loss_, rel=tol, abs=0)
    for mine, ref in zip(ours.coefs_ + ours.intercepts_, theirs.coefs_ + theirs.intercepts_):
        assert mine.dtype == np.float64
        np.testing.assert_allclose(mine, ref, rtol=0, atol=tol * max(1.0, np.abs(ref).max()))
    assert not hasattr(ours, "loss_curve_") and not hasattr(theirs, "loss_curve_")


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "sample_weight"])
@pytest.mark.parametrize("activation", ["relu", "tanh", "logistic", "identity"])
@pytest.mark.parametrize("kind", ["softmax", "logistic", "identity"])
def test_one_evaluation_is_scikit_learns_loss_and_gradient(kind, activation, weighted):
    cls, X, y = _problem(kind)
    w = _weights(len(X)) if weighted else None
    theirs = getattr(sk, cls)(hidden_layer_sizes=(12, 7), activation=activation, alpha=0.01,
                              solver="lbfgs", max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        theirs.fit(X, y, sample_weight=w)
    Y = theirs._label_binarizer.transform(y) if cls == "MLPClassifier" else y
    units = [X.shape[1], 12, 7, Y.shape[1]]
    coef_grads = [np.empty((a, b)) for a, b in pairwise(units)]
    intercept_grads = [np.empty(b) for b in units[1:]]
    ours = getattr(nks, cls)(hidden_layer_sizes=(12, 7), activation=activation, alpha=0.01,
                             dtype=np.float64)
    ours.out_activation_ = theirs.out_activation_
    loss_grad = LossGradient(ours, X, Y, w, units)
    rng = np.random.RandomState(1)
    theta = _pack(theirs.coefs_, theirs.intercepts_)
    for point in (theta, theta + rng.normal(0, 0.1, theta.shape)):
        ref_loss, ref_grad = theirs._loss_grad_lbfgs(
            point.copy(), X, Y, w, [X] + [None] * 3, [None] * 3, coef_grads, intercept_grads)
        loss, grad = loss_grad(point)
        assert loss == pytest.approx(ref_loss, rel=1e-13)
        np.testing.assert_allclose(grad, ref_grad, rtol=0, atol=1e-13 * np.abs(ref_grad).max())


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "sample_weight"])
@pytest.mark.parametrize("kind", ["softmax", "logistic", "identity"])
def test_fit_matches_scikit_learn(kind, weighted):
    cls, X, y = _problem(kind)
    ours, theirs = _both(cls, X, y, sample_weight=_weights(len(X)) if weighted else None,
                         hidden_layer_sizes=(16,), alpha=1e-3, max_iter=30, random_state=0)
    _assert_same_fit(ours, theirs)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("solver", ["lbfgs", "adam", "sgd"])
def test_poisson_regressor_matches_scikit_learn(solver):
    """loss="poisson": the exp output and half the Poisson deviance, with any solver."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = rng.poisson(np.exp(0.5 * X[:, 0] + 0.2))
    kw = {"loss": "poisson", "hidden_layer_sizes": (6,), "max_iter": 25, "alpha": 1e-3,
          "learning_rate_init": 0.01, "random_state": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = nks.MLPRegressor(dtype=np.float64, solver=solver, **kw).fit(X, y)
        theirs = sk.MLPRegressor(solver=solver, **kw).fit(X, y)
    assert ours.out_activation_ == theirs.out_activation_ == "exp"
    if solver != "lbfgs":
        np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-12)
        del ours.loss_curve_, theirs.loss_curve_  # (lbfgs fits have none: _assert_same_fit)
    _assert_same_fit(ours, theirs)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-10)


def test_fit_converged_by_tol_matches_scikit_learn():
    """Iris to convergence (``gtol=tol``): L-BFGS-B stops on its own, before max_iter."""
    X, y = datasets.load_iris(return_X_y=True)
    ours, theirs = _both("MLPClassifier", X, y, hidden_layer_sizes=(5,), tol=1e-3,
                         max_iter=500, random_state=1)
    assert theirs.n_iter_ < 500
    _assert_same_fit(ours, theirs)


def test_max_fun_stops_as_scikit_learn_and_warns_the_same():
    X, y = X_DIGITS, Y_DIGITS
    kw = {"hidden_layer_sizes": (16,), "max_fun": 7, "max_iter": 100, "random_state": 3}
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = nks.MLPClassifier(dtype=np.float64, solver="lbfgs", **kw).fit(X, y)
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = sk.MLPClassifier(solver="lbfgs", **kw).fit(X, y)
    _assert_same_fit(ours, theirs)
    assert [str(w.message) for w in ours_warned] == [str(w.message) for w in theirs_warned]
    assert [w.category for w in ours_warned] == [ConvergenceWarning]


def test_max_iter_warning_is_scikit_learns_and_filtered_by_module():
    """The max_iter ConvergenceWarning has scikit-learn's text and is attributed to its module:
    a ``module="sklearn"`` filter silences it as it does scikit-learn's."""
    X, y = X_DIGITS, Y_DIGITS
    kw = {"solver": "lbfgs", "hidden_layer_sizes": (8,), "max_iter": 3, "random_state": 0}
    messages = []
    for cls in (nks.MLPClassifier, sk.MLPClassifier):
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            cls(**kw).fit(X, y)
        assert [w.category for w in warned] == [ConvergenceWarning]
        messages.append(str(warned[0].message))
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", category=ConvergenceWarning, module="sklearn")
            cls(**kw).fit(X, y)
        assert warned == []
    assert messages[0] == messages[1] and "max_iter=3" in messages[0]


def test_float32_default_fits_in_float64_and_returns_float32():
    """dtype=float32: L-BFGS-B evaluates in float64 (scikit-learn's does from its second
    evaluation on, with float32 X), so it follows scikit-learn's fit of float32 X; weights
    return in float32."""
    X, y = X_DIGITS.astype(np.float32), Y_DIGITS
    kw = {"solver": "lbfgs", "hidden_layer_sizes": (16,), "max_iter": 50, "random_state": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = nks.MLPClassifier(**kw).fit(X, y)
        theirs = sk.MLPClassifier(**kw).fit(X, y)
    assert all(c.dtype == np.float32 for c in ours.coefs_ + ours.intercepts_)
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.loss_ == pytest.approx(theirs.loss_, rel=1e-3)


def test_lbfgs_has_no_partial_fit():
    assert not hasattr(nks.MLPClassifier(solver="lbfgs"), "partial_fit")
    assert not hasattr(nks.MLPRegressor(solver="lbfgs"), "partial_fit")
