"""nn.functional.cat and column indexing (CONCAT, COLUMNS): PyTorch parity of values and
gradients (float64), integer tensors copied bit for bit, and the errors for what is refused.

Every model here uses the core + joining families only: one float64 build, the op checker's.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.nn import functional as F

B = 4


class Joined(nn.Module):
    """cat of three tensors (one a slice), a single column times another, slices of the cat."""

    def __init__(self, rng):
        super().__init__()
        self.p1 = nn.Parameter(rng.normal(size=(B, 2)))
        self.p2 = nn.Parameter(rng.normal(size=(B, 3)))
        self.p3 = nn.Parameter(rng.normal(size=(B, 1)))
        self.shapes = {}

    def forward(self, x):
        tape = x.tape
        p1, p2, p3 = (tape.parameter(getattr(self, n), n) for n in ("p1", "p2", "p3"))
        y1 = F.cat([p1, p2[:, 1:], p3], dim=1)  # (B, 5): a chain of two CONCATs
        y2 = y1[:, -1] * p2[:, 0]  # (B,) * (B,): single columns
        out = F.concat((y1[:, 0:4], y2.view(-1, 1)), dim=-1)
        self.shapes = {"y1": y1.shape, "y2": y2.shape, "slice": p2[:, 1:].shape,
                       "out": out.shape}
        return out


def _torch_joined(model, Y):
    torch = pytest.importorskip("torch")
    p1, p2, p3 = (torch.tensor(np.array(getattr(model, n).data, np.float64), requires_grad=True)
                  for n in ("p1", "p2", "p3"))
    y1 = torch.cat([p1, p2[:, 1:], p3], dim=1)
    y2 = y1[:, -1] * p2[:, 0]
    out = torch.cat((y1[:, 0:4], y2.view(-1, 1)), dim=-1)
    torch.nn.functional.mse_loss(out, torch.from_numpy(Y)).backward()
    return out.detach().numpy(), {n: t.grad.numpy() for n, t in zip(("p1", "p2", "p3"),
                                                                     (p1, p2, p3))}


def test_cat_and_column_slices_match_torch_values_and_gradients():
    rng = np.random.default_rng(0)
    model = Joined(rng)
    X, Y = np.zeros((B, 1)), rng.normal(size=(B, 5))
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    out = trainer.predict_outputs(X)
    grads = trainer.gradients(X, Y)
    t_out, t_grads = _torch_joined(model, Y)
    np.testing.assert_array_equal(out, t_out)  # copies and one product: exact
    for name in ("p1", "p2", "p3"):  # p2 is read by two slices: their gradients add up
        np.testing.assert_allclose(grads[name], t_grads[name], rtol=1e-14, atol=1e-16)
    assert model.shapes == {"y1": (B, 5), "y2": (B,), "slice": (B, 2), "out": (B, 5)}


class IntegerJoin(nn.Module):
    """Integer constants through cat and slices; the loss reads a float parameter."""

    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b
        self.w = nn.Parameter(np.ones((B, 1)))
        self.int_outputs = {}

    def forward(self, x):
        tape = x.tape
        a = tape.constant(self.a, "a", integer=True)
        b = tape.constant(self.b, "b", integer=True)
        joined = F.cat([a, b, a[:, 1:2]])
        self.int_outputs = {"joined": joined, "column": joined[:, 2], "block": joined[:, 1:3]}
        return tape.parameter(self.w, "w")


def test_integer_tensors_are_copied_bit_for_bit():
    # 2**53 + 1 and -2**62 have no float64 (a float copy would change them)
    a = np.array([[2**53 + 1, -7], [0, 1], [-(2**62), 5], [3, 2**62 + 3]])
    b = np.array([[9], [-(2**53) - 1], [4], [-1]])
    model = IntegerJoin(a, b)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    trainer.predict_outputs(np.zeros((B, 1)))
    got = {k: t for k, t in model.int_outputs.items()}
    assert all(t.is_integer and not t.requires_grad for t in got.values())
    joined = np.concatenate([a, b, a[:, 1:2]], axis=1)
    read = trainer.program.integer_view
    np.testing.assert_array_equal(read(got["joined"].slot), joined)
    np.testing.assert_array_equal(read(got["column"].slot)[:, 0], joined[:, 2])
    np.testing.assert_array_equal(read(got["block"].slot), joined[:, 1:3])
    assert got["column"].shape == (B,) and got["block"].shape == (B, 2)


def _trace_error(forward, error, match):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = Layer()
            self.unused = nn.Linear(5, 1)  # (a trainer needs a parameter)

        def forward(self, x):
            return self.layer(x)

    class Layer(nn.Module):
        def forward(self, x):
            return forward(x)

    trainer = nn.Trainer(M(), nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    with pytest.raises(error, match=match):
        trainer.predict_outputs(np.zeros((B, 5)))


def test_refused_forms_name_the_layer():
    def ints(x):
        return x.tape.constant(np.zeros((B, 2), np.int64), "i", integer=True)

    cases = [
        (lambda x: F.cat([x, ints(x)]), TypeError,
         r"layer: cat cannot join float and integer tensors \(input 0 holds floats, input 1"),
        (lambda x: F.cat([x, x], dim=0), ValueError, r"layer: cat joins along features only"),
        (lambda x: F.cat([x, x.view(-1, 5, 1)]), ValueError,
         r"layer: cat joins 2-D tensors .* input 1 has shape \(batch\(4\), 5, 1\)"),
        (lambda x: F.cat(x), TypeError, "expected a list or tuple of tensors"),
        (lambda x: x[0], TypeError, r"layer: a traced tensor supports only x\[:, j\] or"),
        (lambda x: x[1:, 0], TypeError, r"supports only"),
        (lambda x: x[:, 5], IndexError, r"layer: column 5 is out of range for a tensor of "
                                        r"shape \(batch\(4\), 5\)"),
        (lambda x: x[:, 3:3], IndexError, "selects no column"),
        (lambda x: x[:, ::2], ValueError, "step 1"),
        (lambda x: x[:, "a"], TypeError, "must be an int or a slice"),
        (lambda x: x.view(-1, 5, 1)[:, 0], ValueError, "takes a 2-D tensor"),
        (lambda x: list(x), TypeError, "not iterable"),
    ]
    for forward, error, match in cases:
        _trace_error(forward, error, match)
