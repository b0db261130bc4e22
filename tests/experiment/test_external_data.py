"""The toolkit's checks on data sets that are not in this repository.

The data come from the directory named by ``NNJIT_EXTERNAL_DATA`` (default: ``../shared/data``
next to the repository root; see its README.md): a Fashion-MNIST subset as arrays, and a CSV
written from it and read back through ``TabularDataset.from_dataframe``. Each runs config ->
``train_run`` -> resume bit for bit -> report. Without the directory the tests are skipped, with
the path in the message.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nnjit.experiment import (
    Checkpoints,
    ModelConfig,
    NetConfig,
    OptimizerConfig,
    RunConfig,
    SchedulerConfig,
    Schedulers,
    TrainConfig,
)
from nnjit.experiment.data import load_run_data
from nnjit.experiment.report import REPORT_TSNE_ROWS, write_report
from nnjit.experiment.run_folder import Run
from nnjit.experiment.run_history import IDPS_COLUMNS
from nnjit.experiment.train_run import train_run
from tests.helpers import plotly_figures

REPO = Path(__file__).resolve().parents[2]
EXTERNAL = Path(os.environ.get("NNJIT_EXTERNAL_DATA", REPO.parent / "shared" / "data"))
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot")
COLS = [c for c in IDPS_COLUMNS if c != "seconds"]


@pytest.fixture(scope="module")
def fashion():
    path = EXTERNAL / "fashion_mnist.npz"
    if not path.is_file():
        pytest.skip(f"external data not found: {path} (set NNJIT_EXTERNAL_DATA to the folder "
                    "holding fashion_mnist.npz)")
    with np.load(path) as f:
        # 2,000 training rows and 500 test rows, every class present (the files are shuffled)
        x_train, y_train = f["x_train"][:2000], f["y_train"][:2000]
        x_test, y_test = f["x_test"][:500], f["y_test"][:500]
    assert x_train.dtype == np.uint8 and x_train.shape == (2000, 784)
    assert set(np.unique(y_train)) == set(range(10))
    return x_train, y_train.astype(np.int64), x_test, y_test.astype(np.int64)


def _config(in_dim, data=None, epochs=6):
    return RunConfig(
        model=ModelConfig(net=NetConfig(in_dim=in_dim, out_dim=10, hidden_dims=(64,),
                                        dropout=0.1)),
        optimizer=OptimizerConfig(lr=2e-3, grad_clip_norm=5.0),
        scheduler=SchedulerConfig(kind=Schedulers.COSINE, eta_min=1e-4),
        train=TrainConfig(epochs=epochs, batch_size=64, seed=7, patience=2, min_delta=0.0,
                          restore_best=True),
        data=data)


def _check_resume(root, cfg, X, y, Xv, yv, split=3):
    """config -> train_run -> split + resume from LAST == straight, bit for bit."""
    assert RunConfig.from_yaml(cfg.to_yaml()) == cfg
    run_a, straight, hist_a = train_run(cfg, X, y, Xv, yv, root / "a")
    train_run(cfg, X, y, Xv, yv, root / "b", epochs=split)
    run_b, resumed, hist_b = train_run(cfg, X, y, Xv, yv, root / "b", resume=Checkpoints.LAST)
    assert run_a.id == run_b.id == cfg.config_hash()
    pd.testing.assert_frame_equal(hist_a[COLS], hist_b[COLS], check_exact=True)
    for (na, a), (nb, b) in zip(straight.model.named_parameters(),
                                resumed.model.named_parameters()):
        assert na == nb
        np.testing.assert_array_equal(a.data, b.data)
    assert hist_a["lr"].iloc[-1] < hist_a["lr"].iloc[0]  # the cosine schedule ran
    return run_b, resumed, hist_b


def _check_report(run, n_rows, class_names=None, data=None):
    page = write_report(run, data=data, class_names=class_names if data is not None else None
                        ).read_text(encoding="utf-8")
    figures = plotly_figures(page)
    heat = [f["data"][0] for f in figures if f["data"][0]["type"] == "heatmap"]
    assert len(heat) == 1 and np.asarray(heat[0]["z"]).sum() == n_rows
    if class_names is not None:
        assert list(heat[0]["x"]) == list(class_names)
    tsne = [f for f in figures if "t-SNE" in f["layout"]["title"]["text"]]
    assert len(tsne) == 1 and sum(len(t["x"]) for t in tsne[0]["data"]) == min(n_rows, REPORT_TSNE_ROWS)
    return page


def test_fashion_mnist_subset(fashion, tmp_path):
    x_train, y_train, x_test, y_test = fashion
    X = (x_train / np.float32(255)).astype(np.float32)
    Xt = (x_test / np.float32(255)).astype(np.float32)
    cfg = _config(784)
    run, trainer, hist = _check_resume(tmp_path, cfg, X[:1600], y_train[:1600], X[1600:],
                                       y_train[1600:])
    assert hist["val_accuracy"].max() > 0.7  # it learns (10 classes, chance is 0.1)
    accuracy = float(np.mean(trainer.predict(Xt) == y_test))
    assert accuracy > 0.65
    _check_report(run, len(Xt), CLASSES, data=(Xt, y_test))


def test_fashion_mnist_csv_through_tabular_dataset(fashion, tmp_path):
    x_train, y_train, _, _ = fashion
    # a CSV a user might have: 14x14 pooled pixels, a categorical column, string class labels
    pooled = x_train.reshape(-1, 14, 2, 14, 2).mean(axis=(2, 4)).reshape(-1, 196)
    df = pd.DataFrame(pooled.round(1), columns=[f"p{i}" for i in range(196)])
    ink = pooled.mean(axis=1)
    df["ink"] = np.where(ink < np.quantile(ink, 1 / 3), "light",
                         np.where(ink < np.quantile(ink, 2 / 3), "medium", "heavy"))
    df["label"] = np.asarray(CLASSES, dtype=object)[y_train]
    csv = tmp_path / "fashion.csv"
    df.to_csv(csv, index=False)

    data = load_run_data(str(csv), regression=False, seed=7)  # TabularDataset.from_dataframe
    assert data.X_train.shape[1] == 196 + 3  # one-hot "ink"
    assert set(data.class_names) == set(CLASSES)
    assert len(data.X_val) == round(0.15 * len(df))
    cfg = _config(199, data=str(csv))
    run, _, hist = _check_resume(tmp_path, cfg, data.X_train, data.y_train, data.X_val,
                                 data.y_val)
    assert hist["val_accuracy"].max() > 0.6
    # the report loads the CSV from run.yaml and evaluates the best checkpoint on its val part
    page = _check_report(Run.load(run.id, tmp_path / "b"), len(data.X_val),
                         sorted(CLASSES))
    assert "validation data" in page
