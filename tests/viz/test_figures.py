"""nnjit.viz: figures are checked through fig.data (trace types and data), not pixels."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import nnjit.viz as viz
from nnjit.viz.metrics import confusion_counts


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_import_nnjit_loads_neither_plotly_nor_sklearn():
    code = ("import sys, nnjit; bad = [m for m in ('plotly', 'sklearn') if m in sys.modules]; "
            "assert not bad, bad; import nnjit.viz; "
            "assert 'plotly' in sys.modules and 'sklearn' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------- confusion matrix
def _manual_counts(y_true, y_pred, labels):
    m = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for t, p in zip(y_true, y_pred):
        m[labels.index(t), labels.index(p)] += 1
    return m


def test_confusion_matrix_heatmap_counts_and_annotations():
    y_true = _rng().integers(0, 3, 60)
    y_pred = _rng(1).integers(0, 3, 60)
    fig = viz.confusion_matrix(y_true, y_pred)
    assert isinstance(fig, go.Figure) and len(fig.data) == 1
    heat = fig.data[0]
    assert isinstance(heat, go.Heatmap)
    expected = _manual_counts(y_true.tolist(), y_pred.tolist(), [0, 1, 2])
    np.testing.assert_array_equal(np.asarray(heat.z), expected)
    np.testing.assert_array_equal(np.asarray(heat.customdata), expected)
    assert np.asarray(heat.text).tolist() == expected.astype(str).tolist()
    assert heat.texttemplate == "%{text}"
    assert list(heat.x) == ["0", "1", "2"] and list(heat.y) == ["0", "1", "2"]
    assert fig.layout.xaxis.type == "category" and fig.layout.yaxis.autorange == "reversed"


@pytest.mark.parametrize("normalize, axis", [("true", 1), ("pred", 0)])
def test_confusion_matrix_normalized_keeps_counts_in_text(normalize, axis):
    y_true = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    y_pred = np.array([0, 1, 1, 1, 1, 2, 0, 2, 2])
    heat = viz.confusion_matrix(y_true, y_pred, normalize=normalize).data[0]
    z = np.asarray(heat.z)
    np.testing.assert_allclose(z.sum(axis=axis), 1.0)
    counts = _manual_counts(y_true.tolist(), y_pred.tolist(), [0, 1, 2])
    assert np.asarray(heat.text)[0, 1] == f"{z[0, 1]:.2f}<br>({counts[0, 1]})"


def test_confusion_matrix_normalize_empty_row_is_zero_and_bad_value_raises():
    heat = viz.confusion_matrix([0, 0, 1], [0, 2, 1], normalize="true").data[0]
    np.testing.assert_array_equal(np.asarray(heat.z)[2], [0, 0, 0])
    with pytest.raises(ValueError, match="normalize"):
        viz.confusion_matrix([0, 1], [0, 1], normalize="rows")


def test_confusion_counts_match_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = _rng(3)
    for labels in ([0, 1, 2, 3], ["a", "b", "c"]):
        y_true = rng.choice(labels, 80)
        y_pred = rng.choice(labels, 80)
        ours, order = confusion_counts(y_true, y_pred)
        np.testing.assert_array_equal(ours, metrics.confusion_matrix(y_true, y_pred))
        assert order.tolist() == sorted(labels)


def test_confusion_matrix_target_names_labels_and_scores():
    names = ["cat", "dog", "eel"]
    y_true = np.array([0, 1, 1, 0])
    scores = np.array([[3.0, 0.1, 0.0], [0.0, 1.0, 0.2], [0.0, 0.1, 2.0], [1.0, 0.0, 0.0]])
    heat = viz.confusion_matrix(y_true, scores, target_names=names).data[0]
    assert list(heat.x) == names
    np.testing.assert_array_equal(np.asarray(heat.z), [[2, 0, 0], [0, 1, 1], [0, 0, 0]])
    heat = viz.confusion_matrix(["b", "a"], ["a", "a"], labels=["b", "a"]).data[0]
    np.testing.assert_array_equal(np.asarray(heat.z), [[0, 1], [0, 1]])


def test_confusion_matrix_errors():
    with pytest.raises(ValueError, match="different lengths: 3 != 2"):
        viz.confusion_matrix([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="y_true is empty"):
        viz.confusion_matrix([], [])
    with pytest.raises(ValueError, match=r"y_pred has labels out of range.*\[5\]"):
        viz.confusion_matrix([0, 1], [0, 5], labels=[0, 1])
    with pytest.raises(ValueError, match=r"out of range: class indices must be in 0\.\.1"):
        viz.confusion_matrix([0, 2], [0, 1], target_names=["a", "b"])
    with pytest.raises(ValueError, match="NaN"):
        viz.confusion_matrix([0.0, np.nan], [0, 1])
    with pytest.raises(ValueError, match="target_names has 1 names for 2 classes"):
        viz.confusion_matrix(["x", "y"], ["x", "y"], target_names=["only"])


# ----------------------------------------------------------------- classification report
def _assert_report_equals_sklearn(y_true, y_pred, **kwargs):
    metrics = pytest.importorskip("sklearn.metrics")
    ours = viz.classification_report(y_true, y_pred, **kwargs)
    theirs = metrics.classification_report(y_true, y_pred, output_dict=True, zero_division=0,
                                           **kwargs)
    assert list(ours.index) == list(theirs)
    assert list(ours.columns) == ["precision", "recall", "f1-score", "support"]
    for key, value in theirs.items():
        if key == "accuracy":
            assert ours.loc["accuracy", "f1-score"] == pytest.approx(value, rel=1e-12)
            assert ours.loc["accuracy", "support"] == len(y_true)
            continue
        for column, expected in value.items():
            assert ours.loc[key, column] == pytest.approx(expected, rel=1e-12, abs=1e-15), (
                key, column)


@pytest.mark.parametrize("seed", range(4))
def test_classification_report_equals_sklearn(seed):
    rng = _rng(seed)
    y_true = rng.integers(0, 5, 120)
    y_pred = np.where(rng.random(120) < 0.6, y_true, rng.integers(0, 5, 120))
    y_pred[y_pred == 4] = 3                                   # class 4 never predicted
    _assert_report_equals_sklearn(y_true, y_pred)


def test_classification_report_string_labels_and_target_names():
    rng = _rng(7)
    y_true = rng.choice(["ant", "bee", "cow"], 50)
    y_pred = rng.choice(["ant", "bee", "cow"], 50)
    _assert_report_equals_sklearn(y_true, y_pred)
    yi, pi = rng.integers(0, 3, 50), rng.integers(0, 3, 50)
    _assert_report_equals_sklearn(yi, pi, target_names=["zero", "one", "two"])


def test_classification_report_layout_without_sklearn():
    report = viz.classification_report([0, 0, 1, 1], [0, 1, 1, 1], target_names=["a", "b"])
    assert list(report.index) == ["a", "b", "accuracy", "macro avg", "weighted avg"]
    assert report.loc["a", "precision"] == 1.0 and report.loc["a", "recall"] == 0.5
    assert report.loc["b", "precision"] == pytest.approx(2 / 3)
    assert report.loc["accuracy", "f1-score"] == 0.75
    assert np.isnan(report.loc["accuracy", "precision"])
    assert report["support"].dtype == np.int64 and report.loc["a", "support"] == 2


# ------------------------------------------------------------------------------- history
def _history(seed, epochs=6, val=True):
    rng = _rng(seed)
    loss = np.sort(rng.random(epochs))[::-1]
    return pd.DataFrame({
        "epoch": np.arange(1, epochs + 1), "train_loss": loss,
        "train_accuracy": rng.random(epochs),
        "val_loss": loss + 0.1 if val else np.full(epochs, np.nan),
        "val_accuracy": rng.random(epochs), "lr": np.full(epochs, 0.01),
        "seconds": rng.random(epochs)})


def test_history_plot_overlays_runs_times_columns():
    runs = [_history(s, epochs=4 + s) for s in range(3)]
    fig = viz.history_plot(runs, names=["a", "b", "c"])
    assert len(fig.data) == 3 * 2 and all(isinstance(t, go.Scatter) for t in fig.data)
    for i, (run, name) in enumerate(zip(runs, "abc")):
        for j, column in enumerate(("train_loss", "val_loss")):
            trace = fig.data[2 * i + j]
            assert trace.name == f"{name}: {column}" and trace.mode == "lines"
            np.testing.assert_array_equal(trace.x, run["epoch"])
            np.testing.assert_allclose(trace.y, run[column])
    assert fig.data[0].line.color == fig.data[1].line.color != fig.data[2].line.color
    assert fig.data[0].line.dash != fig.data[1].line.dash


def test_history_plot_single_run_mapping_csv_and_trainer_like(tmp_path):
    h = _history(0, val=False)
    fig = viz.history_plot(h, columns="train_loss")
    assert [t.name for t in fig.data] == ["train_loss"]
    fig = viz.history_plot({"x": h, "y": _history(1)}, columns=("lr", "train_accuracy", "val_loss"))
    assert [t.name for t in fig.data][:3] == ["x: lr", "x: train_accuracy", "x: val_loss"]
    assert len(fig.data) == 6 and np.isnan(np.asarray(fig.data[2].y, dtype=float)).all()
    path = tmp_path / "idps.csv"
    h.to_csv(path, index=False)
    np.testing.assert_allclose(viz.history_plot(path).data[0].y, h["train_loss"])

    class Fitted:
        history_ = h

    assert len(viz.history_plot([Fitted(), h]).data) == 4
    no_epoch = h.drop(columns="epoch")
    np.testing.assert_array_equal(viz.history_plot(no_epoch).data[0].x, np.arange(len(h)))


def test_history_plot_constant_series_gets_a_range_around_its_value():
    h = _history(0)  # lr is 0.01 throughout: plotly alone would draw it on -1..1
    fig = viz.history_plot(h, columns="lr")
    np.testing.assert_allclose(fig.layout.yaxis.range, [0.009, 0.011])
    fig = viz.history_plot(h, columns="lr", log_y=True)
    assert fig.layout.yaxis.type == "log"
    np.testing.assert_allclose(fig.layout.yaxis.range, np.log10([0.009, 0.011]))
    # two runs at the same constant value are still flat; a NaN (no value that epoch) is ignored
    other = h.assign(lr=[0.01, np.nan, 0.01, 0.01, 0.01, 0.01])
    np.testing.assert_allclose(viz.history_plot([h, other], columns="lr").layout.yaxis.range,
                               [0.009, 0.011])
    np.testing.assert_allclose(
        viz.history_plot(h.assign(lr=-2.0), columns="lr").layout.yaxis.range, [-2.2, -1.8])
    assert list(viz.history_plot(h.assign(lr=0.0), columns="lr").layout.yaxis.range) == [-1, 1]
    # anything that varies keeps plotly's autorange
    assert viz.history_plot(h, columns=("lr", "train_loss")).layout.yaxis.range is None
    assert viz.history_plot([h, h.assign(lr=0.02)], columns="lr").layout.yaxis.range is None
    decayed = h.assign(lr=0.01 * 0.5 ** np.arange(len(h)))
    assert viz.history_plot(decayed, columns="lr", log_y=True).layout.yaxis.range is None
    # nothing to draw (no validation data), or a constant 0 on a log axis: autorange
    assert viz.history_plot(h.assign(val_loss=np.nan), columns="val_loss").layout.yaxis.range \
        is None
    assert viz.history_plot(h.assign(lr=0.0), columns="lr",
                            log_y=True).layout.yaxis.range is None


def test_history_plot_errors():
    h = _history(0)
    with pytest.raises(ValueError, match=r"no column\(s\) \['val_f1'\].*train_loss"):
        viz.history_plot(h, columns=("train_loss", "val_f1"))
    with pytest.raises(ValueError, match="2 names for 3 histories"):
        viz.history_plot([h, h, h], names=["a", "b"])
    with pytest.raises(ValueError, match="no histories"):
        viz.history_plot([])
    with pytest.raises(TypeError, match="history DataFrame"):
        viz.history_plot([h, 3])
    with pytest.raises(ValueError, match="empty"):
        viz.history_plot(h.iloc[:0])


# ------------------------------------------------------------------------------- scatter
def test_scatter_categorical_one_trace_per_class():
    rng = _rng(2)
    x, y = rng.normal(size=30), rng.normal(size=30)
    labels = rng.integers(0, 3, 30)
    fig = viz.scatter(x, y, labels, class_names=["a", "b", "c"])
    assert [t.name for t in fig.data] == ["a", "b", "c"]
    for k, trace in enumerate(fig.data):
        assert isinstance(trace, go.Scatter) and trace.mode == "markers"
        np.testing.assert_array_equal(trace.x, x[labels == k])
        np.testing.assert_array_equal(trace.y, y[labels == k])
    fig = viz.scatter(x, y, np.where(labels == 0, "red", "blue"))
    assert [t.name for t in fig.data] == ["blue", "red"]
    assert sum(len(t.x) for t in fig.data) == 30


def test_scatter_plain_and_continuous():
    x, y = np.arange(5), np.arange(5) ** 2
    fig = viz.scatter(x, y)
    assert len(fig.data) == 1 and list(fig.data[0].y) == [0, 1, 4, 9, 16]
    c = np.linspace(0, 1, 5)
    fig = viz.scatter(x, y, c, x_title="a", y_title="b")
    assert len(fig.data) == 1 and fig.data[0].marker.showscale
    np.testing.assert_allclose(fig.data[0].marker.color, c)
    assert fig.layout.xaxis.title.text == "a"


def test_scatter_errors():
    with pytest.raises(ValueError, match="different lengths: 3 != 2"):
        viz.scatter([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="x is empty"):
        viz.scatter([], [])
    with pytest.raises(ValueError, match="one value per point"):
        viz.scatter([1, 2], [1, 2], color=[0])
    with pytest.raises(ValueError, match="NaN"):
        viz.scatter([1, np.nan], [1, 2])
    with pytest.raises(ValueError, match="labels out of range"):
        viz.scatter([1, 2], [1, 2], color=[0, 3], class_names=["a", "b"])


# --------------------------------------------------------------------------------- t-SNE
def test_tsne_two_d_coordinates_per_class():
    pytest.importorskip("sklearn.manifold")
    rng = _rng(4)
    labels = np.repeat([0, 1, 2], 12)
    logits = rng.normal(size=(36, 5)) + 4.0 * np.eye(5)[labels]
    fig = viz.tsne(logits, labels, perplexity=8, seed=0, class_names=["a", "b", "c"])
    assert [t.name for t in fig.data] == ["a", "b", "c"]
    assert all(isinstance(t, go.Scatter) for t in fig.data)
    assert sum(len(t.x) for t in fig.data) == 36
    coords = viz.tsne_coordinates(logits, perplexity=8, seed=0)
    assert coords.shape == (36, 2) and np.isfinite(coords).all()
    np.testing.assert_allclose(fig.data[0].x, coords[labels == 0, 0])
    np.testing.assert_allclose(fig.data[1].y, coords[labels == 1, 1])
    # sklearn's own threads (OpenMP), at its shortest run: on a busy machine its spinning
    # threads cost ~8 s of CPU over the default 1,000 iterations
    free = viz.tsne_coordinates(logits, perplexity=8, seed=0, threads=None, max_iter=250)
    assert free.shape == (36, 2) and np.isfinite(free).all()
    short = viz.tsne_coordinates(logits, perplexity=8, seed=0, max_iter=250)
    assert short.shape == (36, 2) and not np.allclose(short, coords)


def test_tsne_errors_and_missing_sklearn(monkeypatch):
    X = np.zeros((10, 3))
    with pytest.raises(ValueError, match="perplexity must be > 0 and below the number of samples"):
        viz.tsne(X, None, perplexity=30)
    with pytest.raises(ValueError, match="one value per row"):
        viz.tsne(X, np.zeros(9), perplexity=3)
    with pytest.raises(ValueError, match="2-D"):
        viz.tsne(np.zeros(10), None)
    with pytest.raises(ValueError, match="max_iter must be an int >= 250"):
        viz.tsne(X, None, perplexity=3, max_iter=100)
    monkeypatch.setitem(sys.modules, "sklearn.manifold", None)
    with pytest.raises(ImportError, match=r"pip install 'nnjit\[viz\]'"):
        viz.tsne(X, None, perplexity=3)
