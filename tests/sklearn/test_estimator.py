"""nnjit.sklearn's MLPs in scikit-learn's tooling (pipelines, searches, cloning, pickling,
threads) and their errors."""

import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.neural_network import MLPClassifier as SklearnMLPClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from nnjit.sklearn import MLPClassifier, MLPRegressor  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

X, y = load_iris(return_X_y=True)
SMALL = dict(hidden_layer_sizes=(8,), max_iter=100, learning_rate_init=0.02, random_state=0)


def test_it_is_a_scikit_learn_mlp_with_the_same_parameters_plus_dtype():
    ours, theirs = MLPClassifier().get_params(), SklearnMLPClassifier().get_params()
    assert set(ours) == set(theirs) | {"dtype"}
    assert all(ours[k] == theirs[k] for k in theirs)
    assert ours["dtype"] is np.float32
    assert isinstance(MLPClassifier(), SklearnMLPClassifier)


def test_fitted_attributes_and_float32_default():
    clf = MLPClassifier(**SMALL).fit(X, y)
    assert [c.dtype for c in clf.coefs_] == [np.float32, np.float32]
    assert [c.shape for c in clf.coefs_] == [(4, 8), (8, 3)]
    assert (clf.n_layers_, clf.n_outputs_, clf.out_activation_) == (3, 3, "softmax")
    assert clf.n_features_in_ == 4 and clf.n_iter_ == len(clf.loss_curve_) <= 100
    assert clf.t_ == clf.n_iter_ * len(X) and clf.loss_ == clf.loss_curve_[-1]
    assert clf.best_loss_ == min(clf.loss_curve_)
    assert clf.validation_scores_ is None and clf.best_validation_score_ is None
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2])
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(clf.predict_log_proba(X), np.log(proba), rtol=1e-5)
    assert clf.score(X, y) > 0.8
    reg = MLPRegressor(**SMALL, early_stopping=True).fit(X[:, :3], X[:, 3])
    assert reg.out_activation_ == "identity" and reg.best_loss_ is None
    assert len(reg.validation_scores_) == reg.n_iter_
    assert reg.best_validation_score_ == max(reg.validation_scores_)


def test_feature_names_are_kept():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = MLPClassifier(**SMALL).fit(frame, y)
    np.testing.assert_array_equal(clf.feature_names_in_, ["a", "b", "c", "d"])


def test_pipeline_grid_search_and_cross_validation():
    pipe = make_pipeline(StandardScaler(), MLPClassifier(**SMALL))
    assert cross_val_score(pipe, X, y, cv=3).mean() > 0.8
    search = GridSearchCV(pipe, {"mlpclassifier__alpha": [1e-4, 1e-2],
                                 "mlpclassifier__hidden_layer_sizes": [(4,), (8,)]}, cv=3)
    search.fit(X, y)
    assert search.best_score_ > 0.8 and len(search.cv_results_["params"]) == 4
    assert search.best_estimator_.predict(X).shape == (150,)


def test_clone_and_pickle_round_trip():
    clf = MLPClassifier(**SMALL, dtype=np.float64).fit(X, y)
    fresh = clone(clf)
    assert fresh.get_params() == clf.get_params() and not hasattr(fresh, "coefs_")
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    back.partial_fit(X, y)  # the solver state travelled too
    clf.partial_fit(X, y)
    np.testing.assert_allclose(back.coefs_[0], clf.coefs_[0], rtol=1e-12)


def test_threading_backend_with_two_jobs_gives_the_serial_results():
    from joblib import parallel_backend

    grid = {"alpha": [1e-4, 1e-3, 1e-2], "learning_rate_init": [1e-3, 1e-2]}
    serial = GridSearchCV(MLPClassifier(**SMALL), grid, cv=3).fit(X, y)
    with parallel_backend("threading", n_jobs=2):
        threaded = GridSearchCV(MLPClassifier(**SMALL), grid, cv=3, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(serial.cv_results_["mean_test_score"],
                                  threaded.cv_results_["mean_test_score"])


def test_multi_label_and_multi_output_targets():
    Y = np.c_[y == 0, y == 2].astype(int)
    clf = MLPClassifier(**SMALL).fit(X, Y)
    assert clf.out_activation_ == "logistic" and clf.predict(X).shape == (150, 2)
    reg = MLPRegressor(**SMALL).fit(X[:, :2], X[:, 2:])
    assert reg.predict(X[:, :2]).shape == (150, 2)


def test_warm_start_continues_and_partial_fit_adds_one_epoch():
    clf = MLPClassifier(**SMALL, warm_start=True).fit(X, y)
    first = clf.loss_curve_[-1]
    clf.fit(X, y)
    assert clf.loss_curve_[len(clf.loss_curve_) - clf.n_iter_] < first * 1.01
    part = MLPClassifier(**SMALL)
    for k in range(3):
        part.partial_fit(X, y, classes=[0, 1, 2])
        assert part.n_iter_ == 1 and len(part.loss_curve_) == k + 1


@pytest.mark.parametrize("kwargs,pattern", [
    (dict(solver="newton"), r"'solver' parameter"),
    (dict(dtype=np.int32), r"MLPClassifier: dtype must be np.float32 or np.float64"),
    (dict(learning_rate="cyclic"), r"'learning_rate' parameter"),
    (dict(hidden_layer_sizes=(0,)), r"hidden_layer_sizes must be > 0"),
])
def test_errors_name_the_argument(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        MLPClassifier(**{**SMALL, **kwargs}).fit(X, y)


@pytest.mark.parametrize("weights,pattern", [
    (np.ones(3), r"sample_weight.shape == \(3,\), expected \(150,\)"),
    (np.r_[-1.0, np.ones(149)], r"Negative values in data passed to `sample_weight`"),
])
@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_bad_sample_weight_is_an_error_naming_it(weights, pattern, method):
    kw = {"classes": [0, 1, 2]} if method == "partial_fit" else {}
    with pytest.raises(ValueError, match=pattern):
        getattr(MLPClassifier(**SMALL), method)(X, y, sample_weight=weights, **kw)


def test_regressor_refuses_poisson_with_early_stopping_and_partial_fit_early_stopping():
    with pytest.raises(ValueError, match=r"loss='poisson' with early_stopping=True is not"):
        MLPRegressor(loss="poisson", early_stopping=True, **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="partial_fit does not support early_stopping"):
        MLPClassifier(**SMALL, early_stopping=True).partial_fit(X, y, classes=[0, 1, 2])


def test_diverging_fit_is_a_value_error():
    with pytest.raises(ValueError, match="non-finite"):
        MLPRegressor(**{**SMALL, "learning_rate_init": 1e3}, solver="sgd").fit(X * 1e3, y * 1e6)


def test_verbose_prints_scikit_learns_lines(capsys):
    clf = MLPClassifier(**SMALL, verbose=True, early_stopping=True).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("Iteration ") for line in lines) == clf.n_iter_
    assert sum(line.startswith("Validation score: ") for line in lines) == clf.n_iter_
    assert lines[0] == f"Iteration 1, loss = {clf.loss_curve_[0]:.8f}"


def test_import_nnjit_does_not_import_scikit_learn():
    code = "import sys, nnjit; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
