"""nnjit.sklearn.labels encodes a plain label vector exactly as scikit-learn's LabelBinarizer, and
the classifier falls back to scikit-learn's code for every other kind of y."""

import numpy as np
import pytest
import sklearn
from sklearn.preprocessing import LabelBinarizer

from nnjit.sklearn import MLPClassifier
from nnjit.sklearn.labels import (binarized_labels, checked_labels, plain_binarizer, plain_labels,
                                  transformed)

_LABELS = [
    np.array([3, 3, 3]),
    np.array([0, 1, 1, 0, 1]),
    np.array([1, 0]),
    np.array([-1, 1, -1]),
    np.array([5, 2, 9, 2, 5, 7]),
    np.array([True, False, True]),
    np.array([True, True]),
    np.array([2, 1, 2], dtype=np.uint8),
    np.array([4, 0, 2, 3, 1] * 7, dtype=np.int32),
    np.arange(200) % 13,
]


@pytest.mark.parametrize("y", _LABELS, ids=lambda y: f"{y.dtype}-{np.unique(y).tolist()}")
def test_equals_label_binarizer(y):
    assert plain_labels(y)
    fast, Y = binarized_labels(y)
    sk = LabelBinarizer().fit(y)
    assert vars(fast).keys() == vars(sk).keys()
    np.testing.assert_array_equal(fast.classes_, sk.classes_)
    assert fast.classes_.dtype == sk.classes_.dtype
    assert (fast.y_type_, fast.sparse_input_) == (sk.y_type_, sk.sparse_input_)
    expected = sk.transform(y).astype(bool)
    assert Y.dtype == expected.dtype and Y.shape == expected.shape
    np.testing.assert_array_equal(Y, expected)
    some = Y[: max(1, len(Y) // 2)]
    np.testing.assert_array_equal(fast.inverse_transform(some), sk.inverse_transform(some))


@pytest.mark.parametrize("y", [np.array(["a", "b"]), np.array([0.0, 1.0]), np.array([[0], [1]]),
                               [0, 1], np.array([0, 1], dtype=object), np.zeros(0, int)])
def test_other_labels_are_left_to_scikit_learn(y):
    assert not plain_labels(y)


def test_not_with_array_api_dispatch(monkeypatch):
    # (enabling it for real needs SCIPY_ARRAY_API=1 before scipy is imported)
    config = {**sklearn.get_config(), "array_api_dispatch": True}
    monkeypatch.setattr(sklearn, "get_config", lambda: config)
    assert not plain_labels(np.array([0, 1]))


@pytest.mark.parametrize("y", [np.array([0, 2, 1, 2, 0, 1] * 5), np.array(["x", "y", "z"] * 10),
                               np.array([1, 0] * 15)])
def test_classifier_fit_as_with_scikit_learn_encoding(y, monkeypatch):
    """The fit with the fast encoding equals the fit with scikit-learn's own."""
    X = np.random.default_rng(0).normal(size=(len(y), 3))
    kw = dict(hidden_layer_sizes=(5,), max_iter=3, random_state=0, dtype=np.float64)
    fast = MLPClassifier(**kw).fit(X, y)
    monkeypatch.setattr("nnjit.sklearn.mlp.plain_labels", lambda y: False)
    slow = MLPClassifier(**kw).fit(X, y)
    np.testing.assert_array_equal(fast.classes_, slow.classes_)
    assert fast.classes_.dtype == slow.classes_.dtype
    for a, b in zip(fast.coefs_, slow.coefs_):
        np.testing.assert_array_equal(a, b)
    assert fast.loss_curve_ == slow.loss_curve_
    np.testing.assert_array_equal(fast.predict(X), slow.predict(X))


@pytest.mark.parametrize("fitted, y", [([0, 1, 2], [0, 1, 1]), ([0, 1, 2], [2, 2]),
                                       ([3, 7], [7, 7]), ([3, 7], [3, 7, 3]), ([5], [5, 5]),
                                       ([False, True], [True, True])])
def test_transform_with_fitted_classes_equals_label_binarizer(fitted, y):
    fitted, y = np.array(fitted), np.array(y)
    sk = LabelBinarizer().fit(fitted)
    assert plain_binarizer(sk, y)
    checked_labels(y, sk.classes_, warm_start=False)
    expected = sk.transform(y).astype(bool)
    Y = transformed(sk, y)
    assert Y.dtype == expected.dtype and Y.shape == expected.shape
    np.testing.assert_array_equal(Y, expected)


def test_binarizers_left_to_scikit_learn():
    y = np.array([0, 1, 2])
    assert not plain_binarizer(None, y)
    assert not plain_binarizer(LabelBinarizer().fit(y.astype(np.int32)), y)  # (another dtype)
    assert not plain_binarizer(LabelBinarizer(neg_label=-1).fit(y), y)
    assert not plain_binarizer(LabelBinarizer().fit(np.eye(3, dtype=int)), y)  # multilabel


def _pair_of_fits(monkeypatch, steps):
    """``steps(estimator)`` on two estimators, with and without nnjit.sklearn.labels."""
    kw = dict(hidden_layer_sizes=(5,), random_state=0, dtype=np.float64, max_iter=3)
    fast = MLPClassifier(**kw)
    steps(fast)
    with monkeypatch.context() as m:
        m.setattr("nnjit.sklearn.mlp.plain_labels", lambda y: False)
        slow = MLPClassifier(**kw)
        steps(slow)
    for a, b in zip(fast.coefs_ + fast.intercepts_, slow.coefs_ + slow.intercepts_):
        np.testing.assert_array_equal(a, b)
    assert fast.loss_curve_ == slow.loss_curve_
    np.testing.assert_array_equal(fast.classes_, slow.classes_)


def test_partial_fit_and_warm_start_as_with_scikit_learn_encoding(monkeypatch):
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(40, 3)), rng.integers(0, 3, 40)

    def partial(est):
        est.partial_fit(X[:10], y[:10], classes=np.array([0, 1, 2]))
        for s in range(10, 40, 5):
            est.partial_fit(X[s:s + 5], np.sort(y[s:s + 5]) % 2)  # (some batches: two labels)

    def warm(est):
        est.set_params(warm_start=True)
        est.fit(X, y)
        est.fit(X[::-1], y[::-1])

    _pair_of_fits(monkeypatch, partial)
    _pair_of_fits(monkeypatch, warm)


@pytest.mark.parametrize("warm_start", [False, True])
def test_new_classes_refused_with_scikit_learn_message(warm_start, monkeypatch):
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(30, 3)), rng.integers(0, 3, 30)
    messages = []
    for fast in (True, False):
        with monkeypatch.context() as m:
            if not fast:
                m.setattr("nnjit.sklearn.mlp.plain_labels", lambda y: False)
            est = MLPClassifier((4,), max_iter=2, random_state=0, warm_start=warm_start)
            est.fit(X, y)
            with pytest.raises(ValueError) as error:
                if warm_start:
                    est.fit(X, np.where(y == 2, 5, y))
                else:
                    est.partial_fit(X, np.where(y == 2, 5, y))
            messages.append(str(error.value))
    assert messages[0] == messages[1] and "classes" in messages[0]
