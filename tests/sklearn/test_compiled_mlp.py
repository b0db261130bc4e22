"""The compiled MLP programs nnjit.sklearn fits on: laid out as scikit-learn's layers through the
layout service, reused from the one program cache by structure, never a program of another
structure, and each fit with its own arena."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("sklearn")
from nnjit.engine import program_cache  # noqa: E402
from nnjit.sklearn.compiled_mlp import CompiledMLP, Structure  # noqa: E402

BASE = Structure((4, 6, 5, 3), "relu", "softmax", np.dtype(np.float64), 16)


def test_weights_round_trip_in_scikit_learns_layout():
    net = CompiledMLP(BASE)
    rng = np.random.default_rng(0)
    coefs = [rng.normal(size=(a, b)) for a, b in [(4, 6), (6, 5), (5, 3)]]
    intercepts = [rng.normal(size=b) for b in (6, 5, 3)]
    net.load(coefs, intercepts)
    out = [np.zeros_like(c) for c in coefs], [np.zeros_like(b) for b in intercepts]
    net.store(*out)
    for mine, ref in zip(out[0] + out[1], coefs + intercepts):
        np.testing.assert_array_equal(mine, ref)
    # the penalised spans are the three weight matrices, not the biases
    assert net.reg_spans[:, 1].tolist() == [24, 30, 15]
    for w, (off, n) in zip(net.weights, net.reg_spans):  # views of the program's arena
        assert w.base is net.program.values and n == w.size


def _counts():
    return program_cache.stats["hits"], program_cache.stats["misses"]


@pytest.mark.parametrize("change", [
    dict(layer_units=(4, 7, 5, 3)), dict(activation="tanh"), dict(out_activation="logistic"),
    dict(dtype=np.dtype(np.float32)), dict(batch_size=32)])
def test_the_program_cache_never_lends_a_layout_of_another_structure(change):
    program_cache.clear()
    first = CompiledMLP(BASE)
    hits, misses = _counts()
    again = CompiledMLP(BASE)  # the same structure: the cached layout, a fresh arena
    assert _counts() == (hits + 1, misses)
    assert again.program.records is first.program.records
    assert again.program.values is not first.program.values
    other = dataclasses.replace(BASE, **change)
    net = CompiledMLP(other)
    assert _counts() == (hits + 1, misses + 1)
    assert net.program.dtype == other.dtype and net.program.max_batch == other.batch_size
    assert net.program.n_features == other.layer_units[0]


def test_a_cached_layout_fits_as_a_fresh_trace():
    """The same fit on a cache hit and on a fresh trace: the same weights, bit for bit."""
    from nnjit.sklearn import MLPClassifier

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 4)), rng.integers(0, 3, 40)

    def fit():
        est = MLPClassifier((6, 5), max_iter=5, batch_size=16, random_state=0,
                            dtype=np.float64)
        return est.fit(X, y).coefs_

    program_cache.clear()
    cold = fit()
    hits = program_cache.stats["hits"]
    warm = fit()
    assert program_cache.stats["hits"] == hits + 1
    for a, b in zip(cold, warm):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("sparse", [False, True])
def test_a_structures_later_nets_take_its_plan_without_a_layout(monkeypatch, sparse):
    """After a structure's first net, the next ones are instances of the cached layout made
    without modules or a Layout, with the same arena views, spans and offsets."""
    from nnjit.sklearn import compiled_mlp

    structure = dataclasses.replace(BASE, sparse=sparse)
    program_cache.clear()
    first = CompiledMLP(structure)
    layouts = []
    real = compiled_mlp.Layout
    monkeypatch.setattr(compiled_mlp, "Layout", lambda *a, **k: layouts.append(1) or real(*a, **k))
    again = CompiledMLP(structure)
    assert layouts == []  # (the plan: no modules built, walked or bound)
    assert again.program.records is first.program.records
    assert again.program.values is not first.program.values
    assert not again.program.values.any()  # (a fresh arena: zeros, as bound zero weights)
    np.testing.assert_array_equal(again.reg_spans, first.reg_spans)
    assert again._bias_offsets == first._bias_offsets
    for a, b in zip(again.weights + again.biases, first.weights + first.biases):
        assert a.base is again.program.values and a.shape == b.shape
        assert a.strides == b.strides and _offset(a) == _offset(b)
    program_cache.clear()  # the layout gone: the full path again
    CompiledMLP(structure)
    assert layouts == [1]


def _offset(view: np.ndarray) -> int:
    return view.__array_interface__["data"][0] - view.base.__array_interface__["data"][0]
