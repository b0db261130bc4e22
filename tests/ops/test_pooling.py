"""Pooling layers and Flatten: PyTorch parity, argument errors, a residual block, a Digits fit.

The registry-driven check (tests/ops/test_op_gradients.py) covers each pooling op against its
NumPy reference and finite differences; here the ops are held to torch.nn.functional's forward
and gradients on the same inputs, in float64 (hypothesis over kernel, stride, padding,
dilation, ceil_mode, count_include_pad and divisor_override: torch and nnjit accept and refuse
the same geometries). Every model here uses only the pooling family in float64: one build.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import nnjit as nn
from nnjit.nn import AdaptiveAvgPool2d, AvgPool2d, Flatten, MaxPool2d
from nnjit.nn import functional as F
from nnjit.tape.tape import op_name
from tests.helpers import count_allocations

DTYPE = np.float64  # one build for every test of the file (the pooling family, float64)


class ImageProbe(nn.Module):
    """``layer`` on a parameter holding images (B, C, H, W) as rows, so the interpreter
    differentiates the images; remembers the layer's output tensor."""

    def __init__(self, images, layer):
        super().__init__()
        self.shape = images.shape
        self.images = nn.Parameter(images.reshape(images.shape[0], -1).copy())
        self.layer = layer
        self.out = None

    def forward(self, x):
        images = x.tape.parameter(self.images, "images").view(-1, *self.shape[1:])
        self.out = self.layer(images)
        return self.out


def import_torch():
    """torch, on one thread (tiny tensors: its thread pool's waits cost ~50 ms an op on a
    loaded machine), or the test is skipped."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def run_nnjit(layer, images, target_seed=0):
    """(output (B, C, OH, OW), d mean-squared-error / d images) of ``layer`` through the
    interpreter, against a random target."""
    model = ImageProbe(images, layer)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=DTYPE, seed=0)
    X = np.zeros((images.shape[0], 1))
    trainer.predict_outputs(X)  # trace: the output's shape is known from here
    out_shape = model.out.shape
    rows = (out_shape[0], int(np.prod(out_shape[1:])))
    target = np.random.default_rng(target_seed).normal(size=rows)
    grads = trainer.gradients(X, target)
    out = np.array(model.out.data).reshape(out_shape)
    return out, grads["images"].reshape(images.shape), target


def run_torch(fn, images, target):
    torch = import_torch()
    x = torch.tensor(images, requires_grad=True)
    y = fn(x)
    loss = torch.nn.functional.mse_loss(y.reshape(y.shape[0], -1), torch.tensor(target))
    loss.backward()
    return y.detach().numpy(), x.grad.numpy()


def assert_parity(layer, torch_fn, images):
    out, grad, target = run_nnjit(layer, images)
    expected, expected_grad = run_torch(torch_fn, images, target)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-14)


pairs = st.one_of(st.integers(1, 4), st.tuples(st.integers(1, 4), st.integers(1, 4)))


def images_of(data, max_side=7):
    b, c = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
    h, w = data.draw(st.integers(1, max_side)), data.draw(st.integers(1, max_side))
    seed = data.draw(st.integers(0, 2**16))
    return np.random.default_rng(seed).uniform(-2, 2, (b, c, h, w))


def torch_refuses(fn, images) -> bool:
    torch = import_torch()
    try:
        fn(torch.tensor(images))
    except (RuntimeError, ValueError):
        return True
    return False


def _as_pair(v):
    return v if isinstance(v, tuple) else (v, v)


def _padding(data, kernel):
    kh, kw = _as_pair(kernel)
    # mostly valid paddings (at most half the kernel), sometimes one torch refuses
    return data.draw(st.one_of(st.tuples(st.integers(0, kh // 2), st.integers(0, kw // 2)),
                               st.integers(0, 2)))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_max_pool2d_matches_torch_forward_and_gradients(data):
    torch = import_torch()
    images = images_of(data)
    kernel = data.draw(pairs)
    kw = dict(kernel_size=kernel, stride=data.draw(st.one_of(st.none(), pairs)),
              padding=_padding(data, kernel), dilation=data.draw(st.one_of(st.just(1), pairs)),
              ceil_mode=data.draw(st.booleans()))

    def fn(x):
        return torch.nn.functional.max_pool2d(x, **kw)

    if torch_refuses(fn, images):
        with pytest.raises(ValueError, match="kernel_size|padding"):
            run_nnjit(MaxPool2d(**kw), images)
        return
    # a window wholly in the padding gives -inf in both (no loss to differentiate then)
    assume(np.isfinite(fn(torch.tensor(images)).numpy()).all())
    assert_parity(MaxPool2d(**kw), fn, images)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_avg_pool2d_matches_torch_forward_and_gradients(data):
    torch = import_torch()
    images = images_of(data)
    kernel = data.draw(pairs)
    kw = dict(kernel_size=kernel, stride=data.draw(st.one_of(st.none(), pairs)),
              padding=_padding(data, kernel), ceil_mode=data.draw(st.booleans()),
              count_include_pad=data.draw(st.booleans()),
              divisor_override=data.draw(st.one_of(st.none(), st.integers(1, 5))))

    def fn(x):
        return torch.nn.functional.avg_pool2d(x, **kw)

    if torch_refuses(fn, images):
        with pytest.raises(ValueError, match="kernel_size|padding"):
            run_nnjit(AvgPool2d(**kw), images)
        return
    assert_parity(AvgPool2d(**kw), fn, images)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), output_size=st.one_of(
    st.integers(1, 5), st.tuples(st.integers(1, 5), st.integers(1, 5)),
    st.tuples(st.none(), st.integers(1, 5))))  # None keeps the input's height
def test_adaptive_avg_pool2d_matches_torch_forward_and_gradients(data, output_size):
    torch = import_torch()
    images = images_of(data)
    assert_parity(AdaptiveAvgPool2d(output_size),
                  lambda x: torch.nn.functional.adaptive_avg_pool2d(x, output_size), images)


def test_global_average_pool_is_the_mean_of_each_plane():
    images = np.random.default_rng(1).normal(size=(3, 4, 5, 6))
    out, grad, target = run_nnjit(AdaptiveAvgPool2d(1), images)
    np.testing.assert_allclose(out[:, :, 0, 0], images.mean(axis=(2, 3)), rtol=1e-12)
    # d mean((y - t)^2) / dx = 2 (y - t) / (B*C) spread evenly over the H*W inputs
    expected = 2 * (out[:, :, 0, 0] - target) / target.size / 30
    np.testing.assert_allclose(grad, np.broadcast_to(expected[:, :, None, None], grad.shape),
                               rtol=1e-12)


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=1, padding=1),
                                dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, stride=2)])  # (the 2x2 kernel)
def test_max_pool_ties_send_the_gradient_to_the_first_maximum_as_torch(kw):
    """Windows full of equal values (and overlapping ones, stride 1): the gradient goes to the
    first maximum in row-major window order, as in PyTorch's CPU kernel."""
    torch = import_torch()
    images = np.random.default_rng(2).integers(0, 2, (2, 2, 6, 6)).astype(np.float64)
    images[0, 0] = 1.0  # a constant plane: every window is a tie
    out, grad, target = run_nnjit(MaxPool2d(**kw), images)
    expected, expected_grad = run_torch(lambda x: torch.nn.functional.max_pool2d(x, **kw),
                                        images, target)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12, atol=0)
    assert np.count_nonzero(grad[0, 0]) < grad[0, 0].size  # one winner per window


@pytest.mark.parametrize("kernel, stride, padding", [(3, 2, 1), (2, 2, 0)])  # (2: its own loop)
def test_max_pool_kernel_nan_wins_its_window_as_torch(kernel, stride, padding):
    """A NaN is its window's maximum and the last of several NaNs its argmax, as in PyTorch's
    CPU kernel; NaNs among ties take every branch of the comparison. (The kernel itself: a
    NaN loss stops a fit before any gradient could be compared.)"""
    torch = import_torch()
    from nnjit.kernels.pooling import maxpool2d_forward

    rng = np.random.default_rng(5)
    images = rng.integers(0, 3, (2, 3, 8, 8)).astype(np.float64)
    images[rng.random(images.shape) < 0.15] = np.nan
    expected, indices = torch.nn.functional.max_pool2d(
        torch.from_numpy(images), kernel, stride, padding, return_indices=True)
    planes, (oh, ow) = 6, expected.shape[2:]
    out, argmax = np.empty(planes * oh * ow), np.empty(planes * oh * ow)
    maxpool2d_forward(images.ravel(), out, argmax, planes, 8, 8, oh, ow, kernel, kernel, stride,
                      stride, padding, padding, 1, 1, False)
    assert np.isnan(out).any() and not np.isnan(out).all()
    np.testing.assert_array_equal(out, expected.numpy().ravel())
    np.testing.assert_array_equal(argmax, indices.numpy().ravel())


class TwoPools(nn.Module):
    """max_pool2d(x) + avg_pool2d(x): x's gradient is written by one pool, added by the other."""

    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.max_pool2d(x, **self.kw) + F.avg_pool2d(x, **self.kw)


@pytest.mark.parametrize("side", [8, 7])  # 2x2 windows tile the image, or leave an edge
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)],
                         ids=["2x2", "3x3"])
def test_two_pools_of_one_input_add_up_its_gradient_as_torch(side, kw):
    torch = import_torch()
    images = np.random.default_rng(side).normal(size=(3, 2, side, side))

    def fn(x):
        return torch.nn.functional.max_pool2d(x, **kw) + torch.nn.functional.avg_pool2d(x, **kw)

    assert_parity(TwoPools(**kw), fn, images)


class ReluThenPools(nn.Module):
    """ReLU then a max pool, and with ``also_avg`` an average pool of the same ReLU output too
    (two readers: the ReLU must stay its own op)."""

    def __init__(self, also_avg=False, **kw):
        super().__init__()
        self.kw, self.also_avg = kw, also_avg

    def forward(self, x):
        r = F.relu(x)
        y = F.max_pool2d(r, **self.kw)
        return y + F.avg_pool2d(r, **self.kw) if self.also_avg else y


@pytest.mark.parametrize("side", [8, 7])
@pytest.mark.parametrize(("kw", "also_avg"), [
    (dict(kernel_size=2), False), (dict(kernel_size=3, stride=2, padding=1), False),
    (dict(kernel_size=2, stride=1, dilation=2), False), (dict(kernel_size=2), True),
], ids=["2x2", "3x3", "dilated", "two-readers"])
def test_relu_before_a_max_pool_is_folded_into_it_with_torch_values_and_gradients(
        side, kw, also_avg):
    """The program folds a ReLU read only by a max pool into the pool (nnjit.engine.fusion):
    one op fewer, the same values and gradients as torch's ReLU then pool, on images of
    integers (ties, exact zeros and windows of negatives only take every branch)."""
    torch = import_torch()
    images = np.random.default_rng(side).integers(-3, 3, (3, 2, side, side)).astype(np.float64)
    model = ReluThenPools(also_avg, **kw)

    def fn(x):
        r = torch.relu(x)
        y = torch.nn.functional.max_pool2d(r, **kw)
        return y + torch.nn.functional.avg_pool2d(r, **kw) if also_avg else y

    probe = ImageProbe(images, model)
    trainer = nn.Trainer(probe, nn.SGD(lr=0.1), nn.MSELoss(), dtype=DTYPE, seed=0)
    trainer.predict_outputs(np.zeros((3, 1)))
    names = [op_name(int(code)) for code in trainer.program.records[:, 0]]
    assert ("relu" in names) == also_avg, names
    assert_parity(model, fn, images)


def test_functional_forms_record_the_same_ops_as_the_layers():
    images = np.random.default_rng(3).normal(size=(2, 3, 6, 6))

    class Functional(nn.Module):
        def forward(self, x):
            return F.adaptive_avg_pool2d(
                F.avg_pool2d(F.max_pool2d(x, 2, stride=1), 3, padding=1), (2, 1))

    layers = nn.Sequential(MaxPool2d(2, stride=1), AvgPool2d(3, padding=1),
                           AdaptiveAvgPool2d((2, 1)))
    out_f, grad_f, _ = run_nnjit(Functional(), images)
    out_l, grad_l, _ = run_nnjit(layers, images)
    assert out_f.shape == (2, 3, 2, 1)
    np.testing.assert_array_equal(out_f, out_l)
    np.testing.assert_array_equal(grad_f, grad_l)


# ------------------------------------------------------------------------------------------------
# argument and shape errors
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("make", "match"), [
    (lambda: MaxPool2d(0), "MaxPool2d: kernel_size must be an int >= 1"),
    (lambda: MaxPool2d((2, 2, 2)), "kernel_size must be .* pair"),
    (lambda: MaxPool2d(2, stride=0), "MaxPool2d: stride must be an int >= 1"),
    (lambda: MaxPool2d(2, padding=2), r"MaxPool2d: padding \(2, 2\) must be at most half"),
    (lambda: MaxPool2d(3, padding=-1), "padding must be an int >= 0"),
    (lambda: MaxPool2d(2, dilation=0), "dilation must be an int >= 1"),
    (lambda: MaxPool2d(2, ceil_mode="yes"), "ceil_mode must be True or False"),
    (lambda: MaxPool2d(2.5), "kernel_size must be an int"),
    (lambda: AvgPool2d((3, 1), padding=(1, 1)), r"AvgPool2d: padding \(1, 1\) must be at most"),
    (lambda: AvgPool2d(2, divisor_override=0), "divisor_override must be None or an int >= 1"),
    (lambda: AvgPool2d(2, count_include_pad=1), "count_include_pad must be True or False"),
    (lambda: AdaptiveAvgPool2d(0), "AdaptiveAvgPool2d: output_size must be an int >= 1"),
    (lambda: AdaptiveAvgPool2d((1, 2, 3)), "output_size must be"),
    (lambda: Flatten(0), "Flatten: start_dim=0 is not supported"),
    (lambda: Flatten(1.5), "Flatten: start_dim must be an int"),
])
def test_layer_arguments_are_checked_at_construction(make, match):
    with pytest.raises(ValueError, match=match):
        make()


class Flat(nn.Module):
    """Applies ``layer`` to (B, 64) rows (after a Linear 64 -> 64, something to train), read
    as ``view`` or as they are."""

    def __init__(self, layer, view=None):
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.layer = layer
        self.view = view

    def forward(self, x):
        x = self.fc(x)
        return self.layer(x if self.view is None else x.view(-1, *self.view))


@pytest.mark.parametrize("layer", [MaxPool2d(2), AvgPool2d(2), AdaptiveAvgPool2d(1)],
                         ids=["max", "avg", "adaptive"])
def test_a_flat_input_is_refused_naming_the_layer_shape_and_view(layer):
    name = type(layer).__name__
    trainer = nn.Trainer(Flat(layer), dtype=DTYPE)
    with pytest.raises(ValueError, match=rf"{name} 'layer': expected images of shape "
                                         r"\(B, C, H, W\), got shape \(batch\(4\), 64\).*"
                                         r"x\.view\(-1, C, H, W\)"):
        trainer.predict_outputs(np.zeros((4, 64)))


def test_a_kernel_larger_than_the_image_is_refused_naming_the_layer():
    trainer = nn.Trainer(Flat(MaxPool2d(5, padding=1), view=(4, 2, 8)), dtype=DTYPE)
    with pytest.raises(ValueError, match=r"MaxPool2d 'layer': kernel_size \(5, 5\) .* does not "
                                         r"fit images of 2x8 \(the output would be 0x2\)"):
        trainer.predict_outputs(np.zeros((4, 64)))


def test_functional_return_indices_is_refused():
    trainer = nn.Trainer(Flat(lambda x: F.max_pool2d(x, 2, return_indices=True), (1, 8, 8)),
                         dtype=DTYPE)
    with pytest.raises(ValueError, match="return_indices=True is not supported"):
        trainer.predict_outputs(np.zeros((4, 64)))


def test_flatten_reads_each_sample_as_one_row_without_an_op():
    seen = {}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = Flatten()
            self.flatten_all = Flatten(1, 3)
            self.fc = nn.Linear(64, 3)

        def forward(self, x):
            images = x.view(-1, 4, 4, 4)
            flat = self.flatten(images)
            seen.update(images=images.shape, flat=flat.shape, flat2=self.flatten_all(images).shape,
                        again=self.flatten(flat).shape, same_slot=flat.slot == images.slot,
                        records=len(x.tape.nodes))
            return self.fc(flat)

    trainer = nn.Trainer(Net(), dtype=DTYPE)
    assert trainer.predict_outputs(np.ones((5, 64))).shape == (5, 3)
    assert seen["images"][1:] == (4, 4, 4)
    assert seen["flat"][1:] == seen["flat2"][1:] == seen["again"][1:] == (64,)
    assert seen["same_slot"] and seen["records"] == 0  # a view: nothing recorded

    class Partial(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)
            self.flatten = Flatten(1, 2)

        def forward(self, x):
            return self.flatten(self.fc(x).view(-1, 4, 4, 4))

    with pytest.raises(ValueError, match=r"Flatten 'flatten': end_dim=2 on shape "
                                         r"\(batch\(5\), 4, 4, 4\) is not supported"):
        nn.Trainer(Partial(), dtype=DTYPE).predict_outputs(np.ones((5, 64)))


# ------------------------------------------------------------------------------------------------
# a residual block on images, and a Digits fit
# ------------------------------------------------------------------------------------------------


class ResidualPoolNet(nn.Module):
    """Linear 64 -> 4x8x8 images, ``h + relu(h)`` (a residual block on images), 2x2 max pool,
    flatten, Linear 64 -> 10."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Linear(64, 4 * 64, init="torch")
        self.pool = MaxPool2d(2)
        self.flatten = Flatten()
        self.head = nn.Linear(4 * 16, 10, init="torch")
        self.shapes = {}

    def forward(self, x):
        h = self.expand(x).view(-1, 4, 8, 8)
        h = h + F.relu(h)
        pooled = self.pool(h)
        self.shapes.update(block=h.shape, pooled=pooled.shape)
        return self.head(self.flatten(pooled))


def torch_residual(model, X, y):
    """The same net in PyTorch on model's weights: (outputs, {name: gradient})."""
    torch = import_torch()
    w = {name: torch.tensor(np.asarray(p.data, np.float64).reshape(p.shape), requires_grad=True)
         for name, p in model.named_parameters()}
    h = torch.tensor(X) @ w["expand.weight"].T + w["expand.bias"].reshape(-1)
    h = h.reshape(-1, 4, 8, 8)
    h = h + torch.relu(h)
    out = torch.nn.functional.max_pool2d(h, 2).flatten(1) @ w["head.weight"].T \
        + w["head.bias"].reshape(-1)
    torch.nn.functional.cross_entropy(out, torch.tensor(y, dtype=torch.long)).backward()
    return out.detach().numpy(), {name: t.grad.numpy() for name, t in w.items()}


def digits(n=None):
    X, y = nn.datasets.load_digits()
    X, y = X[:n], y[:n]
    return X.astype(np.float64) / 16.0, y


def test_residual_block_on_images_traces_and_matches_torch():
    X, y = digits(32)
    nn.set_seed(0)
    model = ResidualPoolNet()
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.CrossEntropyLoss(), dtype=DTYPE)
    grads = trainer.gradients(X, y)
    assert int(model.shapes["block"][0]) == 32
    assert model.shapes["block"][1:] == (4, 8, 8) and model.shapes["pooled"][1:] == (4, 4, 4)
    expected_out, expected_grads = torch_residual(model, X, y)
    np.testing.assert_allclose(trainer.predict_outputs(X), expected_out, rtol=1e-10, atol=1e-12)
    for name, g in expected_grads.items():
        np.testing.assert_allclose(grads[name].reshape(g.shape), g, rtol=1e-9, atol=1e-12,
                                   err_msg=name)


def test_digits_fit_with_pooling_lowers_its_loss_without_allocating_per_epoch():
    X, y = digits()
    X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, test_size=0.2, seed=0)
    nn.set_seed(0)
    model = ResidualPoolNet()
    trainer = nn.Trainer(model, nn.Adam(lr=1e-3), nn.CrossEntropyLoss(), dtype=DTYPE, seed=0)
    loader = nn.DataLoader(X_train, y_train, batch_size=64)
    before = trainer.evaluate(X_test, y_test)["loss"]
    history = trainer.fit(loader, epochs=3, verbose=False, n_iter_no_change=None)
    after = trainer.evaluate(X_test, y_test)
    losses = history["train_loss"].tolist()
    assert losses[-1] < losses[0]
    assert after["loss"] < 0.5 * before and after["accuracy"] > 0.85, (before, after)

    def fit(epochs):
        trainer.fit(loader, epochs=epochs, verbose=False, n_iter_no_change=None)

    two, six = count_allocations(fit, repeats=(2, 6))
    assert six == two, f"{six - two} NRT allocations over 4 extra epochs"


def test_save_onnx_of_a_pooling_model_matches_onnxruntime(tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    model = ResidualPoolNet()
    model.save_onnx(tmp_path / "net.onnx")  # (tests/export/test_onnx_layers.py: every layer)
    X = np.random.default_rng(0).normal(size=(5, 64)).astype(np.float32)
    session = ort.InferenceSession(str(tmp_path / "net.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"input": X})[0], model.predict(X), rtol=1e-5,
                               atol=1e-5)
