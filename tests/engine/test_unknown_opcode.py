"""No silent fall-through: a record whose opcode no dispatch branch handles stops the run.

Each test forges the opcode column of a traced program's records (the only way to reach a
missing branch without adding an op) and checks that the compiled loop stops with an error naming
the op and the layer that owns the record, in the forward and the backward replay, and through
the activation dispatcher's own final branch.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.engine.status import UnknownOpcodeError
from nnjit.ops import activations as kf
from nnjit.ops.opcodes import GRAPH_LAST, R_OPCODE, SPECS, Opcode

UNUSED = 99  # no Opcode member, and above every family's block
assert UNUSED not in set(Opcode) and UNUSED > GRAPH_LAST


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(20, 4)).astype(np.float32), rng.integers(0, 3, 20)


def trained(model):
    X, y = data()
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.CrossEntropyLoss())
    trainer.fit(nn.DataLoader(X, y, batch_size=10), epochs=1, verbose=False)
    return trainer


def record_of(program, opcode, owner):
    return next(i for i, n in enumerate(program.nodes) if n.opcode == opcode and n.owner == owner)


@pytest.mark.parametrize("forged, named", [
    (UNUSED, "opcode 99, which is not in nnjit.ops.opcodes.Opcode"),
    # the activation family's block (20-29): its dispatcher's final else returns the flag
    (int(Opcode.GELU) + 1, "opcode 28, which is not in"),
    # a graph op in the base build, which compiles no graph dispatcher
    (int(Opcode.SPMM), r"spmm \(opcode 70\)"),
])
def test_forward_replay_stops_at_an_unknown_opcode(forged, named):
    model = Net()
    trainer = trained(model)
    program = trainer.program
    i = record_of(program, Opcode.RELU, "act")
    program.records[i, R_OPCODE] = forged
    X, y = data()
    before = [p.data.copy() for p in model.parameters()]
    with pytest.raises(UnknownOpcodeError, match=rf"op {i} of layer 'act' is {named}"):
        trainer.predict(X[:10])  # (the rows the fit's layout holds: predict runs on it)
    with pytest.raises(UnknownOpcodeError, match=rf"op {i} of layer 'act' is {named}"):
        trainer.fit(nn.DataLoader(X, y, batch_size=10), epochs=2, verbose=False)
    for a, b in zip(before, model.parameters()):  # stopped before any step
        np.testing.assert_array_equal(a, b.data)
    program.records[i, R_OPCODE] = Opcode.RELU  # the same program runs again once repaired
    assert trainer.predict(X[:10]).shape == (10,)


class ForgingOp(nn.Op):
    """Identity as a Python op; when armed, its forward forges a record already replayed
    forward, so only the backward replay meets the unknown opcode."""

    armed: tuple | None = None

    def __init__(self, tape, x):
        super().__init__()
        self.x = x
        self.out = tape.alloc_tensor(x.rows, x.cols, True)

    def forward(self):
        self.out.data[...] = self.x.data
        if ForgingOp.armed is not None:
            records, i = ForgingOp.armed
            records[i, R_OPCODE] = UNUSED

    def backward(self):
        self.x.grad[:] += self.out.grad


class NetWithPythonOp(Net):
    def forward(self, tape, x):
        return self.fc2(ForgingOp(tape, self.act(self.fc1(x))).out)


def test_backward_replay_stops_at_an_unknown_opcode():
    model = NetWithPythonOp()
    trainer = trained(model)
    program = trainer.program
    i = record_of(program, Opcode.DENSE, "fc1")
    X, y = data()
    ForgingOp.armed = (program.records, i)
    try:
        with pytest.raises(UnknownOpcodeError, match=rf"op {i} of layer 'fc1' is opcode 99"):
            trainer.fit(nn.DataLoader(X, y, batch_size=10), epochs=1, verbose=False)
    finally:
        ForgingOp.armed = None
    # forward replayed the record as a dense op before the Python op forged it: the forward
    # output exists, and the stop came from the backward branch
    assert program.records[i, R_OPCODE] == UNUSED


@pytest.mark.parametrize("op", [Opcode.DENSE, Opcode.DROPOUT, Opcode.GELU + 1])
def test_activation_dispatchers_refuse_a_non_activation(op):
    x = np.linspace(-2, 2, 7)
    y = np.full_like(x, 7.0)
    dx = np.full_like(x, 5.0)
    assert kf.activation_forward(np.int32(op), x, y, 0.0) is False
    assert kf.activation_backward(np.int32(op), x, y, np.ones_like(x), dx, False, 0.0) is False
    assert (y == 7.0).all() and (dx == 5.0).all()  # nothing written (it used to compute GELU)


def test_gelu_still_matches_its_reference():
    x = np.linspace(-3, 3, 61)
    y = np.empty_like(x)
    assert kf.activation_forward(np.int32(Opcode.GELU), x, y, 0.0) is True
    np.testing.assert_allclose(y, SPECS[Opcode.GELU].ref(x), rtol=1e-12, atol=1e-15)
    # through the compiled loop, in a model
    model = nn.Sequential(nn.Linear(4, 5), nn.GELU())
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    X = np.random.default_rng(1).normal(size=(6, 4))
    pre = X @ model[0].weight.data.T + model[0].bias.data
    np.testing.assert_allclose(trainer.predict(X), SPECS[Opcode.GELU].ref(pre), rtol=1e-12,
                               atol=1e-14)


def test_graph_build_stops_at_an_unknown_opcode():
    from tests.gnn.graphs import OneLayer

    rng = np.random.default_rng(0)
    n = 12
    graph = nn.Graph.from_arrays(rng.normal(size=(n, 3)), rng.integers(0, n, (2, 30)),
                                 rng.integers(0, 3, n), train_mask=np.arange(n) < 6)
    trainer = nn.Trainer(OneLayer(nn.GCNConv(3, 3)), nn.SGD(lr=0.1), dtype=np.float64, seed=0)
    trainer.gradients(graph)  # the graph build runs every graph op forward and backward
    program = trainer.program
    i = next(k for k, node in enumerate(program.nodes) if node.opcode == Opcode.SPMM)
    program.records[i, R_OPCODE] = UNUSED
    layer = program.nodes[i].owner
    assert layer
    with pytest.raises(UnknownOpcodeError, match=rf"op {i} of layer '{layer}' is opcode 99"):
        trainer.predict_outputs(graph)
