"""nnjit.sklearn's MLPs follow scikit-learn's own fits: with dtype=float64 and the same
random_state, the same n_iter_, loss curve (1e-6 relative; measured ~1e-14) and weights, on Iris,
Digits and breast cancer, for both solvers, every learning-rate schedule, with and without early
stopping, and through partial_fit and warm starts."""

import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn import datasets  # noqa: E402
from sklearn import neural_network as sk  # noqa: E402

import nnjit.sklearn as nks  # noqa: E402

RTOL = 1e-6


def _standardized(loader):
    X, y = loader(return_X_y=True)
    return (X - X.mean(0)) / (X.std(0) + 1e-12), y


DATA = {"iris": _standardized(datasets.load_iris),
        "digits": _standardized(datasets.load_digits),
        "breast_cancer": _standardized(datasets.load_breast_cancer)}
# Few epochs and a small hidden layer keep scikit-learn's side (the slow one) cheap; early
# stopping fits stop on their own.
MAX_ITER = {"iris": 60, "digits": 25, "breast_cancer": 40}
SCHEDULES = [("adam", "constant"), ("sgd", "constant"), ("sgd", "invscaling"),
             ("sgd", "adaptive")]


def _both(cls, X, y, sample_weight=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (ConvergenceWarning from both)
        ours = getattr(nks, cls)(dtype=np.float64, **kw).fit(X, y, sample_weight=sample_weight)
        theirs = getattr(sk, cls)(**kw).fit(X, y, sample_weight=sample_weight)
    return ours, theirs


def _assert_same_fit(ours, theirs):
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.t_ == theirs.t_
    np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=RTOL, atol=0)
    assert ours.loss_ == pytest.approx(theirs.loss_, rel=RTOL)
    for mine, ref in zip(ours.coefs_ + ours.intercepts_, theirs.coefs_ + theirs.intercepts_):
        np.testing.assert_allclose(mine, ref, rtol=1e-6, atol=1e-9)
    if theirs.validation_scores_ is not None:
        np.testing.assert_allclose(ours.validation_scores_, theirs.validation_scores_,
                                   rtol=RTOL, atol=1e-12)
        assert ours.best_validation_score_ == pytest.approx(theirs.best_validation_score_)
        assert ours.best_loss_ is None
    else:
        assert ours.best_loss_ == pytest.approx(theirs.best_loss_, rel=RTOL)
        assert ours.validation_scores_ is None


@pytest.mark.parametrize("early_stopping", [False, True], ids=["train_loss", "early_stopping"])
@pytest.mark.parametrize("solver,schedule", SCHEDULES, ids=[f"{a}-{b}" for a, b in SCHEDULES])
@pytest.mark.parametrize("name", list(DATA))
def test_classifier_loss_curve_matches_scikit_learn(name, solver, schedule, early_stopping):
    X, y = DATA[name]
    ours, theirs = _both("MLPClassifier", X, y, hidden_layer_sizes=(16,), solver=solver,
                         learning_rate=schedule, learning_rate_init=0.01 if solver == "sgd"
                         else 0.001, max_iter=MAX_ITER[name], early_stopping=early_stopping,
                         n_iter_no_change=3 if schedule == "adaptive" else 10, random_state=0)
    _assert_same_fit(ours, theirs)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_adaptive_rate_divides_by_five_as_scikit_learn():
    """A tol no epoch meets: "adaptive" divides the rate after every n_iter_no_change + 1
    epochs and stops once it is at most 1e-6; n_iter_ shows when."""
    X, y = DATA["iris"]
    ours, theirs = _both("MLPClassifier", X, y, hidden_layer_sizes=(8,), solver="sgd",
                         learning_rate="adaptive", tol=10.0, n_iter_no_change=1,
                         learning_rate_init=0.1, max_iter=100, random_state=3)
    assert theirs.n_iter_ < 100  # (stopped by the rule, not max_iter)
    _assert_same_fit(ours, theirs)
    assert ours._solver_state.lr == pytest.approx(theirs._optimizer.learning_rate)


@pytest.mark.parametrize("early_stopping", [False, True])
@pytest.mark.parametrize("solver", ["adam", "sgd"])
def test_regressor_loss_curve_matches_scikit_learn(solver, early_stopping):
    X, y = _standardized(datasets.load_diabetes)
    y = (y - y.mean()) / y.std()
    ours, theirs = _both("MLPRegressor", X, y, hidden_layer_sizes=(16, 8), solver=solver,
                         learning_rate_init=0.01, max_iter=60, early_stopping=early_stopping,
                         random_state=1)
    _assert_same_fit(ours, theirs)


@pytest.mark.parametrize("activation", ["relu", "tanh", "logistic", "identity"])
def test_multilabel_and_activations_match_scikit_learn(activation):
    X, Y = datasets.make_multilabel_classification(n_samples=200, n_classes=4, random_state=0)
    ours, theirs = _both("MLPClassifier", X, Y, hidden_layer_sizes=(12,), activation=activation,
                         max_iter=30, random_state=2)
    assert ours.out_activation_ == theirs.out_activation_ == "logistic"
    _assert_same_fit(ours, theirs)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=1e-6)


@pytest.mark.parametrize("target", ["strings", "bool"])
def test_string_and_boolean_labels_match_scikit_learn(target):
    X, y = DATA["iris"]
    y = (np.array(["setosa", "versicolor", "virginica"])[y] if target == "strings"
         else y == 1)
    ours, theirs = _both("MLPClassifier", X, y, hidden_layer_sizes=(8,), max_iter=30,
                         random_state=0)
    _assert_same_fit(ours, theirs)
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=1e-6)


@pytest.mark.parametrize("schedule", ["constant", "invscaling", "adaptive"])
def test_partial_fit_matches_scikit_learn(schedule):
    X, y = DATA["iris"]
    kw = dict(hidden_layer_sizes=(8,), solver="sgd" if schedule != "constant" else "adam",
              learning_rate=schedule, learning_rate_init=0.05, random_state=4)
    ours, theirs = nks.MLPClassifier(dtype=np.float64, **kw), sk.MLPClassifier(**kw)
    for _ in range(4):
        ours.partial_fit(X, y, classes=[0, 1, 2])
        theirs.partial_fit(X, y, classes=[0, 1, 2])
    _assert_same_fit(ours, theirs)


def test_warm_start_matches_scikit_learn():
    X, y = DATA["iris"]
    kw = dict(hidden_layer_sizes=(8,), solver="sgd", learning_rate="adaptive", max_iter=15,
              warm_start=True, n_iter_no_change=2, tol=1e-2, random_state=2)
    ours, theirs = nks.MLPClassifier(dtype=np.float64, **kw), sk.MLPClassifier(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            ours.fit(X, y)
            theirs.fit(X, y)
    _assert_same_fit(ours, theirs)
    assert ours._no_improvement_count == theirs._no_improvement_count


def _weights(n, seed=0):
    """Uneven weights, a few of them zero (scikit-learn's weighted means drop those rows)."""
    w = np.random.RandomState(seed).uniform(0.0, 3.0, n)
    w[::17] = 0.0
    return w


@pytest.mark.parametrize("early_stopping", [False, True], ids=["train_loss", "early_stopping"])
@pytest.mark.parametrize("solver,schedule", SCHEDULES, ids=[f"{a}-{b}" for a, b in SCHEDULES])
def test_sample_weight_fit_matches_scikit_learn(solver, schedule, early_stopping):
    """Weighted loss, gradient, L2 penalty (alpha over each batch's weight sum), weighted
    validation accuracy, the weights split with the validation set: scikit-learn's fit."""
    X, y = DATA["digits"]
    ours, theirs = _both("MLPClassifier", X, y, sample_weight=_weights(len(y)),
                         hidden_layer_sizes=(16,), solver=solver, learning_rate=schedule,
                         learning_rate_init=0.01 if solver == "sgd" else 0.001, alpha=0.01,
                         max_iter=MAX_ITER["digits"], early_stopping=early_stopping,
                         batch_size=64, random_state=0)
    _assert_same_fit(ours, theirs)


@pytest.mark.parametrize("early_stopping,n_outputs", [(False, 1), (True, 1), (False, 2)])
def test_sample_weight_regressor_matches_scikit_learn(early_stopping, n_outputs):
    """A weighted regression, its validation R^2 from the weighted validation loss (one output:
    with several, scikit-learn averages R^2 over them, which no single loss value gives)."""
    X, y = _standardized(datasets.load_diabetes)
    y = (y - y.mean()) / y.std()
    Y = y if n_outputs == 1 else np.column_stack([y, X[:, 2]])
    kw = {"hidden_layer_sizes": (16,), "learning_rate_init": 0.01, "max_iter": 40, "alpha": 0.1,
          "batch_size": 50, "random_state": 1}
    ours, theirs = _both("MLPRegressor", X, Y, sample_weight=_weights(len(y)),
                         early_stopping=early_stopping, **kw)
    _assert_same_fit(ours, theirs)


@pytest.mark.parametrize("out", ["softmax", "logistic"])
def test_sample_weight_partial_fit_matches_scikit_learn(out):
    X, y = DATA["iris"]
    if out == "logistic":
        y = y == 1
    kw = {"hidden_layer_sizes": (8,), "learning_rate_init": 0.05, "alpha": 0.01,
          "batch_size": 40, "random_state": 4}
    ours, theirs = nks.MLPClassifier(dtype=np.float64, **kw), sk.MLPClassifier(**kw)
    classes = np.unique(y)
    for k in range(3):
        w = _weights(len(y), seed=k)
        ours.partial_fit(X, y, sample_weight=w, classes=classes)
        theirs.partial_fit(X, y, sample_weight=w, classes=classes)
    ours.partial_fit(X, y)  # (None: equal weights)
    theirs.partial_fit(X, y)
    _assert_same_fit(ours, theirs)


def test_unit_sample_weight_is_no_weight():
    X, y = DATA["iris"]
    kw = {"hidden_layer_sizes": (8,), "max_iter": 20, "early_stopping": True, "random_state": 3}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weighted = nks.MLPClassifier(dtype=np.float64, **kw).fit(X, y, sample_weight=np.ones(150))
        plain = nks.MLPClassifier(dtype=np.float64, **kw).fit(X, y)
    _assert_same_fit(weighted, plain)


def test_shuffle_orders_are_scikit_learns_shuffle():
    """The batch orders drawn for the compiled loop equal sklearn.utils.shuffle's, call after
    call, from one RandomState; past MAX_ORDER_ENTRIES the table holds fewer epochs."""
    from sklearn.utils import shuffle

    from nnjit.sklearn.stochastic_fit import _ShuffleOrders

    orders = _ShuffleOrders(np.random.RandomState(7), 10, 3)
    rs, idx = np.random.RandomState(7), np.arange(10)
    for e in range(3):
        idx = shuffle(idx, random_state=rs)
        np.testing.assert_array_equal(orders.table[(e + 1) * 10 : (e + 2) * 10], idx)
    assert orders.chunk == 0


@pytest.mark.parametrize("kw", [
    {"max_iter": 200, "tol": 1e-2},  # stops early, within a chunk of orders
    {"max_iter": 25, "early_stopping": True, "n_iter_no_change": 3},
    {"max_iter": 7},  # fewer epochs than a chunk, none taken back
], ids=["train_loss_stop", "early_stopping", "max_iter"])
def test_the_random_state_ends_where_scikit_learns_does(kw):
    """A RandomState passed as random_state is left as scikit-learn's fit leaves it (one
    shuffle per epoch run): the orders drawn for epochs the fit never ran are taken back."""
    X, y = DATA["iris"]
    ours_rs, theirs_rs = np.random.RandomState(11), np.random.RandomState(11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = nks.MLPClassifier(hidden_layer_sizes=(8,), dtype=np.float64,
                                 random_state=ours_rs, **kw).fit(X, y)
        theirs = sk.MLPClassifier(hidden_layer_sizes=(8,), random_state=theirs_rs, **kw).fit(X, y)
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.n_iter_ < kw["max_iter"] or "tol" not in kw
    np.testing.assert_array_equal(ours_rs.randint(0, 2**31, 8), theirs_rs.randint(0, 2**31, 8))


def test_a_fit_longer_than_the_order_table_matches_scikit_learn(monkeypatch):
    """More epochs than the table holds: the fit pauses every few epochs for the next orders
    (the compiled loop's chunks) and still follows scikit-learn's fit."""
    from nnjit.sklearn import stochastic_fit

    X, y = DATA["iris"]
    monkeypatch.setattr(stochastic_fit, "MAX_ORDER_ENTRIES", 150 * 4)  # 4 epochs per call
    ours, theirs = _both("MLPClassifier", X, y, hidden_layer_sizes=(8,), max_iter=11,
                         random_state=5)
    _assert_same_fit(ours, theirs)
