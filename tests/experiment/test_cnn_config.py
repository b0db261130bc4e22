"""NetConfig(kind="cnn"): validation, normalisation and stable ids; the fashion_mnist:PATH data
source of nnjit train. (Training a cnn run end to end: tests/test_examples.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from nnjit.experiment import NetConfig, Nets, RunConfig
from nnjit.experiment.conv_net import conv_output_shapes
from nnjit.experiment.data import image_source, load_run_data

LENET = dict(kind="cnn", in_dim=784, out_dim=10, in_shape=[1, 28, 28], conv_channels=[6, 16],
             kernel_size=5, padding=[2, 0], hidden_dims=[120, 84])


def test_lenet_config_normalises_per_layer_fields_and_round_trips():
    cfg = NetConfig(**LENET)
    assert cfg.kind is Nets.CNN and cfg.in_shape == (1, 28, 28)
    assert cfg.kernel_size == (5, 5) and cfg.padding == (2, 0) and cfg.pool == 2
    assert NetConfig.from_state(cfg.state()) == cfg
    # one int for every layer and the same value per layer are the same run
    assert NetConfig(**{**LENET, "kernel_size": [5, 5]}).config_hash() == cfg.config_hash()
    same = NetConfig(**{**LENET, "in_shape": [1, 28, 28], "padding": ["same", 0]})
    assert same.padding == ("same", 0)


def test_feature_map_sizes_follow_pytorch():
    assert conv_output_shapes((1, 28, 28), (6, 16), (5, 5), (2, 0), 2) == [(6, 14, 14),
                                                                          (16, 5, 5)]
    assert conv_output_shapes((3, 8, 8), (4,), (3,), ("same",), 1) == [(4, 8, 8)]
    assert conv_output_shapes((1, 9, 9), (2,), (3,), (0,), 2) == [(2, 3, 3)]  # 7 // 2 = 3


def test_other_kinds_keep_their_ids():
    """The new fields are left out of an MLP's state, so existing run ids do not change."""
    assert NetConfig(in_dim=64, out_dim=10, hidden_dims=(128,)).state() == {
        "in_dim": 64, "out_dim": 10, "hidden_dims": [128]}


@pytest.mark.parametrize("change, match", [
    ({"in_shape": None}, r"in_shape must be \[C, H, W\]"),
    ({"in_shape": [1, 28]}, r"in_shape must be \[C, H, W\]"),
    ({"in_shape": [1, 28, 0]}, r"in_shape\[2\] must be an int >= 1"),
    ({"in_dim": 780}, r"in_dim must be C\*H\*W = 784"),
    ({"conv_channels": []}, r"conv_channels must be a non-empty list"),
    ({"conv_channels": [6, 0]}, r"conv_channels\[1\] must be an int >= 1"),
    ({"kernel_size": [5]}, r"kernel_size must give one value per conv layer \(2\), got 1"),
    ({"kernel_size": 0}, r"kernel_size must be an int >= 1"),
    ({"padding": "valid"}, r"padding must be an int >= 0 or \"same\""),
    ({"padding": [2, -1]}, r"padding\[1\] must be an int >= 0"),
    ({"pool": 0}, r"pool must be an int >= 1"),
    ({"kernel_size": 29, "padding": 0}, r"conv layer 0 \(kernel_size 29, padding 0\) leaves no "),
    ({"conv_channels": [4] * 5, "padding": 2}, r"max-pool after conv layer 4 gets a 1x1 map"),
])
def test_bad_cnn_fields_name_the_field(change, match):
    with pytest.raises(ValueError, match=match):
        NetConfig(**{**LENET, **change})


def test_cnn_fields_refused_for_other_kinds():
    with pytest.raises(ValueError, match=r"NetConfig.conv_channels applies only to kind 'cnn' "
                                         r"\(this net is 'mlp'\)"):
        NetConfig(in_dim=64, out_dim=10, conv_channels=[8])
    with pytest.raises(ValueError, match=r"NetConfig.pool applies only to kind 'cnn'"):
        NetConfig(kind="graph_conv", in_dim=64, out_dim=10, pool=3)


def test_example_configs_parse():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples"
    for name, shape in (("digits_cnn.yaml", (1, 8, 8)), ("fashion_mnist_cnn.yaml", (1, 28, 28))):
        cfg = RunConfig.from_yaml((root / name).read_text(encoding="utf-8"), name)
        assert cfg.model.net.kind is Nets.CNN and cfg.model.net.in_shape == shape


def test_image_source_spec():
    assert image_source("fashion_mnist:/data/fm.npz") == ("fashion_mnist", "/data/fm.npz")
    assert image_source("Fashion-MNIST:rel/dir") == ("fashion_mnist", "rel/dir")
    assert image_source("digits") is None and image_source("C:/x.csv") is None


def test_fashion_mnist_source_splits_train_keeps_test(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.integers(0, 256, (40, 784), dtype=np.uint8),
              "y_train": np.repeat(np.arange(10, dtype=np.uint8), 4),
              "x_test": rng.integers(0, 256, (7, 784), dtype=np.uint8),
              "y_test": np.arange(7, dtype=np.uint8)}
    np.savez(tmp_path / "fm.npz", **arrays)
    spec = f"fashion_mnist:{tmp_path / 'fm.npz'}"
    data = load_run_data(spec, regression=False, seed=0, val=0.25)
    assert data.X_train.shape == (30, 784) and data.X_val.shape == (10, 784)
    assert data.X_train.dtype == np.float32 and data.X_train.max() <= 1.0
    np.testing.assert_array_equal(data.X_test * 255, arrays["x_test"].astype(np.float32))
    np.testing.assert_array_equal(data.y_test, np.arange(7))
    assert data.class_names[0] == "T-shirt/top" and data.source == spec
    again = load_run_data(spec, regression=False, seed=0, val=0.25)  # nnjit report re-splits
    np.testing.assert_array_equal(again.X_val, data.X_val)
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_run_data(f"fashion_mnist:{tmp_path / 'nope.npz'}", regression=False, seed=0)
