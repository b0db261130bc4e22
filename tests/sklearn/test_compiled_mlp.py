"""The compiled MLP programs nnjit.sklearn lends to fits: laid out as scikit-learn's layers,
pooled by structure, never handed to a fit of another structure."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("sklearn")
from nnjit.sklearn import compiled_mlp  # noqa: E402
from nnjit.sklearn.compiled_mlp import CompiledMLP, Structure, borrow  # noqa: E402

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


@pytest.mark.parametrize("change", [
    dict(layer_units=(4, 7, 5, 3)), dict(activation="tanh"), dict(out_activation="logistic"),
    dict(dtype=np.dtype(np.float32)), dict(batch_size=32)])
def test_the_pool_never_lends_a_program_of_another_structure(change, monkeypatch):
    monkeypatch.setattr(compiled_mlp, "_POOL", compiled_mlp.OrderedDict())
    with borrow(BASE) as first:
        pass
    with borrow(BASE) as again:
        assert again is first  # the same structure: the idle program comes back
    other = dataclasses.replace(BASE, **change)
    with borrow(other) as net:
        assert net is not first and net.structure == other
        assert net.program.dtype == other.dtype and net.program.max_batch == other.batch_size


def test_concurrent_fits_borrow_separate_programs(monkeypatch):
    monkeypatch.setattr(compiled_mlp, "_POOL", compiled_mlp.OrderedDict())
    with borrow(BASE) as a, borrow(BASE) as b:
        assert a is not b
