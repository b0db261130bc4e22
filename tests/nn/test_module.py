"""Module registration, naming, modes, repr and the seed engine's API forms."""

from __future__ import annotations

import re

import numpy as np
import pytest

import nnjit as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6))
        self.head = nn.Linear(6, 2, bias=False)

    def forward(self, x):
        return self.head(self.encoder(x))


def test_named_parameters_use_dotted_paths_in_registration_order():
    names = [n for n, _ in Block().named_parameters()]
    assert names == ["encoder.0.weight", "encoder.0.bias", "encoder.2.weight", "encoder.2.bias",
                     "head.weight"]
    assert Block().num_parameters() == 4 * 8 + 8 + 8 * 6 + 6 + 6 * 2


def test_shared_parameters_listed_once():
    m = nn.Module()
    layer = nn.Linear(2, 2)
    m.a = layer
    m.b = layer
    assert [n for n, _ in m.named_parameters()] == ["a.weight", "a.bias"]


def test_register_parameter_rejects_bad_names():
    m = nn.Module()
    with pytest.raises(KeyError, match=r'contain "\."'):
        m.register_parameter("a.b", nn.Parameter(np.zeros(2)))
    with pytest.raises(KeyError, match=r"be empty"):
        m.register_parameter("", nn.Parameter(np.zeros(2)))
    m.training_steps = 3
    with pytest.raises(KeyError, match=r"attribute 'training_steps' already exists"):
        m.register_parameter("training_steps", nn.Parameter(np.zeros(2)))


def test_train_eval_propagate():
    b = Block()
    b.eval()
    assert not any(m.training for m in b.modules())
    b.train()
    assert all(m.training for m in b.modules())


def test_repr_is_a_tree():
    text = repr(Block())
    assert text.startswith("Block(\n  (encoder): Sequential(\n    (0): Linear(in_features=4, "
                           "out_features=8, bias=True)")
    assert "(head): Linear(in_features=6, out_features=2, bias=False)" in text


def test_glorot_and_torch_init_ranges():
    nn.set_seed(0)
    glorot = nn.Linear(100, 50)
    limit = np.sqrt(6 / 150)
    assert np.abs(glorot.weight.data).max() <= limit
    assert np.abs(glorot.weight.data).max() > 0.9 * limit
    assert not glorot.bias.data.any()
    torch_like = nn.Linear(100, 50, init="torch")
    assert np.abs(torch_like.bias.data).max() <= 0.1
    assert torch_like.bias.data.any()
    assert glorot.weight.data.dtype == np.float32


def test_seed_form_add_module_and_forward_with_tape():
    class Seed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = self.add_module(nn.DenseLayer(4, 16))
            self.act = self.add_module(nn.LeakyReLULayer())
            self.fc2 = self.add_module(nn.DenseLayer(16, 3))

        def forward(self, tape, x):
            return self.fc2(tape, self.act(tape, self.fc1(tape, x)))

    class Modern(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 16)
            self.act = nn.LeakyReLU()
            self.fc2 = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    assert [n for n, _ in Seed().named_parameters()] == [n for n, _ in
                                                         Modern().named_parameters()]
    X = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    y = np.arange(10) % 3
    outputs = []
    for cls in (Seed, Modern):
        nn.set_seed(5)
        model = cls()
        trainer = nn.JITCompiler(model, nn.SGD(learning_rate=0.1), nn.SoftmaxCrossEntropyLoss())
        trainer.fit(nn.DataLoader(X, y, batch_size=4), epochs=3, verbose=False)
        outputs.append(model.predict(X))
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_parameters_become_arena_views_after_compile():
    model = Block()
    trainer = nn.Trainer(model)
    X = np.zeros((3, 4), np.float32)
    trainer.fit(nn.DataLoader(X, np.zeros(3, np.int64)), epochs=1, verbose=False)
    params = trainer.program.params
    for _, p in model.named_parameters():
        assert np.shares_memory(p.data, params)
    # Writing through a parameter changes what the compiled code sees.
    model.head.weight.data[...] = 0
    np.testing.assert_array_equal(trainer.predict_outputs(X), 0)


def test_state_dict_round_trip():
    a, b = Block(), Block()
    b.load_state_dict(a.state_dict())
    for (_, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(pa.data, pb.data)


def test_load_state_dict_strict_false_loads_what_matches():
    a, b = Block(), Block()
    state = a.state_dict()
    del state["head.weight"]
    state["extra.weight"] = np.zeros(3)
    before = b.head.weight.data.copy()
    result = b.load_state_dict(state, strict=False)
    assert result.missing_keys == ["head.weight"]
    assert result.unexpected_keys == ["extra.weight"]
    missing, unexpected = result  # PyTorch's named tuple unpacks
    assert (missing, unexpected) == (["head.weight"], ["extra.weight"])
    np.testing.assert_array_equal(b.encoder[0].weight.data, a.encoder[0].weight.data)
    np.testing.assert_array_equal(b.head.weight.data, before)  # missing: left as it was


def test_load_state_dict_strict_reports_everything_and_returns_empty_keys():
    from nnjit.io.nne import StateMismatchError

    a, b = Block(), Block()
    assert tuple(b.load_state_dict(a.state_dict())) == ([], [])
    state = a.state_dict()
    del state["head.weight"]
    state["extra"] = np.zeros(1)
    with pytest.raises(StateMismatchError, match=r"1 missing key, 1 unexpected key"):
        b.load_state_dict(state)


def test_load_state_dict_mis_shaped_is_an_error_even_when_not_strict():
    from nnjit.io.nne import StateMismatchError

    a, b = Block(), Block()
    before = {n: p.data.copy() for n, p in b.named_parameters()}
    state = a.state_dict()
    state["head.weight"] = np.zeros((3, 6))
    with pytest.raises(StateMismatchError, match=r"'head.weight': expected \(2, 6\), got \(3, 6\)"):
        b.load_state_dict(state, strict=False)
    for n, p in b.named_parameters():  # nothing loaded
        np.testing.assert_array_equal(p.data, before[n])


def test_summary_of_an_mlp(capsys):
    model = Block()
    text = model.summary_str()
    lines = text.splitlines()
    assert lines[0] == "Model: Block"
    rows = [line.split() for line in lines[3:8]]
    assert rows == [["encoder", "Sequential", "(None,", "6)", "94"],
                    ["encoder.0", "Linear", "(None,", "8)", "40"],
                    ["encoder.1", "Tanh", "(None,", "8)", "0"],
                    ["encoder.2", "Linear", "(None,", "6)", "54"],
                    ["head", "Linear", "(None,", "2)", "12"]]
    assert lines[8].startswith("====")
    top_level = [int(r[-1]) for r in rows if "." not in r[0]]
    assert sum(top_level) == model.num_parameters()
    assert f"Total params: {model.num_parameters():,}" in lines
    assert f"Trainable params: {model.num_parameters():,}" in lines
    assert "Input: (None, 4)" in lines  # the first Linear's in_features
    assert model.summary() is None
    assert capsys.readouterr().out == text + "\n"
    assert "Input: (None, 4)" in model.summary_str(input_shape=(None, 4))
    with pytest.raises(ValueError, match=r"summary: input_shape must be a width"):
        model.summary_str(input_shape=(None, 0))


def test_summary_of_a_gcn():
    from nnjit.nn import functional as F

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.GCNConv(5, 16)
            self.conv2 = nn.GCNConv(16, 3)

        def forward(self, x, edges):
            return self.conv2(F.relu(self.conv1(x, edges)), edges)

    rng = np.random.default_rng(0)
    graph = nn.Graph.from_arrays(rng.normal(size=(30, 5)), rng.integers(0, 30, (2, 60)),
                                 rng.integers(0, 3, 30))
    model = GCN()
    counts = {n: p.size for n, p in model.named_parameters()}
    text = model.summary_str(graph=graph)
    assert re.search(r"^conv1 +GCNConv +\(30, 16\) +96$", text, re.M)
    assert re.search(r"^conv1.lin +Linear +\(30, 16\) +80$", text, re.M)
    assert re.search(r"^conv2 +GCNConv +\(30, 3\) +51$", text, re.M)
    assert f"Total params: {model.num_parameters():,}" in text
    assert "Input: a graph of 30 nodes with 5 features" in text
    assert model.num_parameters() == sum(counts.values()) == 5 * 16 + 16 + 16 * 3 + 3
    without = model.summary_str()  # no graph: counts only, and how to get the shapes
    assert re.search(r"^conv1 +GCNConv +- +96$", without, re.M)
    assert "pass graph=" in without
    assert f"Total params: {model.num_parameters():,}" in without


def test_summary_shows_the_shapes_of_tuple_outputs():
    """An RNN returns (output, h_n), an LSTM (output, (h_n, c_n)) and an LSTMCell (h, c): the
    table shows each tensor's shape, nested as returned, not "-"."""

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.lstm = nn.LSTM(8, 16, batch_first=True)
            self.gru = nn.GRU(16, 4, num_layers=2, bidirectional=True)
            self.cell = nn.LSTMCell(8, 6)
            self.fc = nn.Linear(16 + 6, 2)

        def forward(self, tokens, lengths):
            x = self.emb(tokens)
            out, (h, c) = self.lstm(x, lengths=lengths)
            self.gru(out)
            h_cell, _ = self.cell(x.flatten()[:, :8])
            return self.fc(nn.functional.cat([h.view(-1, 16), h_cell], dim=1))

    text = Tagger().summary_str(input_shape=((None, 12), (None, 1)), dtypes=(int, int))
    assert re.search(r"^lstm +LSTM +\[\(None, 12, 16\), \[\(None, 1, 16\), \(None, 1, 16\)\]\]"
                     r" +1,664$", text, re.M), text
    assert re.search(r"^gru +GRU +\[\(None, 12, 8\), \(None, 4, 4\)\] +864$", text, re.M), text
    assert re.search(r"^cell +LSTMCell +\[\(None, 6\), \(None, 6\)\] ", text, re.M), text
    assert " - " not in text


def test_parameter_copies_unless_told_not_to():
    data = np.zeros((3, 2), dtype=np.float64)
    assert nn.Parameter(data).data is not data
    kept = nn.Parameter(data, copy=False)
    assert kept.data is data
    ints = np.arange(4)
    assert nn.Parameter(ints, copy=False).data.dtype == np.float32  # (converted: a copy)


def test_linear_without_initial_values_draws_nothing():
    """init_values=False: zero weight and bias, and the generator is not advanced (nnjit.sklearn
    copies scikit-learn's weights in: a large layer's random matrix is never made)."""
    nn.set_seed(5)
    layer = nn.Linear(300, 200, init_values=False)
    assert not layer.weight.data.any() and not layer.bias.data.any()
    assert layer.weight.data.shape == (200, 300) and layer.weight.data.dtype == np.float32
    after = nn.Linear(3, 2).weight.data
    nn.set_seed(5)
    np.testing.assert_array_equal(after, nn.Linear(3, 2).weight.data)
