"""The program cache (nnjit.engine.program_cache): a fit of a model whose structure was laid out
before in the process reuses the layout (a hit) and trains exactly as a fresh trace would; any
structural change (each attribute in turn) traces anew (a miss), never reusing a stale layout."""

import numpy as np
import pytest

import nnjit as nn
from nnjit.engine import program_cache

F64 = np.float64


def _data(n=30, features=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, features))
    y = (X[:, 0] - X[:, 1] > 0).astype(np.int64)
    return X, y


X, Y = _data()


def _base(hidden=8, activation=nn.ReLU, p=0.1, bias=True, features=4):
    return nn.Sequential(nn.Linear(features, hidden), activation(), nn.Dropout(p),
                         nn.Linear(hidden, 2, bias=bias))


def _fit(make=_base, *, dtype=F64, batch=8, loss=None, optimizer=None, regularizer=None,
         X=X, y=Y, seed=0, eval_mode=False, lr=0.01):
    nn.set_seed(seed)
    model = make()
    if eval_mode:
        model.eval()
    trainer = nn.Trainer(model, optimizer() if optimizer else nn.Adam(lr=lr), loss,
                         regularizer() if regularizer else None, dtype=dtype, seed=seed)
    history = trainer.fit(nn.DataLoader(X, y, batch_size=batch), epochs=2, verbose=False)
    # (rows the fit's layout holds: predicting more lays out for inference, one more lookup)
    return history["train_loss"].to_numpy(), trainer.predict_outputs(X[:batch])


def _cold(**kwargs):
    """The same fit on a fresh trace (an empty cache)."""
    program_cache.clear()
    return _fit(**kwargs)


def _same(a, b):
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def _counts():
    return program_cache.stats["hits"], program_cache.stats["misses"]


def test_same_structure_hits_and_uses_the_new_weights_and_hyper_parameters():
    _cold()
    variants = [dict(seed=1, lr=0.05),  # other initial weights, learning rate
                dict(optimizer=lambda: nn.SGD(lr=0.1, momentum=0.9)),  # optimizer kind
                dict(regularizer=lambda: nn.L2Regularizer(1e-2)),
                dict(X=X + 1.0, y=1 - Y)]  # other data of the same shape
    for kwargs in variants:
        _fit()  # (the layout is cached)
        hits, misses = _counts()
        warm = _fit(**kwargs)
        assert _counts() == (hits + 1, misses), kwargs
        _same(warm, _cold(**kwargs))
        assert not np.array_equal(warm[1], _fit()[1])  # (the variant changed the training)


def _tied():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                          nn.Linear(8, 8), nn.Linear(8, 2))
    model[4].weight = model[2].weight
    return model


def _untied():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                         nn.Linear(8, 8), nn.Linear(8, 2))


X5, _ = _data(features=5)
ONE_HOT = np.eye(2)[Y]

STRUCTURAL = {
    "layer size": dict(make=lambda: _base(hidden=9)),
    "activation": dict(make=lambda: _base(activation=nn.Tanh)),
    "dropout rate": dict(make=lambda: _base(p=0.2)),
    "bias or not": dict(make=lambda: _base(bias=False)),
    "dtype": dict(dtype=np.float32),
    "batch size": dict(batch=5),
    "loss": dict(loss=nn.MSELoss(), y=ONE_HOT),
    "target width": dict(y=ONE_HOT),
    "input features": dict(make=lambda: _base(features=5), X=X5),
    "eval mode": dict(eval_mode=True),
    "tied weights": dict(make=_tied),
}


@pytest.mark.parametrize("change", list(STRUCTURAL))
def test_each_structural_change_traces_anew(change):
    kwargs = STRUCTURAL[change]
    reference = dict(make=_untied) if change == "tied weights" else {}
    _cold(**reference)
    _fit(**reference)  # a hit: the reference is cached
    hits, misses = _counts()
    warm = _fit(**kwargs)
    assert _counts() == (hits, misses + 1), change
    _same(warm, _cold(**kwargs))


ACTIVATION = "relu"  # read by Custom.forward: a user's forward may read anything


class Custom(nn.Module):
    """A user's model: traced at every fit (its forward may read a global); the layout of an
    identical trace is reused."""

    traces = 0

    def __init__(self, hidden=8):
        super().__init__()
        self.hidden = nn.Linear(4, hidden)
        self.out = nn.Linear(hidden, 2)

    def forward(self, x):
        Custom.traces += 1
        h = self.hidden(x)
        return self.out(nn.functional.relu(h) if ACTIVATION == "relu" else nn.functional.tanh(h))


def test_user_modules_are_traced_every_time_and_reuse_identical_traces():
    global ACTIVATION
    _cold(make=Custom)
    traces, (hits, misses) = Custom.traces, _counts()
    warm = _fit(make=Custom, seed=3)
    assert Custom.traces == traces + 1 and _counts() == (hits + 1, misses)
    _same(warm, _cold(make=Custom, seed=3))
    try:
        ACTIVATION = "tanh"  # the same module, another trace: never the cached layout
        hits, misses = _counts()
        changed = _fit(make=Custom, seed=3)
        assert _counts() == (hits, misses + 1)
        _same(changed, _cold(make=Custom, seed=3))
        assert not np.array_equal(changed[1], warm[1])
    finally:
        ACTIVATION = "relu"
    hits, misses = _counts()
    _fit(make=lambda: Custom(hidden=9))
    assert _counts() == (hits, misses + 1)


def test_attributes_the_structure_key_cannot_describe_fall_back_to_the_trace():
    def odd():
        model = _base()
        model[1].callback = lambda x: x  # not a plain value: no structure key
        return model

    program_cache.clear()
    first = _fit(make=odd)
    hits, misses = _counts()
    _same(_fit(make=odd), first)
    assert _counts() == (hits + 1, misses)  # (by the traced key)


def test_the_cache_keeps_no_arena_alive():
    import gc
    import weakref

    program_cache.clear()
    nn.set_seed(0)
    model = _base()
    trainer = nn.Trainer(model, dtype=F64, seed=0)
    trainer.fit(X, Y, epochs=1, verbose=False)
    arena = weakref.ref(trainer.program.values)
    del model, trainer
    gc.collect()
    assert arena() is None
    assert _fit(make=_base)[0].shape == (2,)  # (and the cached layout still serves)
