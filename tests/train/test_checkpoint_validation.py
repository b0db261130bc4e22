"""Every field of a checkpoint is checked on load, before anything changes: a forged file (valid
checksum, bad content) gets an NNEFormatError naming the file and the field, never a crash, a hang
or another exception."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.kernels import rng
from nnjit.schedulers import ReduceLROnPlateau
from nnjit.train.builtin_callbacks import EarlyStopping
from nnjit.io.nne import load_nne, save_nne


def make_model():
    nn.set_seed(1)
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Dropout(0.1), nn.Linear(6, 3))


def data():
    X, y = nn.datasets.load_iris()
    return nn.datasets.standardize(X)[:100], y[:100], nn.datasets.standardize(X)[100:], y[100:]


def fit(trainer, epochs, initial_epoch=0):
    X, y, Xv, yv = data()
    return trainer.fit(nn.DataLoader(X, y, batch_size=20), epochs=epochs, val=(Xv, yv),
                       initial_epoch=initial_epoch, verbose=False,
                       scheduler=ReduceLROnPlateau(patience=1),
                       callbacks=[EarlyStopping(patience=4, restore_best_weights=True)])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    trainer = nn.Trainer(make_model(), nn.Adam(lr=0.01), seed=2)
    fit(trainer, 3)
    path = tmp_path_factory.mktemp("base") / "base.nne"
    trainer.save_checkpoint(path)
    return path


def forge(base, path, change):
    """Decode ``base``, let ``change(groups, metadata)`` edit it, re-encode (valid checksum)."""
    nne = load_nne(base)
    groups = {g: {n: np.array(a, copy=True) for n, a in t.items()} for g, t in nne.groups.items()}
    metadata = dict(nne.metadata)
    change(groups, metadata)
    save_nne(path, groups, metadata)
    return path


def setitem(group, name, value):
    def change(groups, metadata):
        groups[group][name] = value
    return change


def fit_value(name, value):
    return setitem("fit", name, np.array(value, dtype=np.float64))


def perm_with(i, value):
    def change(groups, metadata):
        groups["rng"]["shuffle_order"][i] = value
    return change


def drop(group, name):
    def change(groups, metadata):
        del groups[group][name]
    return change


def meta(key, value):
    def change(groups, metadata):
        metadata[key] = value
    return change


def callback_meta(value):
    def change(groups, metadata):
        metadata["callbacks"] = {**metadata["callbacks"], "EarlyStopping": value}
    return change


FORGERIES = {
    # the integer array the compiled loop indexes the training rows with
    "shuffle order out of range": (perm_with(3, 100), r"rng/shuffle_order'.*not a permutation "
                                   r"of 0\.\.99: value 100 at index 3 is out of range"),
    "shuffle order negative": (perm_with(0, -5), r"value -5 at index 0 is out of range"),
    "shuffle order huge": (perm_with(7, 2**62), r"out of range"),
    "shuffle order repeats": (perm_with(0, 1), r"not a permutation.* is missing"),
    "shuffle order float": (setitem("rng", "shuffle_order", np.arange(100.0)),
                            r"rng/shuffle_order' has dtype float64, expected int64"),
    "shuffle order 2-d": (setitem("rng", "shuffle_order", np.arange(100).reshape(10, 10)),
                          r"rng/shuffle_order' has shape \(10, 10\)"),
    # the generator's state
    "rng all zero": (setitem("rng", "state", np.zeros(4, dtype=np.int64)), r"rng/state' is all "
                     r"zero"),
    "rng one word": (setitem("rng", "state", np.ones(1, dtype=np.int64)), r"rng/state' has shape "
                     r"\(1,\), expected \(4,\)"),
    "rng int32": (setitem("rng", "state", np.ones(4, dtype=np.int32)), r"rng/state' has dtype "
                  r"int32, expected int64"),
    "rng unknown tensor": (setitem("rng", "extra", np.zeros(1)), r"group 'rng' has unknown "
                           r"tensor 'extra'"),
    # the fit state
    "fit_step negative": (fit_value("fit_step", -1e18), r"fit/fit_step is -1e\+18, expected a "
                          r"whole number"),
    "fit_step NaN": (fit_value("fit_step", np.nan), r"fit/fit_step is nan"),
    "fit_step fractional": (fit_value("fit_step", 2.5), r"fit/fit_step is 2\.5"),
    "epoch negative": (fit_value("epoch", -1.0), r"fit/epoch is -1\.0"),
    "best epoch after epochs done": (fit_value("best_epoch", 3.0), r"fit/best_epoch is 3\.0, "
                                     r"expected a whole number in \[-1, 2\]"),
    "bad epochs beyond epochs": (fit_value("bad_epochs", 4.0), r"fit/bad_epochs is 4\.0"),
    "stopped 2": (fit_value("stopped", 2.0), r"fit/stopped is 2\.0, expected 0 or 1"),
    "monitor unknown": (fit_value("monitor", 7.0), r"fit/monitor is 7\.0"),
    "lr negative": (fit_value("lr", -0.1), r"fit/lr is -0\.1"),
    "best NaN": (fit_value("best", np.nan), r"fit/best is NaN"),
    "fit scalar as vector": (setitem("fit", "epoch", np.array([3.0])), r"fit/epoch' has shape "
                             r"\(1,\), expected 0 dimensions"),
    "fit scalar int": (setitem("fit", "epoch", np.array(3)), r"fit/epoch' has dtype int64"),
    "fit scalar missing": (drop("fit", "lr"), r"group 'fit' lacks tensor 'lr'"),
    "plateau size": (setitem("fit", "plateau", np.zeros(5)), r"fit/plateau' has 5 values, "
                     r"expected 0 or 12"),
    "plateau counter": (lambda g, m: g["fit"]["plateau"].__setitem__(10, -3.0),
                        r"fit/plateau num_bad_epochs is -3\.0"),
    "best params size": (setitem("fit", "best_params", np.zeros(5, dtype=np.float32)),
                         r"fit/best_params' has 5 values, expected 0 or the model's 51"),
    "best params int": (setitem("fit", "best_params", np.zeros(51, dtype=np.int64)),
                        r"fit/best_params' has dtype int64"),
    # the optimizer
    "optimizer iterations negative": (meta("optimizer", {"class": "Adam", "iterations": -1}),
                                      r"metadata 'optimizer' iterations is -1"),
    "optimizer iterations text": (meta("optimizer", {"class": "Adam", "iterations": "7"}),
                                  r"iterations is '7'"),
    "optimizer iterations bool": (meta("optimizer", {"class": "Adam", "iterations": True}),
                                  r"iterations is True"),
    "optimizer metadata null": (meta("optimizer", None), r"metadata 'optimizer' is not an "
                                r"object"),
    "optimizer metadata missing": (lambda g, m: m.pop("optimizer"), r"metadata 'optimizer' is "
                                   r"missing"),
    "optimizer state int": (setitem("optimizer", "state", np.zeros((2, 51), dtype=np.int64)),
                            r"optimizer/state' has dtype int64"),
    "optimizer state shape": (setitem("optimizer", "state", np.zeros((1, 51), np.float32)),
                              r"optimizer/state' has shape \(1, 51\), expected \(2, 51\)"),
    # parameters
    "param int": (setitem("params", "0.bias", np.zeros(6, dtype=np.int32)),
                  r"params/0.bias' has dtype int32, expected float32 or float64"),
    # callbacks and metadata
    "callbacks not an object": (meta("callbacks", [1]), r"metadata 'callbacks' is a list"),
    "callback state not an object": (callback_meta(False), r"callbacks'\['EarlyStopping'\] "
                                     r"is not a callback state object"),
    "callback entry a number": (callback_meta({"monitor": 3}), r"\['monitor'\] is int"),
    "early stopping wait float": (setitem("callbacks", "EarlyStopping/wait", np.array(1.5)),
                                  r"callback state 'EarlyStopping' entry 'wait' is float, "
                                  r"expected int"),
    "early stopping wait negative": (setitem("callbacks", "EarlyStopping/wait",
                                             np.array(-2)), r"entry 'wait' is -2"),
    "early stopping entry missing": (drop("callbacks", "EarlyStopping/best"),
                                     r"callback state 'EarlyStopping' lacks 'best'"),
    "early stopping weights shape": (setitem("callbacks", "EarlyStopping/best_weights.1",
                                             np.zeros(7, np.float32)),
                                     r"entry 'best_weights.1' has shape \(7,\), expected \(6,\)"),
    "early stopping weights numbering": (
        lambda g, m: g["callbacks"].__setitem__(
            "EarlyStopping/best_weights.9", g["callbacks"].pop("EarlyStopping/best_weights.3")),
        r"best_weights entries not numbered 0\.\.3"),
    "callback tensor name": (setitem("callbacks", "wait", np.array(1)),
                             r"callbacks/wait' is not named <callback>/<entry>"),
    "model name a number": (meta("model", 5), r"metadata 'model' is int, expected a string"),
}


@pytest.mark.parametrize("case", list(FORGERIES))
def test_forged_field_is_refused_by_name_and_nothing_changes(base, tmp_path, case):
    change, message = FORGERIES[case]
    path = forge(base, tmp_path / "forged.nne", change)
    trainer = nn.Trainer(make_model(), nn.Adam(lr=0.01), seed=5)
    fit(trainer, 1)
    weights = trainer.model.state_dict()
    moments = trainer.optimizer.state.copy()
    order, generator = trainer._perm.copy(), trainer.program.rng.copy()
    with pytest.raises(nn.NNEFormatError, match=message) as info:
        trainer.load_checkpoint(path)
    assert info.value.path == str(path)
    for name, array in trainer.model.state_dict().items():
        np.testing.assert_array_equal(array, weights[name])
    np.testing.assert_array_equal(trainer.optimizer.state, moments)
    np.testing.assert_array_equal(trainer._perm, order)
    np.testing.assert_array_equal(trainer.program.rng, generator)
    assert trainer.optimizer.iterations == 5


def test_parameter_names_and_shapes_give_state_mismatch(base, tmp_path):
    path = forge(base, tmp_path / "f.nne", setitem("params", "0.bias", np.zeros(7, np.float32)))
    with pytest.raises(nn.StateMismatchError, match=r"'0.bias': expected \(6,\), got \(7,\)"):
        nn.Trainer(make_model(), nn.Adam()).load_checkpoint(path)
    with pytest.raises(nn.StateMismatchError, match="f.nne"):
        make_model().load_weights(path)


def test_load_weights_refuses_integer_parameters(base, tmp_path):
    path = forge(base, tmp_path / "w.nne", setitem("params", "3.weight",
                                                   np.zeros((3, 6), np.uint8)))
    model = make_model()
    before = model.state_dict()
    with pytest.raises(nn.NNEFormatError, match=r"w.nne: tensor 'params/3.weight' has dtype "
                                                r"uint8"):
        model.load_weights(path)
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(array, before[name])


def test_valid_forgeries_still_load_and_train(base, tmp_path):
    """Changes that keep every invariant load: a different permutation, another valid RNG
    state, float64 parameters, a file without fit and callback groups."""
    def change(groups, metadata):
        groups["rng"]["shuffle_order"] = np.arange(100)[::-1].copy()
        groups["rng"]["state"] = rng.seed_state(99)
        groups["params"] = {k: v.astype(np.float64) for k, v in groups["params"].items()}
        del groups["fit"], groups["callbacks"]
        del metadata["callbacks"]
    path = forge(base, tmp_path / "ok.nne", change)
    trainer = nn.Trainer(make_model(), nn.Adam(lr=0.01))
    trainer.load_checkpoint(path)
    np.testing.assert_array_equal(trainer._perm, np.arange(100)[::-1])
    history = fit(trainer, 4, initial_epoch=3)
    assert list(history["epoch"]) == [4]
    assert np.isfinite(history["train_loss"]).all()


def test_shuffle_order_of_another_length_is_replaced_at_fit(base, tmp_path):
    """A permutation for another number of rows is valid on its own; fit starts a fresh order
    for the rows it has instead of indexing past them."""
    path = forge(base, tmp_path / "p.nne", setitem("rng", "shuffle_order",
                                                   np.arange(500)[::-1].copy()))
    trainer = nn.Trainer(make_model(), nn.Adam(lr=0.01))
    trainer.load_checkpoint(path)
    fit(trainer, 4, initial_epoch=3)
    assert sorted(trainer._perm) == list(range(100))


@pytest.mark.parametrize("n", [3, 120, 2**31 + 11, 2**40 + 3])
def test_next_below_on_the_all_zero_state_ends_in_range(n):
    """The all-zero xoshiro state only ever draws 0, which Lemire's and the bitmask rejection
    loops would reject forever: the loops are bounded, the value still in [0, n)."""
    state = np.zeros(rng.STATE_WORDS, dtype=np.int64)
    values = [rng.next_below(state, n) for _ in range(3)]
    assert all(0 <= v < n for v in values)
    perm = np.arange(50, dtype=np.int64)
    rng.shuffle(perm, state)
    assert sorted(perm) == list(range(50))


def test_bounded_rejection_keeps_draws_of_a_valid_state():
    """The bound never binds for a valid state: the draws are those of the unbounded loop
    (reference: numpy's Lemire implementation is not the same stream, so compare with a Python
    model of the loop)."""
    state = rng.seed_state(7)
    mirror = state.copy()
    for n in (3, 5, 7, 1000, 2**31 + 1, 2**33 + 5):
        for _ in range(200):
            got = rng.next_below(state, n)
            assert got == _reference_next_below(mirror, n)


def _reference_next_below(state, n):
    """next_below with unbounded loops, in Python on the same generator."""
    if n <= 0xFFFFFFFF:
        m = (int(rng.next_u64(state)) >> 32) * n
        low = m & 0xFFFFFFFF
        if low < n:
            threshold = (2**32 - n) % n
            while low < threshold:
                m = (int(rng.next_u64(state)) >> 32) * n
                low = m & 0xFFFFFFFF
        return m >> 32
    mask = (1 << (n - 1).bit_length()) - 1
    while True:
        r = int(rng.next_u64(state)) & mask
        if r < n:
            return r


@pytest.mark.parametrize("state,problem", [
    (np.zeros(4, np.int64), "all zero"),
    (np.ones(3, np.int64), r"shape \(3,\)"),
    (np.ones(4, np.float64), "dtype float64"),
    ([1, 2, 3, 4], "is a list"),
])
def test_state_problem(state, problem):
    import re

    assert re.search(problem, rng.state_problem(state))
    assert rng.state_problem(rng.seed_state(0)) is None


@pytest.mark.parametrize("value", ["3", -1, 2.0, True, None, [3]])
def test_metadata_epoch_is_checked(base, tmp_path, value):
    from nnjit.train.checkpoint import metadata_epoch

    assert metadata_epoch(load_nne(forge(base, tmp_path / "e.nne", meta("epoch", 4)))) == 4
    assert metadata_epoch(load_nne(base), default=7) == 7
    nne = load_nne(forge(base, tmp_path / "e.nne", meta("epoch", value)))
    with pytest.raises(nn.NNEFormatError, match=r"e.nne: metadata 'epoch' is .*, expected a whole"):
        metadata_epoch(nne)
