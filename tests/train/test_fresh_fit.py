"""A fresh trainer's first plain fit takes an earlier trainer's set-up (nnjit.train.fresh_fit)
only when its model has the same structure and its data and arguments the same form, and then
trains exactly as the full path would: weights, optimizer state and history bit-equal. Each
kind of change (widths, activations, dtypes, loss, a parameter replaced, an attribute changed
after construction, data, arguments, optimizer, regularizer) takes the full path."""

import gc
import weakref

import numba
import numpy as np
import pytest
from numba.core import event

import nnjit as nn
from nnjit.train import fresh_fit

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 4)).astype(np.float32)
Y = (X[:, 0] - X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1)
XV, YV = X[:12] + 0.5, Y[:12]


def _mlp(hidden=8, act=nn.ReLU, features=4, out=3):
    return nn.Sequential(nn.Linear(features, hidden), act(), nn.Linear(hidden, out))


def _fit(make=_mlp, *, edit=None, X=X, y=Y, val=(XV, YV), loader=True, batch=8, dtype=None,
         loss=None, optimizer=None, regularizer=None, epochs=3, **kwargs):
    """A fresh model and trainer, fitted: ``(weights, optimizer state, history)``."""
    nn.set_seed(7)
    model = make()
    if edit is not None:
        edit(model)
    trainer = nn.Trainer(model, optimizer() if optimizer else nn.Adam(lr=0.02),
                         loss() if loss else None,
                         regularizer() if regularizer else nn.SklearnL2Regularizer(1e-3),
                         dtype=dtype)
    data = (nn.DataLoader(X, y, batch_size=batch),) if loader else (X, y)
    if not loader:
        kwargs["batch_size"] = batch
    history = trainer.fit(*data, val=val, epochs=epochs, verbose=False, **kwargs)
    weights = [p.data.copy() for p in model.parameters()]
    state = [np.array(s, copy=True) for s in np.atleast_1d(trainer.optimizer.state)]
    return weights, state, history.drop(columns="seconds")


def _equal(a, b):
    for u, v in zip(a[0] + a[1], b[0] + b[1], strict=True):
        np.testing.assert_array_equal(u, v)
    assert a[2].equals(b[2])


def _taken():
    return fresh_fit.stats["taken"]


def _check(reference: dict, changed: dict, takes: bool):
    """Fit ``reference`` (recorded), then ``changed``: it takes the record iff ``takes``, and
    equals the same fit with no record either way."""
    fresh_fit.clear()
    _fit(**reference)
    before = _taken()
    warm = _fit(**changed)
    assert _taken() == before + takes
    fresh_fit.clear()
    _equal(warm, _fit(**changed))


def test_a_fresh_trainer_takes_the_record_and_trains_as_the_full_path():
    _check({}, {}, takes=True)
    _check(dict(loader=False), dict(loader=False), takes=True)
    _check(dict(val=None), dict(val=None), takes=True)


def _replace_weight(model):  # same shape, other values: the layout holds, the values are new
    model[0].weight = nn.Parameter(np.full((8, 4), 0.1, dtype=np.float32))
    model[0].bias = nn.Parameter(model[0].bias.data.copy())  # (registered after the weight)


SAME_FORM = {
    "other values of X and y": dict(X=X[::-1].copy(), y=Y[::-1].copy()),
    "other validation values": dict(val=(XV * 2, YV[::-1].copy())),
    "a parameter replaced, same shape": dict(edit=_replace_weight),
    "another learning rate": dict(optimizer=lambda: nn.Adam(lr=0.1)),
}


@pytest.mark.parametrize("change", list(SAME_FORM))
def test_changes_of_values_take_the_record_and_are_seen(change):
    _check({}, SAME_FORM[change], takes=True)
    fresh_fit.clear()
    with pytest.raises(AssertionError):  # (the change does change the fit)
        _equal(_fit(), _fit(**SAME_FORM[change]))


def _set_p(model):
    model[2].p = 0.5  # an attribute changed after construction


def _tie(model):
    model[2].weight = model[0].weight


def _widen(model):  # a parameter replaced by one of another shape (and its layer's width)
    model[0].weight = nn.Parameter(np.zeros((9, 4), dtype=np.float32))
    model[0].bias = nn.Parameter(np.zeros(9, dtype=np.float32))
    model[0].out_features = 9
    model[2].weight = nn.Parameter(np.zeros((3, 9), dtype=np.float32))
    model[2].in_features = 9


class UserNet(nn.Module):
    """A user's model: never described by the structure key, never takes a record."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.b(nn.functional.relu(self.a(x)))


def _dropout(p=0.1):
    return lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(p), nn.Linear(8, 3))


ONE_HOT = np.eye(3, dtype=np.float32)[Y]

CHANGED = {  # (reference, changed)
    "width": ({}, dict(make=lambda: _mlp(hidden=9))),
    "activation": ({}, dict(make=lambda: _mlp(act=nn.Tanh))),
    "outputs": ({}, dict(make=lambda: _mlp(out=4))),
    "arena dtype": ({}, dict(dtype=np.float64)),
    "X's dtype": ({}, dict(X=X.astype(np.float64))),
    "loss": (dict(y=ONE_HOT, val=(XV, ONE_HOT[:12])),
             dict(y=ONE_HOT, val=(XV, ONE_HOT[:12]), loss=nn.MSELoss)),
    "targets' form": ({}, dict(y=ONE_HOT, val=(XV, ONE_HOT[:12]))),
    "a layer's attribute changed after construction": (dict(make=_dropout()),
                                                       dict(make=_dropout(), edit=_set_p)),
    "dropout rate": (dict(make=_dropout()), dict(make=_dropout(0.3))),
    "a parameter of another shape": ({}, dict(edit=_widen)),
    "tied weights": (dict(make=lambda: _mlp(hidden=4)), dict(make=lambda: _mlp(hidden=4),
                                                             edit=_tie)),
    "eval mode": ({}, dict(edit=lambda m: m.eval())),
    "batch size": ({}, dict(batch=5)),
    "rows": ({}, dict(X=X[:30], y=Y[:30])),
    "validation or not": ({}, dict(val=None)),
    "validation rows": ({}, dict(val=(XV[:5], YV[:5]))),
    "epochs": ({}, dict(epochs=4)),
    "monitor": ({}, dict(monitor="val_accuracy")),
    "optimizer": ({}, dict(optimizer=lambda: nn.SGD(lr=0.05, momentum=0.9))),
    "regularizer's coef": ({}, dict(regularizer=lambda: nn.SklearnL2Regularizer(1e-2))),
    "regularizer's rule": ({}, dict(regularizer=lambda: nn.L2Regularizer(1e-3))),
    "arrays or a loader": ({}, dict(loader=False)),
    "a user's module": (dict(make=UserNet), dict(make=UserNet)),
}


@pytest.mark.parametrize("change", list(CHANGED))
def test_each_change_of_structure_or_form_takes_the_full_path(change):
    reference, changed = CHANGED[change]
    _check(reference, changed, takes=False)


def test_bad_data_raises_the_full_paths_error():
    bad = X.copy()
    bad[3, 1] = np.nan
    messages = []
    for record in (True, False):
        fresh_fit.clear()
        if record:
            _fit(loader=False)
        with pytest.raises(ValueError) as e:
            _fit(X=bad, loader=False)
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def test_a_record_keeps_no_data_alive():
    fresh_fit.clear()
    Xa, ya = X.copy(), Y.copy()
    refs = weakref.ref(Xa), weakref.ref(ya)
    _fit(X=Xa, y=ya, loader=False, val=None)
    del Xa, ya
    gc.collect()
    assert refs[0]() is None and refs[1]() is None


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="nothing compiles without JIT")
def test_fresh_fits_compile_nothing_new():
    _fit()
    _fit(dtype=np.float64)  # (both dtypes' loops and tables ready)
    compiles = []

    class Count(event.Listener):
        def on_start(self, ev):
            compiles.append(ev.data)

        def on_end(self, ev):
            pass

    before = _taken()
    with event.install_listener("numba:compile", Count()):
        for kwargs in ({}, dict(loader=False), dict(dtype=np.float64), dict(val=None)):
            _fit(**kwargs)
            _fit(**kwargs)
    assert _taken() > before
    assert compiles == []


def test_a_second_trainer_on_a_fitted_model_starts_from_its_trained_weights():
    def second_fit():
        nn.set_seed(7)
        model = _mlp()
        nn.Trainer(model, nn.Adam(lr=0.02)).fit(nn.DataLoader(X, Y, batch_size=8), epochs=2,
                                                verbose=False)
        trainer = nn.Trainer(model, nn.Adam(lr=0.02), regularizer=nn.SklearnL2Regularizer(1e-3))
        history = trainer.fit(nn.DataLoader(X, Y, batch_size=8), val=(XV, YV), epochs=3,
                              verbose=False)
        return [p.data.copy() for p in model.parameters()], history.drop(columns="seconds")

    fresh_fit.clear()
    _fit()  # (the record the second trainer takes)
    before = _taken()
    warm = second_fit()
    assert _taken() == before + 1  # (the first trainer's fit has another form)
    fresh_fit.clear()
    cold = second_fit()
    for u, v in zip(warm[0], cold[0], strict=True):
        np.testing.assert_array_equal(u, v)
    assert warm[1].equals(cold[1])


@pytest.mark.parametrize("form", ["loader", "arrays", "no validation", "no regularizer"])
def test_a_taken_record_leaves_the_key_a_repeated_fit_reads(form):
    """The repeated fit's key a fresh fit leaves (made from the fresh key's parts) is the one
    repeat_fit.fit_key reads afresh, and the trainer's next fit repeats it."""
    from nnjit.train.repeat_fit import fit_key

    fresh_fit.clear()
    val = None if form == "no validation" else (XV, YV)
    regularizer = None if form == "no regularizer" else nn.SklearnL2Regularizer(1e-3)

    def trainer():
        nn.set_seed(7)
        return nn.Trainer(_mlp(), nn.Adam(lr=0.02), regularizer=regularizer)

    def data():
        if form == "arrays":
            return (X, Y), dict(batch_size=8)
        return (nn.DataLoader(X, Y, batch_size=8),), {}

    args, kw = data()
    trainer().fit(*args, val=val, epochs=2, verbose=False, **kw)  # (recorded)
    t = trainer()
    args, kw = data()
    before = _taken()
    t.fit(*args, val=val, epochs=2, verbose=False, **kw)
    assert _taken() == before + 1
    arguments = (2, kw.get("batch_size"), None, 1e-4, 10, None, True, None, 1)
    key = t._last_fit.key
    assert key[1] == fit_key(t, *args, *([None] if len(args) == 1 else []), val, arguments)[1]
    assert all(a is b for a, b in zip(key[0], (t.program, t.loss, t.optimizer, t.regularizer)))
    setup = t._last_fit.setup
    t.fit(*args, val=val, epochs=2, verbose=False, **kw)
    assert t._last_fit.setup.plan is setup.plan  # (the repeat's fast path took it)
