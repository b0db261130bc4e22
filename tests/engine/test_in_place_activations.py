"""A large ReLU, tanh or sigmoid read after a dense layer runs in place (nnjit.engine.fusion):
one activation slot and one gradient slot per hidden layer, as scikit-learn's MLP keeps them,
and the same values and gradients as the two-slot program. The tests lower the size from which
the rewrite applies (fusion.IN_PLACE_MIN_BYTES) to their small models, but the last one."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.engine import fusion, program_cache
from nnjit.ops import registry
from nnjit.tape.arena import S_COLS, S_ROWS
from tests.helpers import finite_difference_gradients

F64 = np.float64
RNG = np.random.default_rng(0)
X = RNG.normal(size=(24, 5))
Y = RNG.normal(size=(24, 2))


@pytest.fixture(autouse=True)
def _any_size(request, monkeypatch):
    if "default_size" not in request.node.name:
        monkeypatch.setattr(fusion, "IN_PLACE_MIN_BYTES", 0)
        program_cache.clear()  # (layouts made under another rule)
    yield
    program_cache.clear()


def _trainer(model, **kw):
    return nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=F64, seed=0, **kw)


def test_the_arenas_hold_one_hidden_activation_less(monkeypatch):
    """Against the program without the rewrite: the dense output's slot (24 rows x 40) is gone
    from both arenas."""
    def arenas():
        program_cache.clear()
        nn.set_seed(1)
        trainer = _trainer(nn.Sequential(nn.Linear(5, 40), nn.ReLU(), nn.Linear(40, 2)))
        trainer.gradients(X, Y)
        return trainer.program.values.size, trainer.program.grads.size

    in_place = arenas()
    monkeypatch.setattr(fusion, "_IN_PLACE", frozenset())
    two_slots = arenas()
    program_cache.clear()
    assert two_slots[0] - in_place[0] == two_slots[1] - in_place[1] == 24 * 40


def _activation_slots(program) -> int:
    """Rows x columns of the batch-sized slots the program's records use (its activations)."""
    used = {s for n in program.nodes for s in (*n.inputs, n.out)}
    return sum(int(program.slots[s, S_ROWS] * program.slots[s, S_COLS]) for s in used
               if not program.tape.slots[s].param)


@pytest.mark.parametrize("activation", [nn.ReLU, nn.Tanh, nn.Sigmoid])
def test_a_hidden_layer_keeps_one_activation_and_its_gradients_are_right(activation):
    nn.set_seed(1)
    model = nn.Sequential(nn.Linear(5, 40), activation(), nn.Linear(40, 2))
    trainer = _trainer(model)
    grads = trainer.gradients(X, Y)
    program = trainer.program
    dense, act = program.nodes[0], program.nodes[1]
    assert dense.out == act.inputs[0] == act.out  # the activation overwrites the dense output
    assert not act.accumulate[0]  # its backward overwrites the gradient it reads
    # input 5 + hidden 40 + output 2 + target 2 + loss 1, per row (no second hidden slot)
    assert _activation_slots(program) == 24 * (5 + 40 + 2 + 2) + 1
    numeric = finite_difference_gradients(trainer, model, X, Y)
    for name, g in grads.items():
        np.testing.assert_allclose(g, numeric[name], rtol=1e-6, atol=1e-8)


class TwoReaders(nn.Module):
    """A hidden activation read by two layers (its gradient accumulates from both before the
    in-place backward turns it into the dense output's)."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(5, 8)
        self.a = nn.Linear(8, 2)
        self.b = nn.Linear(8, 2)

    def forward(self, x):
        h = nn.functional.relu(self.hidden(x))
        return self.a(h) + self.b(h)


def test_an_activation_with_two_readers_gets_both_gradients():
    nn.set_seed(2)
    model = TwoReaders()
    trainer = _trainer(model)
    grads = trainer.gradients(X, Y)
    assert any(n.inputs and n.inputs[0] == n.out for n in trainer.program.nodes)
    numeric = finite_difference_gradients(trainer, model, X, Y)
    for name, g in grads.items():
        np.testing.assert_allclose(g, numeric[name], rtol=1e-6, atol=1e-8)


class SeenTwice(nn.Module):
    """A dense output read by the activation and by another op: it must keep its values."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(5, 2)

    def forward(self, x):
        z = self.hidden(x)
        return nn.functional.tanh(z) + z


def test_a_dense_output_read_twice_is_not_overwritten():
    nn.set_seed(3)
    model = SeenTwice()
    trainer = _trainer(model)
    grads = trainer.gradients(X, Y)
    assert not any(n.inputs and n.inputs[0] == n.out for n in trainer.program.nodes)
    z = X @ model.hidden.weight.data.T + model.hidden.bias.data
    np.testing.assert_allclose(trainer.predict_outputs(X), np.tanh(z) + z, rtol=1e-12)
    numeric = finite_difference_gradients(trainer, model, X, Y)
    for name, g in grads.items():
        np.testing.assert_allclose(g, numeric[name], rtol=1e-6, atol=1e-8)


def test_only_activations_whose_backward_reads_the_output_run_in_place():
    assert fusion._IN_PLACE == {registry.opcode(n) for n in ("RELU", "TANH", "SIGMOID")}
    nn.set_seed(4)
    model = nn.Sequential(nn.Linear(5, 6), nn.ELU(), nn.Linear(6, 2))  # ELU reads its input
    trainer = _trainer(model)
    trainer.gradients(X, Y)
    assert not any(n.inputs and n.inputs[0] == n.out for n in trainer.program.nodes)


def test_a_small_activation_keeps_its_two_slots_at_the_default_size():
    """Below IN_PLACE_MIN_BYTES the activation writes its own slot: its kernels vectorise only
    when input and output differ, and its memory is small."""
    nn.set_seed(5)
    trainer = _trainer(nn.Sequential(nn.Linear(5, 40), nn.ReLU(), nn.Linear(40, 2)))
    trainer.gradients(X, Y)
    assert 24 * 40 * 8 < fusion.IN_PLACE_MIN_BYTES
    assert not any(n.inputs and n.inputs[0] == n.out for n in trainer.program.nodes)
