"""Conv2d and functional conv2d: PyTorch parity (forward and every gradient, float64), argument
errors, torch's state_dict shapes and init, and a tiny conv net learning Digits.

The op's own registry check (hypothesis-drawn groups, strides, paddings, dilations, both
algorithms) runs in tests/ops/test_op_gradients.py through ``OpSpec.geometry``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnjit as nn
from nnjit.nn import Conv2d
from nnjit.nn import functional as F
from nnjit.ops.conv import SPECS
from tests.ops.op_checker import hypothesis_draw

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

F64 = dict(rtol=1e-10, atol=1e-12)


class FunctionalConv(nn.Module):
    """conv2d on a learnable input (so its gradient is computed too) with given weights."""

    def __init__(self, x, weight, bias, **hyper):
        super().__init__()
        self.image = x.shape[1:]
        self.xin = nn.Parameter(x.reshape(len(x), -1))
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias) if bias is not None else None
        self.hyper = hyper

    def forward(self, dummy):
        x = dummy.tape.parameter(self.xin, "xin").view(-1, *self.image)
        return F.conv2d(x, self.weight, self.bias, **self.hyper).flatten()


def _torch_gradients(x, w, b, hyper, target):
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    bt = torch.tensor(b, requires_grad=True) if b is not None else None
    hyper = {k: v for k, v in hyper.items() if k != "algorithm"}
    y = torch.nn.functional.conv2d(xt, wt, bt, **hyper)
    loss = ((y.reshape(len(x), -1) - torch.tensor(target)) ** 2).mean()
    loss.backward()
    grads = {"xin": xt.grad.numpy().reshape(len(x), -1), "weight": wt.grad.numpy()}
    if bt is not None:
        grads["bias"] = bt.grad.numpy()
    return y.detach().numpy().reshape(len(x), -1), grads


def check_against_torch(x, w, b, hyper, rng):
    """nnjit's conv2d of ``hyper`` (float64) equals PyTorch's: its output, and the input, weight
    and bias gradients of an MSE loss against a random target drawn from ``rng``."""
    model = FunctionalConv(x, w, b, **hyper)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    dummy = np.zeros((len(x), 1))
    out = trainer.predict_outputs(dummy)
    target = rng.normal(size=out.shape)
    expected, expected_grads = _torch_gradients(x, w, b, hyper, target)
    np.testing.assert_allclose(out, expected, **F64)
    grads = trainer.gradients(dummy, target)
    assert set(grads) == set(expected_grads)
    for name, g in grads.items():
        np.testing.assert_allclose(np.reshape(g, expected_grads[name].shape),
                                   expected_grads[name], err_msg=name, **F64)


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # (torch's, about its own speed)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_functional_conv2d_forward_and_gradients_equal_torchs(data):
    draw = hypothesis_draw(data)
    geometry = SPECS[0].geometry(draw, {})
    d = geometry.dims
    rng = np.random.default_rng(draw(0, 2**31))
    batch = draw(1, 3)
    x = rng.normal(size=(batch, d["C"], d["H"], d["W"]))
    w = rng.normal(size=(d["O"], d["J"], d["R"], d["S"]))
    b = rng.normal(size=d["O"]) if draw(0, 1) else None
    check_against_torch(x, w, b, geometry.hyper, rng)


def test_a_large_image_runs_one_sample_at_a_time_and_equals_torchs():
    """Past GRADIENT_ELEMENTS the stride-1 (vector) kernels hold one sample's frames and output
    gradient at a time: forward and gradients stay torch's."""
    from nnjit.kernels.conv_vector import samples_per_gradient

    c, o, size = 64, 3, 48
    assert samples_per_gradient(c, o, 3, 3, 1, 1, size, size) == 1
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, c, size, size))
    w = rng.normal(size=(o, c, 3, 3))
    b = rng.normal(size=o)
    model = FunctionalConv(x, w, b, padding=1)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    dummy = np.zeros((2, 1))
    target = rng.normal(size=(2, o * size * size))
    expected, expected_grads = _torch_gradients(x, w, b, {"padding": 1}, target)
    np.testing.assert_allclose(trainer.predict_outputs(dummy), expected, **F64)
    for name, g in trainer.gradients(dummy, target).items():
        np.testing.assert_allclose(np.reshape(g, expected_grads[name].shape),
                                   expected_grads[name], err_msg=name, **F64)


class Image(nn.Module):
    def __init__(self, layer, shape):
        super().__init__()
        self.layer = layer
        self.shape = shape

    def forward(self, x):
        return self.layer(x.view(-1, *self.shape)).flatten()


@pytest.mark.parametrize("args", [
    dict(in_channels=4, out_channels=6, kernel_size=3, padding="same", groups=2),
    dict(in_channels=3, out_channels=4, kernel_size=(2, 4), stride=(2, 1), padding=(1, 2),
         dilation=(2, 1), bias=False),
])
def test_conv2d_layer_equals_torchs_with_its_weights_and_state_dict(args):
    layer = Conv2d(**args)
    theirs = torch.nn.Conv2d(**args, dtype=torch.float64)
    state = layer.state_dict()
    assert {k: tuple(v.shape) for k, v in state.items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    with torch.no_grad():
        for k, v in state.items():
            theirs.state_dict()[k].copy_(torch.tensor(np.asarray(v, np.float64)))
    shape = (args["in_channels"], 7, 9)
    x = np.random.default_rng(1).normal(size=(5, int(np.prod(shape))))
    trainer = nn.Trainer(Image(layer, shape), nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64,
                         seed=0)
    out = trainer.predict_outputs(x)
    expected = theirs(torch.tensor(x.reshape(5, *shape)))
    np.testing.assert_allclose(out, expected.detach().numpy().reshape(5, -1), **F64)


def test_conv2d_init_is_torchs_uniform_bound_and_seeded():
    with nn.seeded(3):
        a = Conv2d(6, 8, 5, groups=2)
    with nn.seeded(3):
        b = Conv2d(6, 8, 5, groups=2)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    bound = 1 / np.sqrt(3 * 5 * 5)  # fan_in = in_channels / groups * kH * kW
    assert a.weight.shape == (8, 3, 5, 5) and a.bias.shape == (8,)
    assert 0.9 * bound < np.abs(a.weight.data).max() <= bound
    assert np.abs(a.bias.data).max() <= bound


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(in_channels=0, out_channels=4, kernel_size=3), "Conv2d: in_channels must be a "
                                                         "positive int"),
    (dict(in_channels=3, out_channels=4, kernel_size=3, groups=2), "in_channels \\(3\\) must "
                                                                   "be divisible by groups"),
    (dict(in_channels=4, out_channels=3, kernel_size=3, groups=2), "out_channels \\(3\\) must "
                                                                   "be divisible by groups"),
    (dict(in_channels=1, out_channels=4, kernel_size=0), "kernel_size must be >= 1"),
    (dict(in_channels=1, out_channels=4, kernel_size=(3, 3, 3)), "kernel_size must be an int "
                                                                 "or a pair"),
    (dict(in_channels=1, out_channels=4, kernel_size=3, stride=0), "stride must be >= 1"),
    (dict(in_channels=1, out_channels=4, kernel_size=3, padding=-1), "padding must be >= 0"),
    (dict(in_channels=1, out_channels=4, kernel_size=3, padding="full"), "padding must be an "
                                                                         "int, a pair"),
    (dict(in_channels=1, out_channels=4, kernel_size=3, stride=2, padding="same"),
     "padding='same' is not supported for strided convolutions"),
    (dict(in_channels=1, out_channels=4, kernel_size=3, dilation=1.5), "dilation must be an "
                                                                       "int or a pair"),
])
def test_conv2d_argument_errors_name_the_argument(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        Conv2d(**kwargs)


class Named(nn.Module):
    def __init__(self, view):
        super().__init__()
        self.features = Conv2d(3, 4, 3)
        self.view = view

    def forward(self, x):
        return self.features(x.view(-1, *self.view) if self.view else x).flatten()


@pytest.mark.parametrize(("view", "cols", "message"), [
    ((2, 5, 5), 50, "Conv2d 'features': expected input with 3 channels \\(in_channels\\), got "
                    "shape \\(.*, 2, 5, 5\\)"),
    (None, 75, "Conv2d 'features': expected an image input of shape \\(batch, C, H, W\\), got "
               "shape \\(.*, 75\\); .*x.view\\(-1, C, H, W\\)"),
    ((3, 2, 5), 30, "Conv2d 'features': input of shape \\(.*, 3, 2, 5\\) is too small for "
                    "kernel_size \\(3, 3\\)"),
])
def test_a_wrong_input_is_an_error_naming_the_layer_and_shape(view, cols, message):
    trainer = nn.Trainer(Named(view), nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    with pytest.raises(ValueError, match=message):
        trainer.predict_outputs(np.zeros((2, cols)))


class DigitsNet(nn.Module):
    """8x8 digits: conv 8@3x3 same - ReLU - conv 16@3x3 stride 2 - ReLU - dense 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = Conv2d(1, 8, 3, padding="same")
        self.conv2 = Conv2d(8, 16, 3, stride=2)
        self.fc = nn.Linear(16 * 3 * 3, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x.view(-1, 1, 8, 8)))
        x = F.relu(self.conv2(x))
        return self.fc(x.flatten())


def test_a_small_conv_net_learns_digits():
    X, y = nn.datasets.load_digits()
    X, y = X[:400] / 16.0, y[:400]
    with nn.seeded(0):
        model = DigitsNet()
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss(), seed=0)
    before = trainer.evaluate(X, y)
    trainer.fit(nn.DataLoader(X, y, batch_size=32, shuffle=True), epochs=8, verbose=0)
    after = trainer.evaluate(X, y)
    assert after["loss"] < 0.5 * before["loss"], (before, after)
    assert after["accuracy"] > 0.8, after
