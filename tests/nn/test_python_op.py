"""Python ops (nn.Op) train through compiled segments and match the compiled equivalent."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import nnjit as nn
from tests.helpers import finite_difference_gradients

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "custom_op_seed.py"


def load_example():
    spec = importlib.util.spec_from_file_location("custom_op_seed", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_mul_op_trains_identically_to_compiled_mul():
    example = load_example()
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(X)
    weights = []
    for python_op in (True, False):
        nn.set_seed(0)
        model = example.GatedMLP(python_op)
        trainer = nn.JITCompiler(model, nn.Adam(learning_rate=0.01), nn.SoftmaxCrossEntropyLoss())
        history = trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=5, val=(X, y),
                              verbose=False)
        weights.append([p.data.copy() for p in model.parameters()])
        assert history["train_loss"].iloc[-1] < history["train_loss"].iloc[0]
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_python_op_gradient_matches_finite_differences():
    example = load_example()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(3, 4)
            self.fc2 = nn.Linear(3, 4)

        def forward(self, tape, x):
            return example.MulOp(tape, self.fc1(x), self.fc2(x)).out

    nn.set_seed(2)
    model = Model()
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(5, 3)), rng.normal(size=(5, 4))
    grads = trainer.gradients(X, Y)
    numeric = finite_difference_gradients(trainer, model, X, Y)
    for name in grads:
        np.testing.assert_allclose(grads[name], numeric[name], rtol=1e-5, atol=1e-8)


def test_op_without_out_is_rejected():
    class NoOut(nn.Op):
        def __init__(self, tape, a):
            super().__init__()
            self.a = a

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, tape, x):
            return NoOut(tape, self.fc(x)).a

    trainer = nn.Trainer(Model())
    with pytest.raises(TypeError, match=r"NoOut.__init__ must set self.out"):
        trainer.fit(nn.DataLoader(np.zeros((4, 2)), np.zeros(4, np.int64)), verbose=False)
