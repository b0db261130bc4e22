"""Registry-driven op tests: every opcode in ``SPECS`` goes through the real interpreter.

For each op a tiny model is built whose inputs are parameters, so the interpreter computes their
gradients. Forward outputs are compared with the spec's NumPy ``ref`` and gradients with central
finite differences in float64, on hypothesis-generated shapes and values. A new opcode without a
builder here fails ``test_every_opcode_is_covered``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnjit as nn
from nnjit.graph.opcodes import ACTIVATIONS, GRAPH_OPCODES, LOSS_OPCODES, SPECS, Opcode
from nnjit.losses import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from tests.helpers import finite_difference_gradients

LOSS_FOR = {Opcode.SOFTMAX_CE: CrossEntropyLoss, Opcode.MSE: MSELoss,
            Opcode.BCE_WITH_LOGITS: BCEWithLogitsLoss}
BINARY = (Opcode.ADD, Opcode.MUL)
# Ops tested elsewhere: dropout (random; tests/graph/test_dropout.py, p=0 identity here) and
# Python ops (tests/nn/test_python_op.py compares them with the compiled equivalent).
SPECIAL = (Opcode.DENSE, Opcode.DROPOUT, Opcode.PYTHON_OP)


class Probe(nn.Module):
    """Applies one opcode to parameters (so the interpreter differentiates them)."""

    def __init__(self, opcode, arrays, hyper):
        super().__init__()
        self.opcode = opcode
        self.hyper = hyper
        for i, a in enumerate(arrays):
            setattr(self, f"p{i}", nn.Parameter(a))

    def forward(self, x):
        tape = x.tape
        ins = [tape.parameter(p, n) for n, p in self.named_parameters()]
        if self.opcode == Opcode.DENSE:
            return tape.dense(*ins)
        if self.opcode in BINARY:
            return tape.binary(self.opcode, *ins)
        if self.opcode == Opcode.DROPOUT:
            return tape.dropout(ins[0], *self.hyper)
        if self.opcode in ACTIVATIONS:
            return tape.unary(self.opcode, ins[0], *self.hyper)
        return ins[0]  # losses: the prediction is the parameter itself


def nudge(a, away=0.05):
    """Move values off kinks at 0 (relu, leaky relu, elu) so finite differences are valid."""
    return np.where(np.abs(a) < away, np.where(a < 0, -away, away), a)


def build(opcode, rows, cols, data):
    spec = SPECS[opcode]
    lo, hi = spec.input_domain
    elems = st.floats(lo, hi, allow_nan=False, width=64)
    draw = lambda shape: nudge(np.array(data.draw(st.lists(elems, min_size=int(np.prod(shape)),
                                                            max_size=int(np.prod(shape))))
                                        ).reshape(shape))
    hyper = tuple(spec.sample_hyper[h] for h in spec.hyper)
    if opcode == Opcode.DENSE:
        inner = data.draw(st.integers(1, 4))
        arrays = [draw((rows, inner)), draw((cols, inner)), draw((cols,))]
    elif opcode in BINARY:
        arrays = [draw((rows, cols)), draw((rows, cols))]
    else:
        arrays = [draw((rows, cols))]
    if opcode in LOSS_OPCODES:
        loss = LOSS_FOR[opcode]()
        if opcode == Opcode.SOFTMAX_CE:
            target = np.array(data.draw(st.lists(st.integers(0, cols - 1), min_size=rows,
                                                 max_size=rows)))
        elif opcode == Opcode.BCE_WITH_LOGITS:
            target = draw((rows, cols)) * 0 + np.array(
                data.draw(st.lists(st.integers(0, 1), min_size=rows * cols,
                                   max_size=rows * cols))).reshape(rows, cols)
        else:
            target = draw((rows, cols))
    else:
        loss = MSELoss()
        target = draw((rows, cols))
    model = Probe(opcode, arrays, hyper)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), loss, dtype=np.float64, seed=0)
    return model, trainer, arrays, target, hyper


def test_every_opcode_is_covered():
    # graph ops: tests/graph/test_graph_ops.py (they need a graph to run on)
    covered = (set(ACTIVATIONS) | set(BINARY) | set(LOSS_OPCODES) | set(SPECIAL)
               | set(GRAPH_OPCODES))
    missing = set(Opcode) - covered
    assert not missing, f"no test builder for {sorted(m.name for m in missing)}"
    assert set(SPECS) == set(Opcode), "every opcode needs an OpSpec"


DIFFERENTIABLE = [op for op in Opcode if op != Opcode.PYTHON_OP and op not in GRAPH_OPCODES]


@pytest.mark.parametrize("opcode", DIFFERENTIABLE, ids=lambda o: o.name.lower())
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), data=st.data())
def test_forward_matches_reference_and_backward_matches_finite_differences(opcode, rows, cols,
                                                                           data):
    if opcode == Opcode.SOFTMAX_CE and cols == 1:
        cols = 2
    model, trainer, arrays, target, hyper = build(opcode, rows, cols, data)
    X = np.zeros((rows, 1))
    grads = trainer.gradients(X, target)
    spec = SPECS[opcode]
    out = trainer.predict_outputs(X)
    if opcode in LOSS_OPCODES:
        expected = spec.ref(arrays[0], target.astype(np.float64))
        assert trainer.evaluate(X, target)["loss"] == pytest.approx(expected, rel=1e-10, abs=1e-12)
    elif opcode == Opcode.DROPOUT:  # p = 0 in the registry sample: the identity
        np.testing.assert_array_equal(out, arrays[0])
    else:
        kwargs = dict(zip(spec.hyper, hyper))
        np.testing.assert_allclose(out, spec.ref(*arrays, **kwargs), rtol=1e-10, atol=1e-12)
    numeric = finite_difference_gradients(trainer, model, X, target)
    for name in grads:
        np.testing.assert_allclose(grads[name], numeric[name], rtol=1e-5, atol=1e-7,
                                   err_msg=f"{opcode.name}: gradient of {name}")


def test_input_reused_accumulates_gradients():
    """x * x and x + x: both inputs are the same slot, so the second write must accumulate."""
    a = np.array([[0.5, -1.5, 2.0]])

    class Square(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(a)

        def forward(self, x):
            t = x.tape.parameter(self.p, "p")
            return t * t + t

    model = Square()
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    target = np.zeros((1, 3))
    g = trainer.gradients(np.zeros((1, 1)), target)["p"]
    y = a * a + a
    np.testing.assert_allclose(g, 2 * y / 3 * (2 * a + 1), rtol=1e-12)


def test_shared_weight_dense_accumulates():
    """The same Linear applied twice: weight gradients of both uses add up (scratch path)."""
    nn.set_seed(1)

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(nn.functional.tanh(self.fc(x)))

    model = Twice()
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    grads = trainer.gradients(X, Y)
    numeric = finite_difference_gradients(trainer, model, X, Y)
    for name in grads:
        np.testing.assert_allclose(grads[name], numeric[name], rtol=1e-5, atol=1e-8)
