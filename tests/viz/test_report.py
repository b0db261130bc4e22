"""``nnjit report``'s HTML page: its figures' data are checked by parsing the page."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import nnjit

from nnjit.experiment import (
    Checkpoints,
    ModelConfig,
    NetConfig,
    OptimizerConfig,
    RunConfig,
    TrainConfig,
)
from nnjit.experiment.data import load_run_data
from nnjit.experiment.report import REPORT_TSNE_ROWS, write_report
from nnjit.experiment.run_folder import Run
from nnjit.experiment.train_run import train_run
from nnjit.viz.metrics import confusion_counts
from tests.helpers import plotly_figures


def _numpy_logits(run, X, phase):
    """The checkpoint's MLP forward pass in NumPy (independent of the compiled loop)."""
    model = run.load_weights(run.build_model(), phase)
    params = dict(model.named_parameters())
    h = np.asarray(X, dtype=np.float64)
    layers = sorted({n.rsplit(".", 1)[0] for n in params}, key=lambda n: int(n.split(".")[-1]))
    for i, layer in enumerate(layers):
        h = h @ params[f"{layer}.weight"].data.T.astype(np.float64) + params[f"{layer}.bias"].data
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def _run(tmp_path, data="iris", in_dim=4, out_dim=3, epochs=6):
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=in_dim, out_dim=out_dim,
                                                    hidden_dims=(16,))),
                    optimizer=OptimizerConfig(lr=0.01), data=data,
                    train=TrainConfig(epochs=epochs, batch_size=16, seed=2, patience=None))
    d = load_run_data(data, False, cfg.train.seed)
    run, trainer, _ = train_run(cfg, d.X_train, d.y_train, d.X_val, d.y_val, tmp_path)
    return run, d


def test_report_has_confusion_matrix_and_tsne_of_the_best_checkpoint(tmp_path):
    run, d = _run(tmp_path)
    page = write_report(run).read_text(encoding="utf-8")
    figures = plotly_figures(page)
    assert page.count("plotly.js v") == 1 and 'src="http' not in page  # inlined once
    assert len(figures) == 5  # loss, accuracy, lr, confusion matrix, t-SNE
    lr = [f for f in figures if f["layout"]["title"]["text"] == "learning rate"]
    np.testing.assert_allclose(lr[0]["layout"]["yaxis"]["range"], [0.009, 0.011])  # lr 0.01
    heat = [f for f in figures if f["data"][0]["type"] == "heatmap"]
    assert len(heat) == 1
    trace = heat[0]["data"][0]
    logits = _numpy_logits(run, d.X_val, Checkpoints.BEST)
    expected, _ = confusion_counts(d.y_val, np.argmax(logits, axis=1), labels=[0, 1, 2])
    np.testing.assert_array_equal(np.asarray(trace["z"], dtype=np.int64), expected)
    assert list(trace["x"]) == ["setosa", "versicolor", "virginica"]
    assert np.asarray(trace["z"]).sum() == len(d.X_val)
    tsne = [f for f in figures if "t-SNE" in f["layout"]["title"]["text"]]
    assert len(tsne) == 1
    points = sum(len(t["x"]) for t in tsne[0]["data"])
    assert points == min(len(d.X_val), REPORT_TSNE_ROWS)
    coords = np.concatenate([np.asarray(t["x"], dtype=float) for t in tsne[0]["data"]])
    assert np.isfinite(coords).all() and coords.std() > 0
    epoch = run.checkpoint_epoch(Checkpoints.BEST)
    assert f"best checkpoint (epoch {epoch}), validation data, {len(d.X_val)} rows" in page
    assert "Classification report" in page and "macro avg" in page


def test_report_logits_match_the_checkpoint(tmp_path):
    run, d = _run(tmp_path)
    ours = run.checkpoint_outputs(d.X_val, Checkpoints.BEST)
    np.testing.assert_allclose(ours, _numpy_logits(run, d.X_val, Checkpoints.BEST),
                               rtol=1e-4, atol=1e-5)


def test_report_without_loadable_data_says_why(tmp_path):
    run, d = _run(tmp_path)
    # the same run folder, but run.yaml without data: figures need data=(X, y)
    cfg = run.config.replace(data=None)
    bare = Run.create(cfg, tmp_path, name="bare")
    for p in (run.path / "checkpoints").iterdir():
        (bare.path / "checkpoints" / p.name).write_bytes(p.read_bytes())
    page = write_report(bare).read_text(encoding="utf-8")
    assert "no &#x27;data&#x27; in run.yaml" in page or "no 'data' in run.yaml" in page
    assert not [f for f in plotly_figures(page) if f["data"][0]["type"] == "heatmap"]
    page = write_report(bare, data=(d.X_val, d.y_val)).read_text(encoding="utf-8")
    assert [f for f in plotly_figures(page) if f["data"][0]["type"] == "heatmap"]


def test_report_of_a_regression_run_has_no_confusion_matrix(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3)).astype(np.float32)
    y = (X @ np.array([1.0, -2.0, 0.5], dtype=np.float32))[:, None]
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=3, out_dim=1), loss="mse"),
                    train=TrainConfig(epochs=3, batch_size=16, patience=None))
    run, _, _ = train_run(cfg, X[:60], y[:60], X[60:], y[60:], tmp_path)
    page = write_report(run).read_text(encoding="utf-8")
    assert "regression run" in page
    assert len(plotly_figures(page)) == 2  # loss and lr


def test_report_with_too_few_rows_skips_tsne(tmp_path):
    run, d = _run(tmp_path)
    page = write_report(run, data=(d.X_val[:3], d.y_val[:3])).read_text(encoding="utf-8")
    kinds = [f["data"][0]["type"] for f in plotly_figures(page)]
    assert kinds.count("heatmap") == 1 and len(kinds) == 4


def test_report_without_scikit_learn_skips_the_tsne_with_a_note(tmp_path):
    """The installed ``nnjit report`` in a process where scikit-learn cannot be imported (a
    ``sitecustomize`` on PYTHONPATH blocks it, as on a default install without the viz extra)."""
    run, d = _run(tmp_path / "runs")
    shim = tmp_path / "no_sklearn"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['sklearn'] = None\n")
    checkout = str(Path(nnjit.__file__).resolve().parents[1])  # the code under test
    paths = [str(shim), checkout, *filter(None, [os.environ.get("PYTHONPATH")])]
    command = Path(sys.executable).parent / "nnjit"
    assert command.exists(), f"the installed nnjit command is missing: {command}"
    proc = subprocess.run([str(command), "report", run.id, "--root", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    skipped = [line for line in proc.stderr.splitlines() if "t-SNE" in line]
    assert len(skipped) == 1 and "pip install 'nnjit[viz]'" in skipped[0], proc.stderr
    page = (run.path / "report.html").read_text(encoding="utf-8")
    figures = plotly_figures(page)
    assert len(figures) == 4  # loss, accuracy, lr, confusion matrix: everything but the t-SNE
    assert not [f for f in figures if "t-SNE" in f["layout"]["title"]["text"]]
    assert [f for f in figures if f["data"][0]["type"] == "heatmap"]
    assert "No t-SNE of the logits" in page and "nnjit[viz]" in page
    assert "Classification report" in page and "History table" in page
