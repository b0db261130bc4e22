"""NetConfig(kind="lstm" | "gru" | "rnn"): validation and stable ids, and the net it builds is
PyTorch's layer over the row's steps with a head on the top layer's final state. (Training the
example config through ``nnjit train``: tests/test_examples.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.experiment import NetConfig, Nets, RunConfig

ROWS = dict(kind="lstm", in_dim=24, out_dim=3, in_shape=[6, 4], hidden_size=5)


def test_recurrent_config_round_trips_and_other_kinds_keep_their_ids():
    cfg = NetConfig(**ROWS, num_layers=2, bidirectional=True)
    assert cfg.kind is Nets.LSTM and cfg.in_shape == (6, 4)
    assert NetConfig.from_state(cfg.state()) == cfg
    assert NetConfig.from_state(cfg.state(full=True)) == cfg
    assert NetConfig(in_dim=64, out_dim=10).state() == {"in_dim": 64, "out_dim": 10}
    assert NetConfig.from_state(NetConfig(in_dim=4, out_dim=2).state(full=True)).state() == {
        "in_dim": 4, "out_dim": 2}


@pytest.mark.parametrize("change, match", [
    ({"in_shape": None}, r"NetConfig.in_shape must be \[steps, features\] .* kind 'lstm'"),
    ({"in_shape": [1, 6, 4]}, r"in_shape must be \[steps, features\]"),
    ({"in_shape": [6, 0]}, r"in_shape\[1\] must be an int >= 1"),
    ({"in_dim": 25}, r"NetConfig.in_dim must be steps\*features = 24 for in_shape \[6, 4\]"),
    ({"hidden_size": None}, r"NetConfig.hidden_size is required for kind 'lstm'"),
    ({"hidden_size": 0}, r"NetConfig.hidden_size must be an int >= 1"),
    ({"num_layers": 0}, r"NetConfig.num_layers must be an int >= 1"),
    ({"bidirectional": "yes"}, r"NetConfig.bidirectional must be True or False"),
    ({"conv_channels": [3]}, r"NetConfig.conv_channels applies only to kind 'cnn' \(this net "
                             r"is 'lstm'\)"),
])
def test_bad_recurrent_fields_name_the_field(change, match):
    with pytest.raises(ValueError, match=match):
        NetConfig(**{**ROWS, **change})


def test_recurrent_fields_refused_for_other_kinds():
    with pytest.raises(ValueError, match=r"NetConfig.hidden_size applies only to kinds 'lstm', "
                                         r"'gru', 'rnn' \(this net is 'mlp'\)"):
        NetConfig(in_dim=24, out_dim=3, hidden_size=5)
    with pytest.raises(ValueError, match=r"NetConfig.in_shape applies only to kinds 'cnn', "
                                         r"'lstm', 'gru', 'rnn' \(this net is 'mlp'\)"):
        NetConfig(in_dim=24, out_dim=3, in_shape=[6, 4])
    with pytest.raises(ValueError, match=r"NetConfig.bidirectional applies only to kinds"):
        NetConfig(kind="cnn", in_dim=64, out_dim=3, in_shape=[1, 8, 8], conv_channels=[2],
                  bidirectional=True)
    with pytest.raises(ValueError, match=r"Nets.GRU: the NetConfig is for kind 'lstm'"):
        Nets.GRU(NetConfig(**ROWS))


@pytest.mark.parametrize("kind, layers, bidirectional", [("lstm", 2, True), ("gru", 1, False),
                                                         ("rnn", 3, False)])
def test_the_net_is_the_layer_then_the_head_on_the_top_layers_final_state(kind, layers,
                                                                          bidirectional):
    cfg = NetConfig(**{**ROWS, "kind": kind}, num_layers=layers, bidirectional=bidirectional,
                    hidden_dims=[7], activation="tanh")
    with nn.seeded(0):
        net = cfg.build()
    layer = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
    assert type(net.rnn) is layer and net.rnn.num_layers == layers
    assert "rnn.weight_hh_l0" in net.state_dict()
    d = 2 if bidirectional else 1

    class ByHand(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = layer(4, 5, num_layers=layers, bidirectional=bidirectional,
                             batch_first=True)
            self.head = nn.Sequential(nn.Linear(5 * d, 7), nn.Tanh(), nn.Linear(7, 3))

        def forward(self, x):
            _, state = self.rnn(x.view(-1, 6, 4))
            h_n = (state[0] if kind == "lstm" else state).flatten()
            return self.head(h_n[:, (layers - 1) * d * 5:])

    by_hand = ByHand()
    by_hand.load_state_dict(net.state_dict())
    X = np.random.default_rng(0).normal(size=(9, 24)).astype(np.float64)
    ours = nn.Trainer(net, dtype=np.float64).predict_outputs(X)
    assert ours.shape == (9, 3)
    np.testing.assert_array_equal(ours, nn.Trainer(by_hand, dtype=np.float64).predict_outputs(X))


def test_example_config_parses():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "digits_lstm.yaml"
    cfg = RunConfig.from_yaml(path.read_text(encoding="utf-8"), path.name)
    assert cfg.model.net.kind is Nets.LSTM and cfg.model.net.in_shape == (8, 8)


def test_the_generated_series_is_fixed_split_in_time_and_for_forecasts_only():
    from nnjit.experiment.data import load_run_data

    a = load_run_data("sine_series", regression=True, seed=0)
    b = load_run_data("sine_series", regression=True, seed=5)  # (the run's seed: no effect)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.y_val, b.y_val)
    assert a.X_train.dtype == np.float32 and a.y_train.shape == (2508, 3) and not len(a.X_test)
    # each row is its window's 48 steps of 3 values, the target the step after them
    np.testing.assert_array_equal(a.X_train[1].reshape(48, 3)[-1], a.y_train[0])
    with pytest.raises(ValueError, match=r"'sine_series' is a forecasting \(regression\) "
                                         r"series: the run needs model.loss: mse"):
        load_run_data("sine_series", regression=False, seed=0)
