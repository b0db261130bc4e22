"""``Trainer.fit(X, y, ...)`` as Keras' ``fit(x, y)``, the older ``fit(train, epochs, val)``
order, and a one-line error for every call that could be read two ways."""

import numpy as np
import pytest

import nnjit as nn


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    return X, y


def _trainer(seed=0):
    nn.set_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return nn.Trainer(model, nn.Adam(lr=0.01), dtype=np.float64, seed=seed), model


def test_fit_x_y_equals_the_dataloader_it_stands_for():
    X, y = _data()
    a, model_a = _trainer()
    b, model_b = _trainer()
    ha = a.fit(X, y, epochs=3, batch_size=8, verbose=False)
    hb = b.fit(nn.DataLoader(X, y, batch_size=8, shuffle=True), epochs=3, verbose=False)
    assert len(ha) == 3
    np.testing.assert_array_equal(ha["train_loss"], hb["train_loss"])
    np.testing.assert_array_equal(model_a[0].weight.data, model_b[0].weight.data)


def test_fit_x_y_keras_defaults_and_positional_epochs_and_val():
    X, y = _data()
    a, model_a = _trainer()
    b, model_b = _trainer()
    ha = a.fit(X, y, 2, (X[:10], y[:10]), verbose=False)  # fit(X, y, epochs, val)
    hb = b.fit(nn.DataLoader(X, y, batch_size=32, shuffle=True), epochs=2, val=(X[:10], y[:10]),
               verbose=False)
    assert len(ha) == 2 and not np.isnan(ha["val_loss"]).any()
    np.testing.assert_array_equal(ha["val_loss"], hb["val_loss"])
    np.testing.assert_array_equal(model_a[2].weight.data, model_b[2].weight.data)


def test_keras_validation_data_and_validation_split():
    """Keras' names work (issue 25, item 14: a bare TypeError): validation_data is val, and
    validation_split validates on the last fraction of fit(X, y)'s rows, as Keras takes it."""
    X, y = _data()
    a, model_a = _trainer()
    b, model_b = _trainer()
    ha = a.fit(X, y, epochs=2, validation_data=(X[:10], y[:10]), verbose=False)
    hb = b.fit(X, y, epochs=2, val=(X[:10], y[:10]), verbose=False)
    np.testing.assert_array_equal(ha["val_loss"], hb["val_loss"])
    with pytest.raises(ValueError, match="val and validation_data"):
        a.fit(X, y, val=(X, y), validation_data=(X, y))
    with pytest.raises(ValueError, match=r"validation_split must be a fraction .* got 1\.5"):
        a.fit(X, y, validation_split=1.5)
    with pytest.raises(ValueError, match="with a DataLoader pass the validation data as val"):
        a.fit(nn.DataLoader(X, y), validation_split=0.2)


def test_validation_split_validates_on_the_last_rows_as_keras():
    X, y = _data()
    a, model_a = _trainer()
    b, model_b = _trainer()
    ha = a.fit(X, y, epochs=2, batch_size=8, validation_split=0.25, verbose=False)
    hb = b.fit(X[:30], y[:30], epochs=2, batch_size=8, val=(X[30:], y[30:]), verbose=False)
    np.testing.assert_array_equal(ha["val_loss"], hb["val_loss"])
    np.testing.assert_array_equal(model_a[0].weight.data, model_b[0].weight.data)


def test_fit_x_y_lists_and_no_shuffle():
    X, y = _data()
    a, model_a = _trainer()
    b, model_b = _trainer()
    a.fit(X.tolist(), y.tolist(), epochs=2, batch_size=16, shuffle=False, verbose=False)
    b.fit(nn.DataLoader(X, y, batch_size=16, shuffle=False), epochs=2, verbose=False)
    np.testing.assert_array_equal(model_a[0].weight.data, model_b[0].weight.data)


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 6)
        self.b = nn.Linear(1, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x_num, x_more):
        return self.out(nn.functional.relu(self.a(x_num) + self.b(x_more)))


def test_fit_tuple_of_inputs_with_y():
    X, y = _data()
    nn.set_seed(0)
    model = TwoInputs()
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), dtype=np.float64, seed=0)
    history = trainer.fit((X[:, :3], X[:, 3:]), y, epochs=2, verbose=False)
    assert len(history) == 2
    assert trainer.predict((X[:, :3], X[:, 3:])).shape == (len(X),)


def test_older_positional_order_still_works():
    X, y = _data()
    a, model_a = _trainer()
    b, model_b = _trainer()
    loader = nn.DataLoader(X, y, batch_size=8)
    ha = a.fit(loader, 3, (X[:10], y[:10]), verbose=False)  # fit(train, epochs, val)
    hb = b.fit(loader, epochs=3, val=(X[:10], y[:10]), verbose=False)
    assert len(ha) == 3
    np.testing.assert_array_equal(ha["val_loss"], hb["val_loss"])
    c, _ = _trainer()
    assert len(c.fit((X, y), 2, verbose=False)) == 2  # fit((X, y), epochs)
    d, _ = _trainer()
    assert len(d.fit((X, y), epochs=2, batch_size=8, verbose=False)) == 2


@pytest.mark.parametrize("call, words", [
    (lambda t, X, y: t.fit(X, y, epochs=np.arange(3)), "epochs must be"),
    (lambda t, X, y: t.fit(X), "without targets"),
    (lambda t, X, y: t.fit(nn.DataLoader(X, y), y), "holds its own targets"),
    (lambda t, X, y: t.fit((X, y), (X, y)), "y must be one array of targets"),
    (lambda t, X, y: t.fit(X, y, (X, y)), "(fit(X, y, epochs, val) is the order)"),
    (lambda t, X, y: t.fit(nn.DataLoader(X, y), 5, epochs=7), "epochs is given twice"),
    (lambda t, X, y: t.fit(nn.DataLoader(X, y), 5, (X, y), val=(X, y)), "both validation"),
    (lambda t, X, y: t.fit(nn.DataLoader(X, y), epochs=2, batch_size=8), "batch_size="),
    (lambda t, X, y: t.fit(X, y, batch_size=0), "fit: batch_size must be"),
])
def test_ambiguous_or_wrong_calls_say_how_to_pass_data(call, words):
    X, y = _data()
    trainer, _ = _trainer()
    with pytest.raises(ValueError) as info:
        call(trainer, X, y)
    message = str(info.value)
    assert words in message
    assert "\n" not in message and len(message) < 300  # one line, no array dump
    assert "[0" not in message and "array(" not in message
