"""CONV2D_LANES (the conv_lanes family: small stride-1 layers with the samples in the vector
lanes) against PyTorch, float64: hypothesis-drawn geometries through the functional conv2d, and
LeNet-5's two layers, which the recorder gives this algorithm, at a batch that is not a multiple
of the lanes. The kernels' own checks: tests/kernels/test_conv_lanes.py; the registry's
finite-difference check of the op: tests/ops/test_op_gradients.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnjit as nn
from nnjit.nn import Conv2d
from nnjit.ops.conv import choose_algorithm
from nnjit.ops.conv_lanes import SPECS
from tests.ops.op_checker import hypothesis_draw
from tests.ops.test_conv import F64, FunctionalConv, Image, check_against_torch

torch = pytest.importorskip("torch")
torch.set_num_threads(1)


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # (torch's, about its own speed)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_lanes_conv2d_forward_and_gradients_equal_torchs(data):
    draw = hypothesis_draw(data)
    d = (geometry := SPECS[0].geometry(draw, {})).dims
    rng = np.random.default_rng(draw(0, 2**31))
    batch = draw(1, 10)
    x = rng.normal(size=(batch, d["C"], d["H"], d["W"]))
    w = rng.normal(size=(d["O"], d["J"], d["R"], d["S"]))
    b = rng.normal(size=d["O"]) if draw(0, 1) else None
    assert geometry.hyper["algorithm"] == "lanes"
    check_against_torch(x, w, b, geometry.hyper, rng)


@pytest.mark.parametrize("c, o, size, padding", [(1, 6, 28, 2), (6, 16, 14, 0)])
def test_lenets_layers_run_lanes_and_equal_torchs(c, o, size, padding):
    out = size + 2 * padding - 4
    assert choose_algorithm(c, 5, 5, o, (1, 1), (out, out)) == "lanes"
    layer = Conv2d(c, o, 5, padding=padding)
    theirs = torch.nn.Conv2d(c, o, 5, padding=padding, dtype=torch.float64)
    with torch.no_grad():
        for k, v in layer.state_dict().items():
            theirs.state_dict()[k].copy_(torch.tensor(np.asarray(v, np.float64)))
    x = np.random.default_rng(2).normal(size=(17, c * size * size))
    trainer = nn.Trainer(Image(layer, (c, size, size)), nn.SGD(lr=0.1), nn.MSELoss(),
                         dtype=np.float64, seed=0)
    expected = theirs(torch.tensor(x.reshape(17, c, size, size)))
    np.testing.assert_allclose(trainer.predict_outputs(x),
                               expected.detach().numpy().reshape(17, -1), **F64)


@pytest.mark.parametrize("algorithm", ["lanes", "vector"])
def test_a_stride_1_algorithm_asked_for_a_strided_layer_is_refused_by_name(algorithm):
    rng = np.random.default_rng(0)
    model = FunctionalConv(rng.normal(size=(2, 1, 8, 8)), rng.normal(size=(2, 1, 3, 3)), None,
                           stride=2, algorithm=algorithm)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    with pytest.raises(ValueError, match=rf"algorithm '{algorithm}' runs stride 1 only, got "
                                         r"stride \(2, 2\); use 'im2col' or None"):
        trainer.predict_outputs(np.zeros((2, 1)))
