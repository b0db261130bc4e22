"""The Nets.GRAPH_* factories: built from configs, trained on a graph, configs round-trip."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.experiment.config import NetConfig
from nnjit.experiment.enums import Nets
from nnjit.nn import MessagePassing


@pytest.mark.parametrize("kind,extra,conv", [
    ("graph_conv", {}, nn.GCNConv),
    ("graph_sage", {"aggr": "max"}, nn.SAGEConv),
    ("graph_att", {"heads": 3}, nn.GATConv),
])
def test_graph_nets_build_train_and_round_trip(kind, extra, conv):
    rng = np.random.default_rng(0)
    n = 40
    graph = nn.Graph.from_arrays(rng.normal(size=(n, 5)), rng.integers(0, n, (2, 120)),
                                 rng.integers(0, 3, n), train_mask=np.arange(n) < 20,
                                 val_mask=np.arange(n) >= 30)
    config = NetConfig(kind=kind, in_dim=5, out_dim=3, hidden_dims=[4, 6], dropout=0.2, **extra)
    assert NetConfig.from_state(config.state()) == config
    model = config.build()
    assert config.kind is Nets(kind)
    convs = [m for _, m in model.named_modules() if isinstance(m, MessagePassing)]
    assert [type(c) for c in convs] == [conv] * 3
    if kind == "graph_att":
        assert [c.heads for c in convs] == [3, 3, 1] and convs[1].in_channels == 12
    if kind == "graph_sage":
        assert {c.aggr for c in convs} == {"max"}
    history = nn.Trainer(model, nn.Adam(lr=0.01), seed=0).fit(graph, epochs=3, verbose=0)
    assert len(history) == 3 and np.isfinite(history["val_loss"]).all()


def test_graph_net_config_errors_name_the_field():
    with pytest.raises(ValueError, match="NetConfig.aggr"):
        NetConfig(kind="graph_sage", in_dim=3, out_dim=2, aggr="median")
    with pytest.raises(ValueError, match="NetConfig.heads"):
        NetConfig(kind="graph_att", in_dim=3, out_dim=2, heads=0)


def test_graph_checkpoint_resumes_exactly(tmp_path):
    """4 epochs, checkpoint, 3 more == load the checkpoint in a new trainer, 3 more (GAT with
    attention dropout: the RNG state travels with the checkpoint)."""
    rng = np.random.default_rng(0)
    n = 50
    graph = nn.Graph.from_arrays(rng.normal(size=(n, 4)), rng.integers(0, n, (2, 150)),
                                 rng.integers(0, 3, n), train_mask=np.arange(n) < 25,
                                 val_mask=np.arange(n) >= 35)
    config = NetConfig(kind="graph_att", in_dim=4, out_dim=3, hidden_dims=[5], heads=2,
                       dropout=0.1)
    first = nn.Trainer(config.build(), nn.Adam(lr=0.01), seed=1)
    first.fit(graph, epochs=4, verbose=0)
    first.save_checkpoint(tmp_path / "c.nne")
    expected = first.fit(graph, epochs=3, verbose=0)
    second = nn.Trainer(config.build(), nn.Adam(lr=0.01), seed=2)
    second.load_checkpoint(tmp_path / "c.nne")
    resumed = second.fit(graph, epochs=3, verbose=0)
    columns = ["train_loss", "train_accuracy", "val_loss", "val_accuracy"]
    np.testing.assert_array_equal(resumed[columns], expected[columns])
    for name, value in first.model.state_dict().items():
        np.testing.assert_array_equal(second.model.state_dict()[name], value)
