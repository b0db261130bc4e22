"""CONV2D_WINOGRAD (the conv_winograd family: 3x3 stride-1 layers by Winograd's F(2x2, 3x3))
against PyTorch, float64: hypothesis-drawn geometries through the functional conv2d, the
VGG-style net's conv layers (which the recorder gives this algorithm) in a model with batch norm,
ReLU and pooling at a batch that is not a multiple of the lanes, and the refusal of "winograd" on
a geometry it cannot run. The kernels' own checks: tests/kernels/test_conv_winograd.py; the
registry's finite-difference check of the op: tests/ops/test_op_gradients.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnjit as nn
from nnjit.ops.conv import choose_algorithm
from nnjit.ops.conv_winograd import SPECS
from tests.ops.op_checker import hypothesis_draw
from tests.ops.test_conv import F64, FunctionalConv, check_against_torch

torch = pytest.importorskip("torch")
torch.set_num_threads(1)


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # (torch's, about its own speed)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_winograd_conv2d_forward_and_gradients_equal_torchs(data):
    draw = hypothesis_draw(data)
    d = (geometry := SPECS[0].geometry(draw, {})).dims
    rng = np.random.default_rng(draw(0, 2**31))
    batch = draw(1, 18)
    x = rng.normal(size=(batch, d["C"], d["H"], d["W"]))
    w = rng.normal(size=(d["O"], d["J"], d["R"], d["S"]))
    b = rng.normal(size=d["O"]) if draw(0, 1) else None
    assert geometry.hyper["algorithm"] == "winograd"
    check_against_torch(x, w, b, geometry.hyper, rng)


def test_the_vgg_nets_convolutions_run_winograd_and_equal_torchs():
    from benchmarks.vgg import nnjit_vgg, torch_vgg

    assert choose_algorithm(1, 3, 3, 32, (1, 1), (28, 28)) == "vector"
    assert choose_algorithm(32, 3, 3, 32, (1, 1), (28, 28)) == "winograd"
    assert choose_algorithm(32, 3, 3, 64, (1, 1), (14, 14)) == "winograd"
    # (the weight gradient's lane sums grow with in x out channels: wide layers keep "vector")
    assert choose_algorithm(256, 3, 3, 256, (1, 1), (7, 7)) == "vector"
    model = nnjit_vgg(nn)
    theirs = torch_vgg().double()
    theirs.load_state_dict({k: torch.tensor(np.asarray(v, np.float64))
                            for k, v in model.state_dict().items()})
    rng = np.random.default_rng(3)
    x = rng.normal(size=(19, 784))  # (a batch of one full group of lanes and a partial one)
    y = rng.integers(0, 10, 19)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.CrossEntropyLoss(), dtype=np.float64, seed=0)
    with torch.no_grad():  # (inference: batch norm's running statistics, in both)
        want = theirs.eval()(torch.tensor(x)).numpy()
    np.testing.assert_allclose(trainer.predict_outputs(x), want, **F64)
    grads = trainer.gradients(x, y)  # (training: the batch's statistics)
    out = theirs.train()(torch.tensor(x))
    torch.nn.functional.cross_entropy(out, torch.tensor(y)).backward()
    expected = dict(theirs.named_parameters())
    assert set(grads) == set(expected)
    for name, g in grads.items():
        want = expected[name].grad.numpy()
        np.testing.assert_allclose(np.reshape(g, want.shape), want, err_msg=name, **F64)


def test_winograd_asked_for_a_geometry_it_cannot_run_is_refused_by_name():
    rng = np.random.default_rng(0)
    model = FunctionalConv(rng.normal(size=(2, 1, 12, 12)), rng.normal(size=(2, 1, 5, 5)),
                           None, dilation=2, algorithm="winograd")
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    with pytest.raises(ValueError, match=r"algorithm 'winograd' runs 3x3 kernels at stride 1 "
                                         r"without dilation in one group only, got kernel_size "
                                         r"\(5, 5\), dilation \(2, 2\); use 'vector', 'im2col' "
                                         r"or None"):
        trainer.predict_outputs(np.zeros((2, 1)))
