"""scikit-learn's behaviour at the edges, compared with scikit-learn's own estimators (float64,
same random_state): a diverging fit with early stopping, weights set by hand then partial_fit,
Ctrl-C, a warm start after a change of hidden_layer_sizes, one class with early stopping, and
where warnings are attributed."""

import os
import signal
import threading
import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn import datasets
from sklearn import neural_network as sk
from sklearn.exceptions import ConvergenceWarning

import nnjit.sklearn as nks

X_IRIS, Y_IRIS = datasets.load_iris(return_X_y=True)


def _quiet_fit(est, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y, **kw)


def _assert_same_weights(ours, theirs, atol=1e-9):
    for mine, ref in zip(ours.coefs_ + ours.intercepts_, theirs.coefs_ + theirs.intercepts_):
        np.testing.assert_allclose(mine, ref, rtol=0, atol=atol)


def test_diverging_regressor_with_early_stopping_returns_as_scikit_learn():
    """scikit-learn's issue 29504: NaN validation scores from the diverged epoch on, max_iter
    epochs, the best weights restored, no error."""
    kw = {"hidden_layer_sizes": 100, "activation": "identity", "solver": "sgd",
          "learning_rate_init": 1, "max_iter": 20, "early_stopping": True, "random_state": 0}
    ours = _quiet_fit(nks.MLPRegressor(dtype=np.float64, **kw), X_IRIS, Y_IRIS)
    theirs = _quiet_fit(sk.MLPRegressor(**kw), X_IRIS, Y_IRIS)
    assert ours.n_iter_ == theirs.n_iter_ == 20
    assert isinstance(ours.validation_scores_[-1], float) and np.isnan(ours.validation_scores_[-1])
    finite = np.isfinite(theirs.validation_scores_)
    np.testing.assert_array_equal(np.isfinite(ours.validation_scores_), finite)
    np.testing.assert_allclose(np.array(ours.validation_scores_)[finite],
                               np.array(theirs.validation_scores_)[finite], rtol=1e-9)
    assert ours.best_validation_score_ == pytest.approx(theirs.best_validation_score_)
    _assert_same_weights(ours, theirs)
    assert all(np.isfinite(w).all() for w in ours.coefs_ + ours.intercepts_)


def test_weights_set_by_hand_then_partial_fit_as_scikit_learn():
    """The attributes scikit-learn's test_fit sets by hand (no best_validation_score_): one
    partial_fit step from them gives scikit-learn's weights."""
    X, y = np.array([[0.6, 0.8, 0.7]]), np.array([0])
    fitted = []
    for cls in (nks.MLPClassifier, sk.MLPClassifier):
        mlp = cls(solver="sgd", learning_rate_init=0.1, alpha=0.1, activation="logistic",
                  random_state=1, max_iter=1, hidden_layer_sizes=2, momentum=0)
        if cls is nks.MLPClassifier:
            mlp.set_params(dtype=np.float64)
        mlp.coefs_ = [np.array([[0.1, 0.2], [0.3, 0.1], [0.5, 0]]), np.array([[0.1], [0.2]])]
        mlp.intercepts_ = [np.array([0.1, 0.1]), np.array([1.0])]
        mlp.n_outputs_, mlp.n_features_in_, mlp.n_layers_ = 1, 3, 3
        mlp.n_iter_, mlp.t_, mlp.best_loss_, mlp.loss_curve_ = 0, 0, np.inf, []
        mlp.out_activation_, mlp._no_improvement_count = "logistic", 0
        mlp.partial_fit(X, y, classes=[0, 1])
        fitted.append(mlp)
    _assert_same_weights(*fitted, atol=1e-15)
    assert fitted[0].loss_curve_ == pytest.approx(fitted[1].loss_curve_, rel=1e-14)


@pytest.mark.parametrize("solver", ["adam", "sgd"])
def test_warm_start_after_new_hidden_layer_sizes_goes_on_as_scikit_learn(solver):
    """scikit-learn's forward pass reads coefs_: a warm start after a change of
    hidden_layer_sizes goes on training the fitted network; so does nnjit's."""
    fits = []
    for cls, extra in ((nks.MLPClassifier, {"dtype": np.float64}), (sk.MLPClassifier, {})):
        mlp = cls(hidden_layer_sizes=(5, 1), warm_start=True, max_iter=5, random_state=0,
                  solver=solver, **extra)
        _quiet_fit(mlp, X_IRIS, Y_IRIS)
        mlp.set_params(hidden_layer_sizes=(5, 5))
        fits.append(_quiet_fit(mlp, X_IRIS, Y_IRIS))
    ours, theirs = fits
    assert [c.shape for c in ours.coefs_] == [(4, 5), (5, 1), (1, 3)]
    assert ours.n_iter_ == theirs.n_iter_
    np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-12)
    _assert_same_weights(ours, theirs)


def test_lbfgs_warm_start_after_new_hidden_layer_sizes_is_an_error_leaving_the_weights():
    mlp = _quiet_fit(nks.MLPClassifier(hidden_layer_sizes=(5, 1), warm_start=True, max_iter=5,
                                       solver="lbfgs", random_state=0), X_IRIS, Y_IRIS)
    before = [c.copy() for c in mlp.coefs_ + mlp.intercepts_]
    mlp.set_params(hidden_layer_sizes=(5, 5))
    with pytest.raises(ValueError, match=r"hidden_layer_sizes is now \(5, 5\)"):
        mlp.fit(X_IRIS, Y_IRIS)
    for after, saved in zip(mlp.coefs_ + mlp.intercepts_, before):
        np.testing.assert_array_equal(after, saved)


@pytest.mark.parametrize("n_iter_no_change", [10, 3])
def test_one_class_with_early_stopping_as_scikit_learn(n_iter_no_change):
    """One class: every validation score is 1.0 (predict knows one label), the fit stops by
    scikit-learn's rule and keeps the first epoch's weights."""
    X = X_IRIS[:60]
    y = np.zeros(60, dtype=int)
    kw = {"hidden_layer_sizes": (8,), "early_stopping": True, "random_state": 0,
          "n_iter_no_change": n_iter_no_change}
    ours = _quiet_fit(nks.MLPClassifier(dtype=np.float64, **kw), X, y)
    theirs = _quiet_fit(sk.MLPClassifier(**kw), X, y)
    assert ours.validation_scores_ == theirs.validation_scores_ == [1.0] * theirs.n_iter_
    assert ours.n_iter_ == theirs.n_iter_
    assert ours._no_improvement_count == theirs._no_improvement_count
    np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-12)
    _assert_same_weights(ours, theirs)


def test_ctrl_c_during_fit_warns_and_returns_a_consistent_model(python_sigint_handler):
    """SIGINT while the compiled loop runs (in a worker thread: a long fit) stops it before
    its next batch; fit warns "Training interrupted by user." and returns a model whose
    n_iter_, loss_curve_ and t_ count the completed epochs."""
    X, y = datasets.load_digits(return_X_y=True)
    mlp = nks.MLPClassifier(hidden_layer_sizes=(256,), max_iter=2000, tol=0.0,
                            n_iter_no_change=np.inf, random_state=0)
    _quiet_fit(nks.MLPClassifier(hidden_layer_sizes=(256,), max_iter=1), X, y)  # (compiled)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.warns(UserWarning, match="Training interrupted by user."):
            mlp.fit(X, y)
    finally:
        timer.cancel()
    assert 0 < mlp.n_iter_ < 2000
    assert len(mlp.loss_curve_) == mlp.n_iter_ and np.isfinite(mlp.loss_curve_).all()
    assert mlp.t_ == mlp.n_iter_ * len(X)
    assert all(np.isfinite(w).all() for w in mlp.coefs_ + mlp.intercepts_)
    assert mlp.score(X, y) > 0.5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_convergence_warning_is_attributed_as_scikit_learns(solver):
    """Raised from scikit-learn's module as scikit-learn raises it: the same file, and a
    ``module="sklearn"`` filter silences it."""
    kw = {"solver": solver, "hidden_layer_sizes": (4,), "max_iter": 2, "random_state": 0}
    where = []
    for cls in (nks.MLPClassifier, sk.MLPClassifier):
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            cls(**kw).fit(X_IRIS, Y_IRIS)
        assert [w.category for w in warned] == [ConvergenceWarning]
        where.append(os.path.basename(warned[0].filename))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", category=ConvergenceWarning, module="sklearn")
            cls(**kw).fit(X_IRIS, Y_IRIS)
    assert where == ["_multilayer_perceptron.py"] * 2
