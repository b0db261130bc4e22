"""A plain fit that repeats the trainer's last one reuses its set-up
(:mod:`nnjit.train.repeat_fit`) and trains exactly as the full path does.

Every test runs the same sequence of fits on two trainers built alike: ``fast`` as a user
would, ``full`` with the recorded set-up dropped before each fit (so every fit of it takes the
full path). After each fit the weights, the optimizer state and the history must be bit-equal,
and the test checks which fits took the fast path.
"""

import numpy as np
import pytest

import nnjit as nn
from nnjit.train import fresh_fit
from nnjit.train import trainer as trainer_module


def _data(n=60, seed=0, features=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, features)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1)
    return X, y


def _trainer(features=4, reg=True):
    nn.set_seed(7)
    model = nn.Sequential(nn.Linear(features, 8), nn.ReLU(), nn.Linear(8, 3))
    return nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss(),
                      regularizer=nn.L2Regularizer(1e-4) if reg else None, seed=3)


class Pair:
    """The two trainers, fitted alike; counts the set-ups ``fast`` derives (the full path,
    or another trainer's set-up taken by its first fit) rather than repeats."""

    def __init__(self, monkeypatch, **kw):
        self.fast, self.full = _trainer(**kw), _trainer(**kw)
        self.full_setups = 0
        real = trainer_module.set_up_fit

        def counting(trainer, *args, **kwargs):
            if trainer is self.fast:
                self.full_setups += 1
            return real(trainer, *args, **kwargs)

        monkeypatch.setattr(trainer_module, "set_up_fit", counting)
        # (a first fit may take another trainer's set-up instead: nnjit.train.fresh_fit)
        real_take = fresh_fit.take

        def counting_take(trainer, *args):
            setup = real_take(trainer, *args)
            if trainer is self.fast and setup is not None:
                self.full_setups += 1
            return setup

        monkeypatch.setattr(fresh_fit, "take", counting_take)

    def both(self, action):
        """``action(trainer)`` on each trainer (a change made between fits)."""
        action(self.fast)
        action(self.full)

    def fit(self, *args, fast_path: bool, **kwargs):
        """Fit both; check they agree bit for bit and that ``fast`` took the path expected."""
        before = self.full_setups
        kwargs.setdefault("verbose", False)
        h_fast = self.fast.fit(*args, **kwargs)
        self.full._last_fit = None
        h_full = self.full.fit(*args, **kwargs)
        assert (self.full_setups == before) == fast_path
        np.testing.assert_array_equal(self.fast.program.params, self.full.program.params)
        np.testing.assert_array_equal(self.fast.optimizer.state, self.full.optimizer.state)
        assert len(h_fast) == len(h_full)
        cols = ["train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr"]
        np.testing.assert_array_equal(h_fast[cols].to_numpy(), h_full[cols].to_numpy())
        assert h_fast.attrs["stop_reason"] == h_full.attrs["stop_reason"]
        return h_fast


def test_a_loader_fit_repeated_takes_the_fast_path_and_trains_alike(monkeypatch):
    X, y = _data()
    Xv, yv = _data(20, seed=1)
    pair = Pair(monkeypatch)
    loader = nn.DataLoader(X, y, batch_size=16)
    pair.fit(loader, epochs=3, val=(Xv, yv), fast_path=False)  # (the first fit lays out)
    pair.fit(loader, epochs=3, val=(Xv, yv), fast_path=True)
    pair.fit(loader, epochs=3, val=(Xv, yv), fast_path=True)
    pair.both(lambda t: setattr(t.optimizer, "lr", 0.05))  # read by every fit: still fast
    pair.fit(loader, epochs=3, val=(Xv, yv), fast_path=True)
    pair.fit(loader, epochs=5, val=(Xv, yv), fast_path=False)  # another argument
    pair.fit(loader, epochs=5, val=(Xv, yv), fast_path=True)
    pair.fit(loader, epochs=5, val=(Xv, yv), tol=0.5, fast_path=False)
    pair.fit(loader, epochs=5, val=(Xv, yv), tol=0.5, fast_path=True)
    pair.fit(loader, epochs=5, fast_path=False)  # no validation
    pair.fit(loader, epochs=5, fast_path=True)


def test_arrays_are_read_again_new_ones_of_one_shape_and_contents_changed_in_place(monkeypatch):
    X, y = _data()
    Xv, yv = _data(20, seed=1)
    pair = Pair(monkeypatch)
    pair.fit(X, y, epochs=2, batch_size=16, val=(Xv, yv), fast_path=False)
    pair.fit(X, y, epochs=2, batch_size=16, val=(Xv, yv), fast_path=True)
    X2, y2 = _data(seed=5)  # other arrays, same shapes
    pair.fit(X2, y2, epochs=2, batch_size=16, val=(Xv, yv), fast_path=True)
    X2 *= 3.0  # in place
    yv[:5] = 2
    pair.fit(X2, y2, epochs=2, batch_size=16, val=(Xv, yv), fast_path=True)
    X64 = X2.astype(np.float64)  # another dtype: the full path casts it
    pair.fit(X64, y2, epochs=2, batch_size=16, val=(Xv, yv), fast_path=False)
    X64[:3] *= 1e3
    pair.fit(X64, y2, epochs=2, batch_size=16, val=(Xv, yv), fast_path=True)
    X3, y3 = _data(n=44, seed=6)  # another shape
    pair.fit(X3, y3, epochs=2, batch_size=16, val=(Xv, yv), fast_path=False)
    pair.fit(X3, y3, epochs=2, batch_size=16, val=(Xv, yv), fast_path=True)
    pair.fit(X3, y3, epochs=2, batch_size=8, val=(Xv, yv), fast_path=False)  # another batch
    pair.fit(X3, y3, epochs=2, batch_size=8, fast_path=False)  # no validation
    X4, y4 = _data(n=44, seed=9)
    pair.fit(X4, y4, epochs=2, batch_size=8, fast_path=True)


def test_other_changes_take_the_full_path(monkeypatch):
    X, y = _data()
    Xv, yv = _data(20, seed=1)
    pair = Pair(monkeypatch)
    loader = nn.DataLoader(X, y, batch_size=16)

    def fit(fast_path, **kw):
        return pair.fit(loader, epochs=4, val=(Xv, yv), fast_path=fast_path, **kw)

    fit(False)
    fit(True)
    seen = []
    fit(False, callbacks=[lambda h: seen.append(len(h))])  # a callback: a per-epoch fit
    assert seen[-1] == 4
    fit(False)  # (a fit with callbacks records nothing)
    fit(True)
    pair.both(lambda t: setattr(t.regularizer, "coef", 1e-2))
    fit(False)
    fit(True)
    loader.batch_size = 10  # the loader's batching
    fit(False)
    fit(True)
    pair.both(lambda t: t.predict(np.zeros((3000, 4), np.float32)))  # a larger inference layout
    fit(False)
    fit(True)
    pair.both(lambda t: setattr(t, "optimizer", nn.SGD(lr=0.1)))
    pair.both(lambda t: t.optimizer.build(t.program.n_trainable, t.dtype))
    fit(False)
    fit(True)
    other = nn.DataLoader(X, y, batch_size=10)  # another loader, same contents
    pair.fit(other, epochs=4, val=(Xv, yv), fast_path=False)


def test_weights_taken_by_another_program_are_bound_again(monkeypatch):
    X, y = _data()
    pair = Pair(monkeypatch, reg=False)
    pair.fit(X, y, epochs=2, batch_size=16, fast_path=False)
    pair.fit(X, y, epochs=2, batch_size=16, fast_path=True)
    # a second trainer on the same model binds its parameters to its own arena
    pair.both(lambda t: nn.Trainer(t.model, seed=1).fit(X, y, epochs=1, verbose=False))
    pair.fit(X, y, epochs=2, batch_size=16, fast_path=True)


def test_bad_contents_raise_as_the_full_path_does(monkeypatch):
    X, y = _data()
    Xv, yv = _data(20, seed=1)
    pair = Pair(monkeypatch)
    pair.fit(X, y, epochs=2, batch_size=16, val=(Xv, yv), fast_path=False)
    pair.fit(X, y, epochs=2, batch_size=16, val=(Xv, yv), fast_path=True)
    for change, message in ((lambda: Xv.__setitem__((3, 1), np.nan), "contains NaN"),
                            (lambda: yv.__setitem__(4, 3), "label 3 out of range")):
        change()
        with pytest.raises(ValueError, match=message) as fast_error:
            pair.fast.fit(X, y, epochs=2, batch_size=16, val=(Xv, yv), verbose=False)
        pair.full._last_fit = None
        with pytest.raises(ValueError) as full_error:
            pair.full.fit(X, y, epochs=2, batch_size=16, val=(Xv, yv), verbose=False)
        assert str(fast_error.value) == str(full_error.value)
        Xv, yv = _data(20, seed=1)
