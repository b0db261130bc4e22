"""Every bad input gets a clear error naming the argument, layer or file at fault."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(nn.functional.relu(self.fc1(x)))


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(20, 4)).astype(np.float32), rng.integers(0, 3, 20)


def fit(X, y, **kw):
    trainer = nn.Trainer(Net(), nn.Adam(), nn.CrossEntropyLoss())
    return trainer.fit(nn.DataLoader(X, y, batch_size=4), epochs=1, verbose=False, **kw)


def test_wrong_feature_count_names_first_layer(data):
    X, y = data
    with pytest.raises(ValueError, match=r"Linear 'fc1': expected input with 4 features, got "
                                         r"array of shape \(4, 5\)"):
        fit(np.zeros((20, 5), np.float32), y)


def test_wrong_feature_count_after_fit_names_first_layer(data):
    X, y = data
    trainer = nn.Trainer(Net())
    trainer.fit(nn.DataLoader(X, y, batch_size=4), epochs=1, verbose=False)
    with pytest.raises(ValueError, match=r"layer 'fc1' expects input with 4 features, got array "
                                         r"of shape \(2, 6\)"):
        trainer.predict(np.zeros((2, 6)))


@pytest.mark.parametrize("X", [np.zeros(4), np.zeros((2, 2, 2))])
def test_x_not_2d(X):
    with pytest.raises(ValueError, match=r"DataLoader: X must be 2-D"):
        nn.DataLoader(X, np.zeros(len(X)))


def test_y_length_differs(data):
    X, y = data
    with pytest.raises(ValueError, match=r"DataLoader: y has 19 rows but X has 20"):
        nn.DataLoader(X, y[:-1])


@pytest.mark.parametrize("y, match", [
    (np.full(20, 3), r"label 3 out of range for a model with 3 outputs"),
    (np.full(20, -1), r"label -1 out of range"),
    (np.full(20, 0.5), r"class labels must be integers"),
])
def test_labels_out_of_range_or_not_integer(data, y, match):
    X, _ = data
    with pytest.raises(ValueError, match=match):
        fit(X, y)


@pytest.mark.parametrize("where", ["X", "y"])
def test_nan_or_inf(data, where):
    X, y = data
    X, y = X.copy(), y.astype(np.float32)
    if where == "X":
        X[3, 2] = np.nan
        match = r"X contains NaN or inf \(first at row 3, column 2\)"
    else:
        y[5] = np.inf
        match = r"y contains NaN or inf \(first at row 5\)"
    with pytest.raises(ValueError, match=match):
        nn.DataLoader(X, y)


def test_empty_dataset():
    with pytest.raises(ValueError, match=r"DataLoader: X is empty \(0 samples\)"):
        nn.DataLoader(np.zeros((0, 4)), np.zeros(0))


@pytest.mark.parametrize("batch_size", [0, -3, 2.5, True])
def test_bad_batch_size(data, batch_size):
    X, y = data
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1"):
        nn.DataLoader(X, y, batch_size=batch_size)


@pytest.mark.parametrize("make, match", [
    (lambda: nn.Adam(lr=0), r"Adam: invalid lr 0.0"),
    (lambda: nn.Adam(learning_rate=-1), r"Adam: invalid lr -1.0"),
    (lambda: nn.SGD(lr=float("nan")), r"SGD: invalid lr"),
    (lambda: nn.Adam(betas=(1.0, 0.999)), r"invalid beta parameter at index 0"),
    (lambda: nn.Adam(betas=(0.9, -0.1)), r"invalid beta parameter at index 1"),
    (lambda: nn.Adam(eps=0), r"invalid eps"),
    (lambda: nn.SGD(momentum=1.0), r"invalid momentum"),
    (lambda: nn.SGD(lr=0.1, nesterov=True), r"Nesterov momentum requires a momentum"),
    (lambda: nn.RMSprop(alpha=1.5), r"invalid alpha"),
    (lambda: nn.Adam(lr=0.1, learning_rate=0.2), r"pass lr or learning_rate, not both"),
])
def test_bad_optimizer_hyperparameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_float64_and_integer_x_are_cast_to_arena_dtype(data):
    X, y = data
    for X_in in (X.astype(np.float64), np.round(X * 10).astype(np.int64)):
        history = fit(X_in, y)
        assert len(history) == 1


def test_model_without_parameters():
    with pytest.raises(ValueError, match=r"the model Sequential has no parameters"):
        nn.Trainer(nn.Sequential(nn.ReLU()))


def test_module_without_super_init():
    class Broken(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(RuntimeError, match=r"Broken.__init__ must call super\(\).__init__\(\)"):
        Broken()


def test_predict_before_fit_checks_its_input(data):
    """Predicting needs no fit (tests/train/test_inference.py); bad X is still named."""
    X, _ = data
    trainer = nn.Trainer(Net())
    with pytest.raises(ValueError, match=r"predict: X contains NaN or inf"):
        trainer.predict(np.full_like(X, np.nan))
    with pytest.raises(ValueError, match=r"Net.predict: X has no features"):
        Net().predict(X[:, :0])


def test_load_weights_into_other_shape(tmp_path, data):
    X, y = data
    model = Net()
    model.save_weights(tmp_path / "net.nne")

    class Other(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 9)
            self.out = nn.Linear(9, 3)

    other = Other()
    before = other.state_dict()
    with pytest.raises(nn.StateMismatchError) as err:
        other.load_weights(tmp_path / "net.nne")
    text = str(err.value)
    assert "net.nne" in text
    for expected in ("fc1.weight", "fc2.weight", "fc2.bias", "out.weight", "out.bias"):
        assert expected in text
    for name, arr in other.state_dict().items():  # nothing was changed
        np.testing.assert_array_equal(arr, before[name])


def test_unknown_monitor_lists_options(data):
    X, y = data
    with pytest.raises(ValueError, match=r"available: val_loss, val_accuracy, train_loss"):
        fit(X, y, monitor="val_f1")


def test_val_accuracy_needs_classification(data):
    X, _ = data
    trainer = nn.Trainer(Net(), loss=nn.MSELoss())
    with pytest.raises(ValueError, match=r"needs a classification loss"):
        trainer.fit(nn.DataLoader(X, np.zeros((20, 3))), val=(X, np.zeros((20, 3))),
                    monitor="val_accuracy", verbose=False)


def test_bad_epochs(data):
    X, y = data
    with pytest.raises(ValueError, match=r"epochs must be an int >= 1"):
        nn.Trainer(Net()).fit(nn.DataLoader(X, y), epochs=0)


def test_unknown_names_list_valid_ones():
    with pytest.raises(ValueError, match=r"valid names: sgd, adam, adamw, rmsprop"):
        nn.get_optimizer("adamax")
    with pytest.raises(ValueError, match=r"valid names: cross_entropy"):
        nn.get_loss("hinge")
    with pytest.raises(ValueError, match=r"unknown init 'he'; valid: glorot_uniform, torch"):
        nn.Linear(2, 2, init="he")
