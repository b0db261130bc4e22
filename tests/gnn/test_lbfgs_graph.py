"""LBFGS on a graph: full-graph training, one step per epoch with the loss on the train mask's
nodes. Checked step by step against torch.optim.LBFGS on PyTorch Geometric's GCN (float64), for
dense and sparse node features, with an exact checkpoint resume; sampled batches are refused."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import nnjit as nn
from nnjit.nn import functional as F
from tests.gnn.graphs import randomize

REL = 1e-10


def graph(sparse=False):
    rng = np.random.default_rng(0)
    n = 60
    x = rng.normal(size=(n, 5)) * (rng.random((n, 5)) < 0.6)
    return nn.Graph.from_arrays(sp.csr_matrix(x) if sparse else x, rng.integers(0, n, (2, 200)),
                                rng.integers(0, 3, n), train_mask=np.arange(n) < 40,
                                val_mask=np.arange(n) >= 40)


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.GCNConv(5, 8), nn.GCNConv(8, 3)

    def forward(self, x, edges):
        return self.conv2(F.relu(self.conv1(x, edges)), edges)


def trainer_for(**lbfgs):
    model = GCN()
    randomize(model, 1)
    for _, p in model.named_parameters():  # (smaller weights: a well-conditioned start)
        p.data *= 0.5
    return nn.Trainer(model, nn.LBFGS(**lbfgs), dtype=np.float64, seed=0)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("lbfgs", [dict(max_iter=1, history_size=3),
                                   dict(max_iter=4, line_search_fn="strong_wolfe")])
def test_every_step_matches_torch_on_pyg_gcn(sparse, lbfgs):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from torch_geometric import nn as pnn

    torch.set_num_threads(1)
    g = graph(sparse)
    trainer = trainer_for(**lbfgs)
    convs = [pnn.GCNConv(5, 8).double(), pnn.GCNConv(8, 3).double()]
    with torch.no_grad():
        for ours, theirs in zip((trainer.model.conv1, trainer.model.conv2), convs):
            mine = ours.state_dict()
            for name, p in theirs.named_parameters():
                p.copy_(torch.from_numpy(mine[name].reshape(tuple(p.shape))))
    params = [p for c in convs for p in c.parameters()]
    topt = torch.optim.LBFGS(params, **lbfgs)
    x = torch.from_numpy(np.asarray(g.x.todense() if sparse else g.x, dtype=np.float64))
    edges, y = torch.from_numpy(g.edge_index), torch.from_numpy(g.y)
    mask = torch.from_numpy(g.train_mask)

    def closure():
        topt.zero_grad()
        out = convs[1](torch.relu(convs[0](x, edges)), edges)
        loss = torch.nn.functional.cross_entropy(out[mask], y[mask])
        loss.backward()
        return loss

    for step in range(4):
        history = trainer.fit(g, epochs=step + 1, initial_epoch=step, n_iter_no_change=None,
                              restore_best=False, verbose=False)
        expected = topt.step(closure).item()
        assert history["train_loss"].iloc[-1] == pytest.approx(expected, rel=REL, abs=0)
        for ours, theirs in zip((trainer.model.conv1, trainer.model.conv2), convs):
            mine = ours.state_dict()
            for name, p in theirs.named_parameters():
                np.testing.assert_allclose(mine[name].reshape(tuple(p.shape)),
                                           p.detach().numpy(), rtol=REL, atol=REL,
                                           err_msg=f"step {step + 1}: {name}")
    state = topt.state[topt._params[0]]
    assert (trainer.optimizer.n_iter, trainer.optimizer.func_evals) == (
        state["n_iter"], state["func_evals"])


def test_full_graph_fit_trains_validates_and_resumes_exactly(tmp_path):
    g = graph()
    split = dict(verbose=False, n_iter_no_change=None, restore_best=False)
    whole = trainer_for(history_size=4, max_iter=5, line_search_fn="strong_wolfe")
    history = whole.fit(g, epochs=6, **split)
    assert history["train_loss"].is_monotonic_decreasing  # (random labels: fitted slowly)
    assert history["train_loss"].iloc[-1] < 0.8 * history["train_loss"].iloc[0]
    assert history["val_loss"].notna().all()  # (the graph's own val_mask)
    assert whole.evaluate(g, "train")["accuracy"] >= 0.6  # (chance: 1/3)
    first = trainer_for(history_size=4, max_iter=5, line_search_fn="strong_wolfe")
    first.fit(g, epochs=3, **split)
    first.save_checkpoint(tmp_path / "mid.nne")
    resumed = trainer_for(history_size=4, max_iter=5, line_search_fn="strong_wolfe")
    resumed.load_checkpoint(tmp_path / "mid.nne")
    rest = resumed.fit(g, epochs=6, initial_epoch=3, **split)
    for (name, p), (_, q) in zip(whole.model.named_parameters(),
                                 resumed.model.named_parameters()):
        assert np.array_equal(p.data, q.data), name
    assert np.array_equal(whole.optimizer.state, resumed.optimizer.state)
    cols = ["train_loss", "val_loss", "val_accuracy"]
    np.testing.assert_array_equal(rest[cols].to_numpy(), history[cols].to_numpy()[3:])


def test_sampled_batches_are_refused_by_name():
    g = graph()
    loader = nn.NeighborLoader(g, num_neighbors=[3, 3], batch_size=8, mask="train")
    with pytest.raises(ValueError, match="NeighborLoader's sampled batches.*pass the Graph"):
        trainer_for().fit(loader, epochs=1, verbose=False)
