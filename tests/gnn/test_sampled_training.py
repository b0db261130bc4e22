"""Neighbour-sampled training: exactness with full fan-outs, seed-only loss, bounded memory."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.nn import functional as F
from nnjit.tape.arena import S_COLS, S_ROWS


class SAGE2(nn.Module):
    def __init__(self, f, hidden, classes, conv=nn.SAGEConv):
        super().__init__()
        self.conv1 = conv(f, hidden)
        self.conv2 = conv(hidden, classes)

    def forward(self, x, edges):
        return self.conv2(F.relu(self.conv1(x, edges)), edges)


def random_graph(n, e, f=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    masks = rng.permutation(n)
    train = np.zeros(n, bool)
    val = np.zeros(n, bool)
    train[masks[: n // 3]] = True
    val[masks[n // 3 : 2 * n // 3]] = True
    return nn.Graph.from_arrays(rng.normal(size=(n, f)), rng.integers(0, n, (2, e)),
                                rng.integers(0, classes, n), train_mask=train, val_mask=val)


# Not GCN: its normalisation uses the degrees of the sampled subgraph (as PyG's NeighborLoader),
# where the last hop's nodes have no incoming edges, so it differs from the full graph's.
@pytest.mark.parametrize("conv", [nn.SAGEConv, nn.GATConv])
def test_all_neighbours_two_hops_equal_the_full_graph(conv):
    """With every neighbour sampled over as many hops as layers, a seed's output is exactly its
    full-graph output, so the sampled losses (seeds only) equal the full-batch ones; a loss that
    counted sampled non-seed nodes would differ."""
    graph = random_graph(60, 200, seed=1)
    n_train = int(graph.train_mask.sum())
    loader = nn.NeighborLoader(graph, [-1, -1], batch_size=n_train, shuffle=False)
    trainer = nn.Trainer(SAGE2(6, 5, 3, conv), nn.SGD(lr=0.05), dtype=np.float64, seed=0)
    before = nn.Trainer(SAGE2(6, 5, 3, conv), dtype=np.float64, seed=0)
    before.model.load_state_dict(trainer.model.state_dict())
    before.gradients(graph)
    train_loss = before.evaluate(graph, "train")["loss"]
    history = trainer.fit(loader, epochs=1, verbose=0, n_iter_no_change=None)
    assert history["train_loss"].iloc[0] == pytest.approx(train_loss, rel=1e-12)
    assert history["val_loss"].iloc[0] == pytest.approx(trainer.evaluate(graph, "val")["loss"],
                                                        rel=1e-12)


def test_sampled_fit_is_deterministic_and_learns():
    graph = random_graph(400, 3000, seed=2)
    a, b = (nn.Trainer(SAGE2(6, 16, 3), nn.Adam(lr=0.01), seed=7) for _ in range(2))
    b.model.load_state_dict(a.model.state_dict())
    ha = a.fit(nn.NeighborLoader(graph, [5, 3], batch_size=32), epochs=5, verbose=0)
    hb = b.fit(nn.NeighborLoader(graph, [5, 3], batch_size=32), epochs=5, verbose=0)
    np.testing.assert_array_equal(ha[["train_loss", "val_loss"]], hb[["train_loss", "val_loss"]])
    for name, value in a.model.state_dict().items():
        np.testing.assert_array_equal(value, b.model.state_dict()[name])
    assert ha["train_loss"].iloc[-1] < ha["train_loss"].iloc[0]


def test_arena_is_bounded_by_the_sample_buffers_not_the_graph():
    """Apart from the node features themselves, the arena does not grow with the graph."""
    sizes = []
    for n in (2000, 8000):
        graph = random_graph(n, 10 * n, seed=3)
        trainer = nn.Trainer(SAGE2(6, 16, 3), seed=0)
        trainer.fit(nn.NeighborLoader(graph, [4, 3], batch_size=16), epochs=1, verbose=0)
        program = trainer.program
        features = next(s for s in range(len(program.slots))
                        if program.tape.slots[s].name == "graph.features")
        rows, cols = program.slots[features, S_ROWS], program.slots[features, S_COLS]
        assert rows == n
        sizes.append(program.values.size - rows * cols)
    assert sizes[0] == sizes[1]


def test_bad_loader_arguments():
    graph = random_graph(30, 60)
    with pytest.raises(ValueError, match="num_neighbors must be a non-empty list"):
        nn.NeighborLoader(graph, [])
    with pytest.raises(ValueError, match="the mask 'test' selects no nodes|has no test_mask"):
        nn.NeighborLoader(graph, [2], mask="test")
    trainer = nn.Trainer(SAGE2(6, 4, 3), seed=0)
    loader = nn.NeighborLoader(graph, [2, 2], batch_size=8)
    with pytest.raises(ValueError, match="validation batches must use the training fan-outs"):
        trainer.fit(loader, epochs=1, val=nn.NeighborLoader(graph, [3], mask="val"), verbose=0)


def test_full_batch_rows_are_never_permuted():
    """A trainer whose shuffle order is not the identity (e.g. after a sampled fit over as many
    seeds as nodes) still feeds node i as row i in full batch: the history equals a fresh
    trainer's."""
    graph = random_graph(40, 120, seed=4)
    weights = SAGE2(6, 5, 3).state_dict()
    histories = []
    for shuffled in (False, True):
        trainer = nn.Trainer(SAGE2(6, 5, 3), nn.SGD(lr=0.1), dtype=np.float64, seed=0)
        trainer.model.load_state_dict(weights)
        if shuffled:
            trainer._perm = np.random.default_rng(0).permutation(graph.num_nodes)
        histories.append(trainer.fit(graph, epochs=3, verbose=0, n_iter_no_change=None))
    np.testing.assert_array_equal(histories[0][["train_loss", "val_loss"]],
                                  histories[1][["train_loss", "val_loss"]])


def test_constant_slots_have_no_gradient_space():
    """The node features of a sampled program (and sparse non-zeros) are constants: laid out
    last, outside the gradient arena."""
    graph = random_graph(3000, 20000, seed=5)
    trainer = nn.Trainer(SAGE2(6, 8, 3), seed=0)
    trainer.fit(nn.NeighborLoader(graph, [3, 2], batch_size=8), epochs=1, verbose=0)
    program = trainer.program
    features = graph.num_nodes * graph.num_features
    assert program.values.size - program.grads.size >= features
