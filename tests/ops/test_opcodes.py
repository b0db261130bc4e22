"""Interpreter-level op tests beyond the registry-driven check.

Every registered op's forward and backward are checked against its spec's reference and finite
differences by ``tests/ops/test_op_gradients.py`` (inputs derived from the specs, no hand-kept
lists). Here: dropout, which has no reference (it is random), through the interpreter, and the
gradient accumulation rules when one slot feeds several ops.
"""

from __future__ import annotations

import numpy as np

import nnjit as nn
from nnjit.nn import functional as F
from nnjit.ops import registry
from nnjit.ops.opcodes import Opcode
from tests.helpers import finite_difference_gradients


def test_every_opcode_has_a_registered_spec():
    assert set(Opcode) <= set(registry.all_specs()), "every opcode needs a registered OpSpec"


class DropoutProbe(nn.Module):
    """Dropout with probability ``p`` on a parameter (so the interpreter differentiates it)."""

    def __init__(self, values, p):
        super().__init__()
        self.x = nn.Parameter(values)
        self.p = p
        self.out = None

    def forward(self, x):
        self.out = F.dropout(x.tape.parameter(self.x, "x"), self.p)
        return self.out


def _dropout_case(p, seed=0, shape=(4, 8)):
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)  # no zeros
    model = DropoutProbe(values.copy(), p)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=seed)
    return model, trainer, values, np.zeros((shape[0], 1)), rng.normal(size=shape)


def test_dropout_p_zero_is_the_identity_with_identity_gradients():
    """p = 0 in a training batch: output == input, gradient == finite differences."""
    model, trainer, values, X, target = _dropout_case(0.0)
    grads = trainer.gradients(X, target)
    np.testing.assert_array_equal(model.out.data, values)
    numeric = finite_difference_gradients(trainer, model, X, target)
    np.testing.assert_allclose(grads["x"], numeric["x"], rtol=1e-6, atol=1e-9)


def test_dropout_training_backward_is_dy_times_the_scaled_mask():
    """A training batch drops about p of the entries, scales the rest by 1 / (1 - p), and its
    gradient is dy times that same mask; evaluation is the identity."""
    p = 0.5
    model, trainer, values, X, target = _dropout_case(p, seed=3)
    grads = trainer.gradients(X, target)
    out = np.array(model.out.data, copy=True)
    scale = out / values
    kept = scale != 0.0
    np.testing.assert_allclose(scale[kept], 1.0 / (1.0 - p), rtol=1e-12)
    assert 0 < kept.sum() < kept.size, "some entries dropped, some kept"
    dy = 2.0 * (out - target) / out.size  # MSE's gradient
    np.testing.assert_allclose(grads["x"], dy * scale, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(trainer.predict_outputs(X), values)


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
