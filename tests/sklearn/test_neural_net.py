"""``NeuralNetClassifier`` / ``NeuralNetRegressor``: any nnjit Module as a scikit-learn
estimator (skorch-style ``module__*`` parameters) in Pipeline, GridSearchCV, clone, pickle and
joblib's threading backend. (That ``import nnjit`` loads no scikit-learn is
tests/viz/test_figures.py's check.)"""

import pickle

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import nnjit as nn  # noqa: E402
from nnjit.sklearn import NeuralNetClassifier, NeuralNetRegressor  # noqa: E402

X, Y = load_iris(return_X_y=True)
NAMES = np.array(["setosa", "versicolor", "virginica"])[Y]


class MLP(nn.Module):
    """A user's model with constructor arguments (module__hidden, module__n_out)."""

    def __init__(self, hidden=16, n_in=4, n_out=3):
        super().__init__()
        self.hidden = nn.Linear(n_in, hidden)
        self.out = nn.Linear(hidden, n_out)

    def forward(self, x):
        return self.out(nn.functional.relu(self.hidden(x)))


def _classifier(**kwargs):
    params = dict(module__hidden=8, lr=0.05, max_epochs=20, batch_size=16, random_state=0)
    params.update(kwargs)
    return NeuralNetClassifier(MLP, **params)


def test_pipeline_with_string_labels():
    pipe = make_pipeline(StandardScaler(), _classifier())
    pipe.fit(X, NAMES)
    clf = pipe[-1]
    assert list(clf.classes_) == ["setosa", "versicolor", "virginica"]
    assert clf.n_features_in_ == 4
    assert clf.module_.hidden.out_features == 8
    assert len(clf.history_) == 20
    assert pipe.score(X, NAMES) > 0.9
    assert set(pipe.predict(X)) <= set(NAMES)
    proba = pipe.predict_proba(X)
    assert proba.shape == (150, 3) and proba.dtype == np.float64
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], pipe.predict(X))
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])


def test_random_state_makes_fits_reproducible():
    a = _classifier().fit(X, Y).predict_proba(X)
    b = _classifier().fit(X, Y).predict_proba(X)
    c = _classifier(random_state=1).fit(X, Y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_get_set_params_and_clone():
    clf = _classifier(optimizer="sgd", optimizer__momentum=0.9)
    params = clf.get_params()
    assert params["module__hidden"] == 8 and params["optimizer__momentum"] == 0.9
    assert params["module"] is MLP and params["max_epochs"] == 20
    clf.set_params(module__hidden=5, max_epochs=3, optimizer__momentum=0.5)
    assert clf.module__hidden == 5 and clf.max_epochs == 3
    twin = clone(clf)
    assert twin.get_params() == clf.get_params()
    twin.fit(X, Y)
    assert twin.module_.hidden.out_features == 5 and len(twin.history_) == 3
    assert twin.trainer_.optimizer.momentum == 0.5
    assert not hasattr(clf, "module_")  # (clone copies parameters, not the fit)
    with pytest.raises(ValueError, match="Invalid parameter"):
        clf.set_params(no_such=1)
    with pytest.raises(TypeError, match="module__<name>"):
        NeuralNetClassifier(MLP, hidden=3)


def test_grid_search_over_module_parameters_and_cross_val_score():
    grid = GridSearchCV(make_pipeline(StandardScaler(), _classifier(max_epochs=10)),
                        {"neuralnetclassifier__module__hidden": [2, 16]}, cv=3)
    grid.fit(X, NAMES)
    hidden = grid.best_estimator_[-1].module_.hidden.out_features
    assert hidden == grid.best_params_["neuralnetclassifier__module__hidden"]
    scores = grid.cv_results_["mean_test_score"]
    assert len(scores) == 2 and scores[0] != scores[1]
    assert cross_val_score(_classifier(max_epochs=10), X, NAMES, cv=3).mean() > 0.6


def test_threading_backend_gives_the_same_results():
    from joblib import parallel_backend

    def search(n_jobs):
        grid = GridSearchCV(_classifier(max_epochs=5), {"module__hidden": [4, 8]}, cv=2,
                            n_jobs=n_jobs)
        return grid.fit(X, Y).cv_results_["mean_test_score"]

    serial = search(1)
    with parallel_backend("threading"):
        threaded = search(2)
    np.testing.assert_array_equal(serial, threaded)


def test_pickle_keeps_the_trained_module():
    clf = _classifier().fit(X, NAMES)
    restored = pickle.loads(pickle.dumps(clf))
    assert "trainer_" not in restored.__dict__ or restored.trainer_ is not clf.trainer_
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(restored.predict(X), clf.predict(X))


def test_regressor_1d_and_2d_targets():
    target = X[:, 0] * 2.0 - X[:, 1]
    reg = NeuralNetRegressor(MLP, module__n_in=2, module__n_out=1, max_epochs=30, lr=0.02,
                             batch_size=16, random_state=0)
    reg.fit(X[:, 2:], target)
    assert reg.predict(X[:, 2:]).shape == (150,)
    assert reg.score(X[:, 2:], target) > 0.5
    two = np.stack([target, -target], axis=1)
    reg2 = NeuralNetRegressor(MLP, module__n_in=2, module__n_out=2, max_epochs=2,
                              random_state=0).fit(X[:, 2:], two)
    assert reg2.predict(X[:, 2:]).shape == (150, 2)


def test_module_instances_and_bad_modules():
    nn.set_seed(0)
    instance = MLP(hidden=6)
    before = instance.hidden.weight.data.copy()
    clf = NeuralNetClassifier(instance, max_epochs=2, random_state=0).fit(X, Y)
    assert clf.module_ is not instance and clf.module_.hidden.out_features == 6
    np.testing.assert_array_equal(instance.hidden.weight.data, before)  # (copied, untouched)
    with pytest.raises(ValueError, match="module is an instance"):
        NeuralNetClassifier(instance, module__hidden=3).fit(X, Y)
    with pytest.raises(TypeError, match="not an nnjit Module"):
        NeuralNetClassifier(lambda: "no", max_epochs=1).fit(X, Y)

