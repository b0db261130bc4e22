"""The examples run as scripts, as a user would run them."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import nnjit as nn
from nnjit.experiment import Checkpoints
from tests.helpers import installed_nnjit

ROOT = pathlib.Path(__file__).parents[1]


def run(script, cwd):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / script)], cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_quickstart_seed(tmp_path):
    stdout = run("quickstart_seed.py", tmp_path)
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", stdout).group(1))
    assert accuracy >= 0.85
    assert (tmp_path / "model.nne").exists()


def test_custom_op_seed(tmp_path):
    stdout = run("custom_op_seed.py", tmp_path)
    assert re.search(r"Python MulOp: [0-9.]+ ms/epoch, test accuracy 0\.[89]", stdout), stdout
    assert "slower" in stdout


def test_cora_gnn(tmp_path):
    stdout = run("cora_gnn.py", tmp_path)
    accuracies = dict(re.findall(r"^(.+?): test accuracy ([0-9.]+)", stdout, flags=re.M))
    assert set(accuracies) == {"GCN", "GraphSAGE", "GAT", "GraphSAGE, neighbour-sampled"}
    assert all(float(a) >= 0.75 for a in accuracies.values()), stdout


# --- the ready-to-run configs, through the installed nnjit command ----------------------------


def nnjit_train(config, cwd):
    """``nnjit train examples/CONFIG --quiet`` from a folder holding a copy of examples/ (as
    from the repository root); returns the run."""
    from nnjit.experiment.run_folder import Run

    shutil.copytree(ROOT / "examples", cwd / "examples")
    command = installed_nnjit()
    out = subprocess.run([command, "train", f"examples/{config}", "--quiet"], cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    runs = Run.all(cwd / "runs")
    assert len(runs) == 1 and f"run runs/{runs[0].id}" in out.stdout, out.stdout
    return runs[0]


def test_digits_mlp_config(tmp_path):
    run = nnjit_train("digits_mlp.yaml", tmp_path)
    history = run.history()
    assert run.config.data == "digits" and run.config.model.net.in_dim == 64
    assert 10 < len(history) <= 100
    assert history["val_accuracy"].max() >= 0.95, history.tail()
    assert run.checkpoint(Checkpoints.BEST).is_file()


def test_tabular_csv_config(tmp_path):
    run = nnjit_train("tabular_csv.yaml", tmp_path)
    history = run.history()
    assert run.config.data == "examples/iris.csv"
    assert history["val_accuracy"].max() >= 0.85, history.tail()
    data = run.load_data()  # the CSV again, split as nnjit train split it
    assert data.class_names == ("setosa", "versicolor", "virginica")
    assert len(data.X_train) + len(data.X_val) == 150


def test_iris_csv_is_the_bundled_iris(tmp_path):
    spec = importlib.util.spec_from_file_location("make_iris_csv",
                                                  ROOT / "examples" / "make_iris_csv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "examples" / "iris.csv").read_text(encoding="utf-8")
    assert text == module.iris_csv()  # the committed CSV is what the script writes
    import pandas as pd

    df = pd.read_csv(ROOT / "examples" / "iris.csv")
    X, y = nn.datasets.load_iris()
    np.testing.assert_allclose(df.iloc[:, :4].to_numpy(), X, atol=1e-6)
    assert (df["species"].astype("category").cat.codes.to_numpy() == y).all()


def test_cora_gcn_config_matches_the_code_in_docs_gnn(tmp_path):
    """examples/cora_gcn.yaml trains the GCN that docs/gnn.md writes in code, to the same
    result: all 200 epochs, the best validation epoch kept, the same test accuracy (+-0.02;
    the two initialise their weights from different random streams)."""
    from nnjit.data.full_batch import FullBatch
    from nnjit.nn import functional as F

    run = nnjit_train("cora_gcn.yaml", tmp_path)
    history = run.history()
    assert len(history) == 200, "the run stopped early: patience must be null"
    graph = run.load_data().graph
    outputs = run.checkpoint_outputs(FullBatch(graph, "test"), Checkpoints.BEST)
    config_accuracy = float(np.mean(outputs.argmax(1) == graph.y[graph.test_mask]))

    class GCN(nn.Module):  # docs/gnn.md's model, as written there
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.GCNConv(1433, 16), nn.GCNConv(16, 7)
            self.drop = nn.Dropout(0.5)

        def forward(self, x, edges):
            x = F.relu(self.conv1(self.drop(x), edges))
            return self.conv2(self.drop(x), edges)

    trainer = nn.Trainer(GCN(), nn.Adam(lr=0.01, weight_decay=5e-4), seed=0)
    code = trainer.fit(graph, epochs=200, n_iter_no_change=None, monitor="val_accuracy",
                       verbose=False)
    code_accuracy = trainer.evaluate(graph, "test")["accuracy"]
    assert len(code) == 200
    assert config_accuracy >= 0.78 and code_accuracy >= 0.78, (config_accuracy, code_accuracy)
    assert abs(config_accuracy - code_accuracy) <= 0.02, (config_accuracy, code_accuracy)
    assert abs(history["val_accuracy"].max() - code["val_accuracy"].max()) <= 0.02


@pytest.mark.parametrize("page, example", [("gnn.md", "cora_gcn.yaml"),
                                           ("sequences.md", "digits_lstm.yaml")])
def test_the_example_yaml_is_the_config_its_docs_page_shows(page, example):
    """docs/gnn.md shows examples/cora_gcn.yaml, docs/sequences.md examples/digits_lstm.yaml:
    each pair stays one config."""
    from nnjit.experiment import RunConfig

    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, flags=re.M | re.S)
    assert len(blocks) == 1
    config = (ROOT / "examples" / example).read_text(encoding="utf-8")
    assert RunConfig.from_yaml(blocks[0]) == RunConfig.from_yaml(config)


# --- CNNs: the LeNet example script and the cnn configs ------------------------------------------


def test_fashion_mnist_cnn_example(tmp_path):
    """examples/fashion_mnist_cnn.py on 3000 images of the shared copy for 1 epoch (a tiny
    synthetic copy in the same layout where the shared data is absent)."""
    shared = ROOT.parent / "shared" / "data" / "fashion_mnist.npz"
    args = ["--rows", "3000", "--epochs", "1"]
    if not shared.is_file():
        rng = np.random.default_rng(0)
        np.savez(tmp_path / "fm.npz", x_train=rng.integers(0, 256, (200, 784), dtype=np.uint8),
                 y_train=rng.integers(0, 10, 200, dtype=np.uint8),
                 x_test=rng.integers(0, 256, (50, 784), dtype=np.uint8),
                 y_test=rng.integers(0, 10, 50, dtype=np.uint8))
        args += ["--data", str(tmp_path / "fm.npz")]
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "fashion_mnist_cnn.py"), *args],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", out.stdout).group(1))
    assert "training images (1, 28, 28)" in out.stdout
    assert accuracy >= (0.6 if shared.is_file() else 0.0), out.stdout


def test_digits_cnn_config(tmp_path):
    """examples/digits_cnn.yaml trains a CNN on the bundled 8x8 digits through the installed
    nnjit train (the net views each 64-value row as a 1x8x8 image)."""
    run = nnjit_train("digits_cnn.yaml", tmp_path)
    history = run.history()
    net = run.config.model.net
    assert net.kind.value == "cnn" and net.in_shape == (1, 8, 8)
    assert history["val_accuracy"].max() >= 0.9, history.tail()
    assert run.checkpoint(Checkpoints.BEST).is_file()


def test_fashion_mnist_cnn_config_on_a_tiny_copy(tmp_path):
    """examples/fashion_mnist_cnn.yaml (LeNet-5) through the installed nnjit train, its data
    replaced by a tiny synthetic copy in the real layout (--data fashion_mnist:PATH)."""
    from nnjit.experiment.run_folder import Run

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "fm.npz", x_train=rng.integers(0, 256, (60, 784), dtype=np.uint8),
             y_train=np.repeat(np.arange(10, dtype=np.uint8), 6),
             x_test=rng.integers(0, 256, (9, 784), dtype=np.uint8),
             y_test=np.arange(9, dtype=np.uint8))
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    command = installed_nnjit()
    out = subprocess.run([command, "train", "examples/fashion_mnist_cnn.yaml", "--data",
                          "fashion_mnist:fm.npz", "--epochs", "2", "--quiet"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = Run.all(tmp_path / "runs")
    assert len(run.history()) == 2 and run.metadata()["data"] == "fashion_mnist:fm.npz"
    assert run.config.model.net.conv_channels == (6, 16)


def test_digits_cnn_yaml_is_the_config_in_docs_layers():
    """docs/layers.md shows examples/digits_cnn.yaml: the two stay one config."""
    from nnjit.experiment import RunConfig

    page = (ROOT / "docs" / "layers.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", page, flags=re.M | re.S)
    assert len(blocks) == 1
    example = (ROOT / "examples" / "digits_cnn.yaml").read_text(encoding="utf-8")
    assert RunConfig.from_yaml(blocks[0]) == RunConfig.from_yaml(example)


# --- a recurrent net: the sequence config ---------------------------------------------------------


def test_digits_lstm_config(tmp_path):
    """examples/digits_lstm.yaml trains an LSTM through the installed nnjit train: each 64-value
    Digits row is read as 8 steps of 8 pixels; the best checkpoint predicts as it validated."""
    run = nnjit_train("digits_lstm.yaml", tmp_path)
    history = run.history()
    net = run.config.model.net
    assert net.kind.value == "lstm" and net.in_shape == (8, 8) and net.hidden_size == 32
    assert history["val_accuracy"].max() >= 0.9, history.tail()
    data = run.load_data()
    outputs = run.checkpoint_outputs(data.X_val, Checkpoints.BEST)
    best = history.loc[history["val_loss"].idxmin()]
    assert np.mean(outputs.argmax(1) == data.y_val) == pytest.approx(best["val_accuracy"])


def test_sine_gru_config(tmp_path):
    """examples/sine_gru.yaml: a GRU forecaster on the generated sine_series through the
    installed nnjit train, split in time; it beats repeating the last step by far."""
    run = nnjit_train("sine_gru.yaml", tmp_path)
    history = run.history()
    net = run.config.model.net
    assert net.kind.value == "gru" and net.in_shape == (48, 3) and net.num_layers == 2
    data = run.load_data()  # generated again, the same windows
    assert data.X_train.shape == (2508, 144) and data.X_val.shape == (443, 144)
    # the last training window ends one step before the first validation window's end
    np.testing.assert_array_equal(data.X_train[-1, 3:], data.X_val[0, :-3])
    naive = float(((data.X_val.reshape(-1, 48, 3)[:, -1] - data.y_val) ** 2).mean())
    assert history["val_loss"].min() < 0.5 * naive, (history.tail(), naive)
