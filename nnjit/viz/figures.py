"""Plotly figures: confusion matrix, training history, scatter and t-SNE.

Every function builds and returns a ``plotly.graph_objects.Figure`` and nothing else: no
``show()``, no file written, no global state. Display it with ``fig.show()`` or save it with
``fig.write_html(...)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from nnjit.checks import Int, is_real
from nnjit.viz.metrics import confusion_counts, normalize_counts

PALETTE = qualitative.Plotly
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
HISTORY_COLUMNS = ("train_loss", "val_loss")


# --------------------------------------------------------------------------- confusion matrix
def confusion_matrix(y_true, y_pred, labels=None, normalize=None, *, target_names=None,
                     title: str | None = None, colorscale: str = "Blues") -> go.Figure:
    """Heatmap of the confusion matrix, every cell annotated with its count.

    Rows are true classes (first class at the top), columns predicted classes. Classes come
    from ``labels`` / ``target_names`` / the data, as described in ``nnjit.viz.metrics``
    (a label outside ``labels`` or outside ``0..len(target_names)-1`` is an error). ``y_pred``
    may be ``(n, C)`` scores (argmax is taken).

    Args:
        normalize: ``None`` (colour = counts), ``'true'`` (rows sum to 1: recall on the
            diagonal), ``'pred'`` (columns sum to 1: precision) or ``'all'``. With a
            normalisation the cells read ``"rate<br>(count)"``.
        target_names: display names of the classes, in class order.

    The figure holds one ``go.Heatmap`` whose ``z`` is the (normalised) matrix, ``customdata``
    the counts, ``x``/``y`` the class names.
    """
    counts, labels = confusion_counts(y_true, y_pred, labels, target_names)
    z = normalize_counts(counts, normalize)
    names = [str(n) for n in (target_names if target_names is not None else labels.tolist())]
    if normalize is None:
        text = counts.astype(str)
    else:
        text = np.array([[f"{r:.2f}<br>({c})" for r, c in zip(zr, cr)]
                         for zr, cr in zip(z, counts)])
    heat = go.Heatmap(
        z=z, x=names, y=names, text=text, texttemplate="%{text}", customdata=counts,
        colorscale=colorscale, zmin=0, zmax=1.0 if normalize is not None else None,
        colorbar={"title": {"text": "count" if normalize is None else "rate"}},
        hovertemplate=("true %{y}<br>predicted %{x}<br>count %{customdata}"
                       + ("" if normalize is None else "<br>rate %{z:.3f}") + "<extra></extra>"),
    )
    fig = go.Figure(heat)
    accuracy = np.trace(counts) / counts.sum()
    fig.update_layout(
        title={"text": title if title is not None else
               f"Confusion matrix (n={int(counts.sum())}, accuracy {accuracy:.3f})"},
        xaxis={"title": {"text": "predicted"}, "type": "category", "side": "bottom"},
        yaxis={"title": {"text": "true"}, "type": "category", "autorange": "reversed"},
    )
    return fig


# ------------------------------------------------------------------------------- history
def _as_history(obj, where: str) -> pd.DataFrame:
    if isinstance(obj, pd.DataFrame):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        return pd.read_csv(obj)
    for attr in ("history_", "history"):
        value = getattr(obj, attr, None)
        if isinstance(value, pd.DataFrame):
            return value
    raise TypeError(f"{where}: expected a history DataFrame (Trainer.fit's result), a CSV path "
                    f"or an object with a history_ DataFrame, got {type(obj).__name__}")


def _collect_histories(histories, names) -> list[tuple[str, pd.DataFrame]]:
    if isinstance(histories, Mapping):
        if names is not None:
            raise ValueError("history_plot: names= is not used with a mapping (its keys are the "
                             "names)")
        items = [(str(k), _as_history(v, f"history_plot[{k!r}]")) for k, v in histories.items()]
    else:
        single = isinstance(histories, (pd.DataFrame, str, os.PathLike)) or not isinstance(
            histories, Sequence)
        runs = [histories] if single else list(histories)
        if names is None:
            names = ["run"] if single else [f"run {i}" for i in range(len(runs))]
        elif isinstance(names, str):
            names = [names]
        names = [str(n) for n in names]
        if len(names) != len(runs):
            raise ValueError(f"history_plot: {len(names)} names for {len(runs)} histories")
        items = [(n, _as_history(h, f"history_plot: history {i}"))
                 for i, (n, h) in enumerate(zip(names, runs))]
    if not items:
        raise ValueError("history_plot: no histories given")
    if len({n for n, _ in items}) != len(items):
        raise ValueError(f"history_plot: run names repeat: {[n for n, _ in items]}")
    return items


def history_plot(histories, columns=HISTORY_COLUMNS, names=None, *, x: str = "epoch",
                 log_y: bool = False, title: str | None = None) -> go.Figure:
    """Line plot of one or several runs' histories overlaid, one trace per run and column.

    Args:
        histories: a history DataFrame (``Trainer.fit``'s result: ``epoch, train_loss,
            train_accuracy, val_loss, val_accuracy, lr, seconds``), a list of them, a mapping
            ``{name: DataFrame}``, a path to a CSV of one, or an object with a ``history_``
            DataFrame (a fitted ``Trainer``).
        columns: the column(s) to draw; a column missing from a history is an error listing
            the available ones. Columns that are all NaN (no validation data) still get a trace.
        names: run names for a list (default ``run 0``, ``run 1``, ...).
        x: the x column (falls back to the row number when a history has none).

    Traces are ordered run by run, then column by column (``len(runs) * len(columns)``
    ``go.Scatter`` traces); a run keeps one colour, a column one dash style. Trace names are
    the column names for a single run, ``"<run>: <column>"`` otherwise.
    """
    if isinstance(columns, str):
        columns = (columns,)
    columns = tuple(columns)
    if not columns:
        raise ValueError("history_plot: columns is empty")
    items = _collect_histories(histories, names)
    fig = go.Figure()
    for r, (run, frame) in enumerate(items):
        if len(frame) == 0:
            raise ValueError(f"history_plot: history {run!r} is empty")
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"history_plot: history {run!r} has no column(s) {missing}; it has "
                             f"{[str(c) for c in frame.columns]}")
        xs = frame[x].to_numpy() if x in frame.columns else np.arange(len(frame))
        for c, column in enumerate(columns):
            fig.add_trace(go.Scatter(
                x=xs, y=frame[column].to_numpy(dtype=np.float64), mode="lines",
                name=column if len(items) == 1 else f"{run}: {column}",
                legendgroup=run,
                line={"color": PALETTE[r % len(PALETTE)], "dash": DASHES[c % len(DASHES)]},
            ))
    yaxis = {"title": {"text": columns[0] if len(columns) == 1 else "value"},
             "type": "log" if log_y else "linear"}
    flat = flat_range(np.concatenate([np.asarray(t.y, dtype=np.float64) for t in fig.data]),
                      log=log_y)
    if flat is not None:
        yaxis["range"] = flat
    fig.update_layout(
        title={"text": title if title is not None else ", ".join(columns)},
        xaxis={"title": {"text": x}},
        yaxis=yaxis,
        hovermode="x unified",
    )
    return fig


#: A flat series' axis spans its value +- this fraction of it.
FLAT_MARGIN = 0.1


def flat_range(values: np.ndarray, *, log: bool = False) -> list[float] | None:
    """A y-axis range for values that are all equal (a constant learning rate), else ``None``.

    Plotly draws a flat line on ``-1..1`` whatever its value, so 0.001 reads as 0; the range
    returned spans the value +- :data:`FLAT_MARGIN` of it (``-1..1`` for 0). On a log axis the
    range is in log10 units, as plotly expects (``None`` for a value <= 0, which a log axis
    cannot show). NaN/inf are ignored; ``None`` when no finite value remains.
    """
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    if hi - lo > 1e-9 * max(abs(lo), abs(hi)):
        return None
    value = (lo + hi) / 2
    if log:
        if value <= 0:
            return None
        return [float(np.log10(value * (1 - FLAT_MARGIN))),
                float(np.log10(value * (1 + FLAT_MARGIN)))]
    if value == 0:
        return [-1.0, 1.0]
    margin = abs(value) * FLAT_MARGIN
    return [value - margin, value + margin]


# ------------------------------------------------------------------------------- scatter
def _coordinate(values, name: str) -> np.ndarray:
    if isinstance(values, (pd.Series, pd.Index)):
        values = values.to_numpy()
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"scatter: {name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"scatter: {name} is empty")
    if arr.dtype.kind not in "iufb":
        raise ValueError(f"scatter: {name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"scatter: {name} has {int(bad.sum())} NaN/inf values "
                         f"(first at index {int(np.flatnonzero(bad)[0])})")
    return arr


def scatter(x, y, color=None, *, categorical: bool | None = None, class_names=None,
            text=None, title: str | None = None, x_title: str = "x", y_title: str = "y",
            marker_size: float = 6, opacity: float = 0.8,
            colorscale: str = "Viridis") -> go.Figure:
    """Scatter plot of ``y`` against ``x``, optionally coloured per point.

    Args:
        x, y: 1-D finite numbers of the same length.
        color: ``None`` (one trace), or one value per point. Categorical colours (the default
            for ints, strings and booleans; ``categorical=True`` forces it) give one
            ``go.Scatter`` trace per category, sorted, with a legend; continuous colours (the
            default for floats) give one trace with a colour scale and colour bar.
        class_names: display names for integer categories ``0..K-1`` (a category outside that
            range is an error).
        text: optional per-point hover text.
    """
    xs, ys = _coordinate(x, "x"), _coordinate(y, "y")
    if len(xs) != len(ys):
        raise ValueError(f"scatter: x and y have different lengths: {len(xs)} != {len(ys)}")
    n = len(xs)
    if text is not None:
        text = np.asarray(text, dtype=object).reshape(-1)
        if len(text) != n:
            raise ValueError(f"scatter: text has {len(text)} entries for {n} points")
    marker = {"size": marker_size, "opacity": opacity}
    fig = go.Figure()
    if color is None:
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", marker=marker, text=text,
                                 showlegend=False, name="points"))
    else:
        colors = color.to_numpy() if isinstance(color, (pd.Series, pd.Index)) else np.asarray(
            color)
        if colors.ndim != 1 or len(colors) != n:
            raise ValueError(f"scatter: color must have one value per point ({n}), got shape "
                             f"{colors.shape}")
        if categorical is None:
            categorical = colors.dtype.kind != "f" or class_names is not None
        if categorical:
            _categorical_traces(fig, xs, ys, colors, class_names, marker, text)
        else:
            values = _coordinate(colors, "color")
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="markers", text=text, showlegend=False, name="points",
                marker={**marker, "color": values, "colorscale": colorscale, "showscale": True}))
    fig.update_layout(title={"text": title or ""}, xaxis={"title": {"text": x_title}},
                      yaxis={"title": {"text": y_title}})
    return fig


def _categorical_traces(fig, xs, ys, colors, class_names, marker, text) -> None:
    if colors.dtype.kind == "f":
        if np.any(~np.isfinite(colors)) or np.any(colors != np.round(colors)):
            raise ValueError("scatter: categorical float colours must be whole numbers")
        colors = colors.astype(np.int64)
    try:
        cats = np.unique(colors)
    except TypeError:
        cats = pd.unique(colors)
    if class_names is not None:
        if colors.dtype.kind not in "iub":
            raise ValueError("scatter: class_names needs integer class labels")
        k = len(class_names)
        if cats.min() < 0 or cats.max() >= k:
            raise ValueError(f"scatter: labels out of range: class indices must be in 0..{k - 1} "
                             f"for {k} class_names, got {cats.min()}..{cats.max()}")
    for i, cat in enumerate(cats):
        sel = colors == cat
        name = str(class_names[int(cat)]) if class_names is not None else str(cat)
        fig.add_trace(go.Scatter(
            x=xs[sel], y=ys[sel], mode="markers", name=name,
            text=None if text is None else text[sel],
            marker={**marker, "color": PALETTE[i % len(PALETTE)]}))


# --------------------------------------------------------------------------------- t-SNE
def tsne_coordinates(features, perplexity: float = 30.0, seed: int = 0, *,
                     max_iter: int | None = None, threads: int | None = 1) -> np.ndarray:
    """2-D t-SNE embedding ``(n, 2)`` of ``features`` ``(n, d)`` (scikit-learn's ``TSNE``).

    Needs scikit-learn (``pip install 'nnjit[viz]'``), imported only when called.
    ``perplexity`` must be below the number of samples. ``max_iter``: optimisation steps
    (default: scikit-learn's, 1000; at least 250). ``threads``: OpenMP threads of the
    embedding (default 1; ``None`` leaves scikit-learn's choice): on a busy 2-core machine
    500 points took 43 s with its default threads and 3.4 s with one.
    """
    X = np.asarray(features)
    if X.ndim != 2:
        raise ValueError(f"tsne: features must be 2-D (samples, features), got shape {X.shape}")
    if X.shape[0] < 2 or X.shape[1] == 0:
        raise ValueError(f"tsne: needs at least 2 samples and 1 feature, got shape {X.shape}")
    if X.dtype.kind not in "iufb":
        raise ValueError(f"tsne: features must be numeric, got dtype {X.dtype}")
    X = X.astype(np.float64)
    if not np.isfinite(X).all():
        bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
        raise ValueError(f"tsne: features have NaN/inf in {len(bad)} rows (first row {bad[0]})")
    if not (is_real(perplexity) and 0 < perplexity < X.shape[0]):
        raise ValueError(f"tsne: perplexity must be > 0 and below the number of samples "
                         f"({X.shape[0]}), got {perplexity!r}")
    seed = Int(min=0).check("tsne: seed", seed)
    try:
        from sklearn.manifold import TSNE
    except ImportError as exc:
        raise ImportError("nnjit.viz.tsne needs scikit-learn, an optional extra: "
                          "pip install 'nnjit[viz]'") from exc
    max_iter = Int(min=250, none_ok=True, says="an int >= 250 or None").check("tsne: max_iter",
                                                                              max_iter)
    kwargs = {} if max_iter is None else {"max_iter": int(max_iter)}
    model = TSNE(n_components=2, perplexity=float(perplexity), random_state=int(seed),
                 init="pca", learning_rate="auto", **kwargs)
    if threads is None:
        return model.fit_transform(X)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=int(threads), user_api="openmp"):
        return model.fit_transform(X)


def tsne(logits_or_features, labels=None, perplexity: float = 30.0, seed: int = 0, *,
         class_names=None, title: str | None = None, marker_size: float = 6,
         max_iter: int | None = None, threads: int | None = 1) -> go.Figure:
    """2-D t-SNE scatter of logits (e.g. a checkpoint's outputs on a data set) or features.

    Args:
        logits_or_features: ``(n, d)`` finite numbers.
        labels: one class label per row (colours, one trace per class) or ``None``.
        perplexity: t-SNE perplexity, ``0 < perplexity < n``.
        seed: ``random_state`` of the embedding (same seed, same picture).
        class_names: display names for integer labels ``0..K-1``.
        max_iter, threads: as in :func:`tsne_coordinates`.

    Needs scikit-learn (``pip install 'nnjit[viz]'``), imported only when called; the
    coordinates are the traces' ``x``/``y`` (see also ``tsne_coordinates``).
    """
    n = np.shape(logits_or_features)[0] if np.ndim(logits_or_features) else 0
    if labels is not None:
        labels = labels.to_numpy() if isinstance(labels, (pd.Series, pd.Index)) else np.asarray(
            labels)
        if labels.ndim == 2 and labels.shape[1] == 1:
            labels = labels[:, 0]
        if labels.ndim != 1 or len(labels) != n:
            raise ValueError(f"tsne: labels must have one value per row ({n}), got shape "
                             f"{labels.shape}")
    coords = tsne_coordinates(logits_or_features, perplexity, seed, max_iter=max_iter,
                              threads=threads)
    return scatter(coords[:, 0], coords[:, 1], labels, categorical=True, class_names=class_names,
                   title=title if title is not None else f"t-SNE (perplexity {perplexity})",
                   x_title="t-SNE 1", y_title="t-SNE 2", marker_size=marker_size)
