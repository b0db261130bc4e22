"""Module buffers (``register_buffer``): registration, state dicts in PyTorch's order, and a
trainer that lays them out in the parameter block but never trains them (no gradient, no
optimizer step, weight decay, L2 penalty, clipping or accumulation touches them)."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.nn import Buffer
from nnjit.optim import AdamW


class Projected(nn.Module):
    """A fixed random projection (a buffer, used as a dense weight) then a trained layer."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.register_buffer("projection", rng.normal(size=(6, 4)))
        self.register_buffer("scratch", np.arange(3.0), persistent=False)
        self.register_buffer("absent", None)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        tape = x.tape
        w = tape.parameter(self.projection, "projection")  # its slot, laid out up front
        return self.head(nn.functional.tanh(tape.dense(x, w, None)))


def data(n=30):
    rng = np.random.default_rng(1)
    return rng.normal(size=(n, 4)), rng.integers(0, 3, n)


def test_registration_names_and_state_dict_order_are_pytorchs():
    torch = pytest.importorskip("torch")
    model = Projected()
    assert isinstance(model.projection, Buffer) and model.projection.shape == (6, 4)
    assert model.absent is None
    assert [n for n, _ in model.named_buffers()] == ["projection", "scratch"]
    assert len(model.buffers()) == 2
    assert [n for n, _ in model.named_parameters()] == ["head.weight", "head.bias"]
    assert model.num_parameters() == 6 * 3 + 3
    assert list(model.state_dict()) == ["projection", "head.weight", "head.bias"]

    class TorchProjected(torch.nn.Module):  # the same registrations in torch
        def __init__(self):
            super().__init__()
            self.register_buffer("projection", torch.zeros(6, 4))
            self.register_buffer("scratch", torch.zeros(3), persistent=False)
            self.register_buffer("absent", None)
            self.head = torch.nn.Linear(6, 3)

    assert list(TorchProjected().state_dict()) == list(model.state_dict())
    bn = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    assert list(bn.state_dict()) == list(torch.nn.Sequential(torch.nn.Linear(2, 3),
                                                             torch.nn.BatchNorm1d(3)).state_dict())
    assert "Total params: 21" in nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).summary_str()


def test_registration_errors_and_assignment():
    model = Projected()
    with pytest.raises(KeyError, match="attribute 'head' already exists"):
        model.register_buffer("head", np.zeros(2))
    with pytest.raises(KeyError, match=r'buffer name can.*t contain "\.", got "a\.b"'):
        model.register_buffer("a.b", np.zeros(2))
    with pytest.raises(KeyError, match="attribute 'projection' already exists"):
        model.register_parameter("projection", nn.Parameter(np.zeros(2)))
    with pytest.raises(TypeError, match="cannot assign Parameter as buffer 'p'"):
        model.register_buffer("p", nn.Parameter(np.zeros(2)))
    same = model.projection
    model.projection = np.ones((6, 4))  # same shape: written in place
    assert model.projection is same and (same.data == 1).all()
    model.register_buffer("count", np.array(3))  # integers are stored as floats
    assert model.count.dtype.kind == "f" and np.asarray(model.count) == 3.0
    del model.count
    assert "count" not in dict(model.named_buffers())


def test_load_state_dict_checks_buffers_as_parameters():
    model = Projected()
    state = model.state_dict()
    state["projection"] = state["projection"] * 2.0
    model.load_state_dict(state)
    np.testing.assert_array_equal(model.projection.data, state["projection"])
    del state["projection"]
    with pytest.raises(nn.StateMismatchError, match="projection"):
        model.load_state_dict(state)
    result = model.load_state_dict(state, strict=False)
    assert result.missing_keys == ["projection"]
    state["projection"] = np.zeros((4, 6))
    with pytest.raises(nn.StateMismatchError, match="projection"):
        model.load_state_dict(state, strict=False)


@pytest.mark.parametrize("optimizer", [
    lambda: nn.SGD(lr=0.1, momentum=0.9, weight_decay=0.1),
    lambda: nn.Adam(lr=0.05, weight_decay=0.1),
    lambda: AdamW(lr=0.05, weight_decay=0.1),
    lambda: nn.RMSprop(lr=0.01, weight_decay=0.1, momentum=0.5),
], ids=["sgd", "adam", "adamw", "rmsprop"])
def test_buffers_are_laid_out_but_never_trained(optimizer):
    model = Projected()
    before = model.projection.data.copy()
    X, y = data()
    trainer = nn.Trainer(model, optimizer(), regularizer=nn.L2Regularizer(0.1),
                         dtype=np.float64, seed=0)
    trainer.fit(nn.DataLoader(X, y, batch_size=8), epochs=3, verbose=False, grad_clip_norm=0.5,
                accumulation_steps=2)
    program = trainer.program
    assert model.projection.data.base is program.values  # in the parameter block
    assert np.shares_memory(model.projection.data, program.params)
    np.testing.assert_array_equal(model.projection.data, before)
    assert np.isfinite(model.head.weight.data).all()
    off = trainer.program.slots[trainer.program.param_slots["projection"], 0]
    assert not program.grads[off:off + before.size].any()  # no gradient was ever written
    assert model.projection.grad is None
    assert "projection" not in trainer.param_spans
    assert list(trainer.gradients(X, y)) == ["head.weight", "head.bias"]
    np.testing.assert_array_equal(model.projection.data, before)
    out = trainer.predict_outputs(X)
    model.projection = before * 0.5  # the buffer is read by the compiled forward
    assert not np.allclose(trainer.predict_outputs(X), out)


def test_safetensors_round_trip_with_torchs_batch_norm(tmp_path):
    """A torch BatchNorm1d state_dict (int64 num_batches_tracked) saved with safetensors loads
    into nnjit's, and nnjit's file loads into torch's."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from safetensors.torch import load_file, save_file

    theirs = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    theirs.train()
    with torch.no_grad():
        for _ in range(5):
            theirs(torch.randn(8, 4))
    save_file(theirs.state_dict(), tmp_path / "t.safetensors")
    ours = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    ours.load_safetensors(tmp_path / "t.safetensors")
    assert ours[1].num_batches_tracked.data == 5.0
    for name, value in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[name], value.numpy().astype(np.float32))
    ours.save_safetensors(tmp_path / "o.safetensors")
    back = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    back.load_state_dict(load_file(tmp_path / "o.safetensors"))
    assert int(back[1].num_batches_tracked) == 5
    np.testing.assert_array_equal(back[1].running_var.numpy(), theirs[1].running_var.numpy())
