"""No silent fall-through below the opcode dispatch either: an optimizer kind without a compiled
step, the fused losses and the graph dispatchers refuse a kind or opcode they do not handle
instead of running another.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.kernels import optim as ko
from nnjit.ops import graph, losses
from nnjit.ops.opcodes import Opcode


def test_only_known_optimizer_kinds_have_a_compiled_step():
    from nnjit.engine import dispatch

    with pytest.raises(ValueError, match="no compiled step for optimizer kind 99"):
        dispatch.optimizer_entry(99)
    # scikit-learn's kinds share torch's step entry; each family is its own entry
    assert dispatch.optimizer_entry(ko.OPT_SGD) is dispatch.optimizer_entry(ko.OPT_SKLEARN_SGD)
    assert dispatch.optimizer_entry(ko.OPT_ADAM) is dispatch.optimizer_entry(ko.OPT_SKLEARN_ADAM)
    assert dispatch.optimizer_entry(ko.OPT_ADAM) is not dispatch.optimizer_entry(ko.OPT_SGD)
    params = np.ones(4)
    assert ko.sgd_step.py_func(ko.OPT_SGD, params, np.ones(4), np.zeros((2, 4)), np.zeros(6),
                               0.1, 1) is True
    np.testing.assert_allclose(params, 0.9)


def test_a_fit_with_an_unknown_optimizer_kind_stops_before_any_step():
    class Forged(nn.SGD):
        kind = 99

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(12, 3)), rng.integers(0, 2, 12)
    model = nn.Sequential(nn.Linear(3, 2))
    before = model[0].weight.data.copy()
    trainer = nn.Trainer(model, Forged(lr=0.1), nn.CrossEntropyLoss(), dtype=np.float64)
    with pytest.raises(ValueError, match="optimizer kind 99"):
        trainer.fit(nn.DataLoader(X, y, batch_size=4), epochs=1, verbose=False)
    np.testing.assert_array_equal(model[0].weight.data, before)


def test_loss_and_seed_refuses_a_non_loss():
    pred, target, dpred = np.ones((2, 3)), np.zeros((2, 3)), np.full((2, 3), 5.0)
    assert losses.loss_and_seed(int(Opcode.DENSE), pred, target, dpred, 0, True)[2] == -1
    assert (dpred == 5.0).all()
    loss, _, counted = losses.loss_and_seed(int(Opcode.MSE), pred, target, dpred, 0, True)
    assert counted == 2 and loss == pytest.approx(2.0)  # per-row means, summed
    np.testing.assert_allclose(dpred, 2.0 / 6)


def test_graph_dispatchers_check_the_opcode_before_reading_aux0():
    """A non-graph record whose aux0 is garbage (here a hyper index far outside the CSR table)
    is refused before aux0 is used to find a CSR."""
    gdata = np.zeros(4, dtype=np.int64)  # no CSR table at all: reading one would go out of bounds
    records = np.array([[int(Opcode.RELU), 0, -1, -1, 1, 10**6, -1, -1, 0]], dtype=np.int32)
    slots = np.zeros((2, 4), dtype=np.int64)
    values = np.zeros(8)
    assert graph.graph_forward(int(Opcode.RELU), 0, 1, records, slots, values, gdata) is False
    assert graph.graph_backward(int(Opcode.RELU), 0, 1, records, slots, values, values,
                                gdata) is False


def test_a_kind_whose_step_needs_more_state_rows_is_refused_before_any_step():
    """An Optimizer subclass naming another kind than its buffers fit (SGD's one row for
    NAdam's three) is refused: the compiled step indexes the state by row without a check, and
    it wrote past the array (a corrupted heap, seen as a hung test worker)."""
    class Forged(nn.SGD):
        kind = ko.OPT_NADAM

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(12, 3)), rng.integers(0, 2, 12)
    model = nn.Sequential(nn.Linear(3, 2))
    before = model[0].weight.data.copy()
    trainer = nn.Trainer(model, Forged(lr=0.1), nn.CrossEntropyLoss(), dtype=np.float64)
    with pytest.raises(ValueError, match=r"kind 8's step uses 3 state rows"):
        trainer.fit(nn.DataLoader(X, y, batch_size=4), epochs=1, verbose=False)
    np.testing.assert_array_equal(model[0].weight.data, before)
