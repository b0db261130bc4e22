"""Module registration, naming, modes, repr and the seed engine's API forms."""

from __future__ import annotations

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
