"""A run's report: one self-contained HTML page (``<run folder>/report.html``) with the config,
the metadata, the history plots and table, and for a classification run the best checkpoint's
confusion matrix, classification report and t-SNE of its logits (``nnjit report``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from nnjit.experiment.enums import Checkpoints
from nnjit.experiment.run_folder import Run
from nnjit.io.atomic import atomic_write_text

__all__ = ["REPORT_TSNE_ROWS", "write_report"]

#: At most this many rows go into the report's t-SNE (a random subset, seed 0), embedded with
#: 500 iterations on one thread: about 1 s with scikit-learn on a busy 2-core machine (500 rows
#: and 1000 iterations took 3.4 s), and the picture does not need more.
REPORT_TSNE_ROWS = 300
REPORT_TSNE_ITERATIONS = 500


def write_report(run: Run, path=None, *, data=None, class_names=None) -> Path:
    """Write one self-contained HTML page for ``run``; returns its path (default
    ``<run folder>/report.html``).

    The page holds the config, the metadata, the loss / accuracy / lr plots and the history
    table, and for classification runs whose data can be loaded the best checkpoint's
    confusion matrix, classification report and a 2-D t-SNE of its logits (at most
    :data:`REPORT_TSNE_ROWS` rows) on the evaluation data. plotly.js is inlined once.
    Without scikit-learn (the ``viz`` extra) the t-SNE is left out with a note in the page
    and one line on stderr.

    Args:
        data: ``(X, y)`` to evaluate on; default: the run's own data (:meth:`Run.load_data`:
            a built-in name or a CSV path from ``run.yaml``), its test part or else its
            validation part. Without either, the page says why those figures are missing.
        class_names: display names of the classes (default: the data set's, if known).
    """
    import html

    from nnjit.viz.figures import history_plot

    hist = run.history()
    figures = []  # (section, html) pairs; the first figure carries plotly.js
    if len(hist):
        groups = [("loss", ["train_loss", "val_loss"]),
                  ("accuracy", ["train_accuracy", "val_accuracy"]), ("learning rate", ["lr"])]
        if not run.config.model.loss.builder().is_classification:
            groups = [g for g in groups if g[0] != "accuracy"]
        for title, cols in groups:
            cols = [c for c in cols if c in hist and hist[c].notna().any()]
            if cols:
                figures.append(("History", history_plot(hist, columns=cols, names=[run.id],
                                                        title=title)))
    evaluation, note = _evaluation_figures(run, data, class_names)
    figures += evaluation[0]
    parts, seen = [], set()
    for i, (section, fig) in enumerate(figures):
        if section not in seen:
            seen.add(section)
            parts.append(f"<h2>{html.escape(section)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=i == 0,
                                 div_id=f"nnjit-fig-{i}"))
    tables = "".join(evaluation[1])
    meta = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in run.metadata().items())
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>nnjit run {html.escape(run.id)}</title></head><body>"
        f"<h1>Run {html.escape(run.display)}</h1>"
        f"<h2>Config</h2><pre>{html.escape(run.config.to_yaml(full=True))}</pre>"
        f"<h2>Metadata</h2><table>{meta}</table>"
        f"{''.join(parts) or '<h2>History</h2><p>no epochs yet</p>'}"
        f"{tables}"
        f"{'<p class=note>' + html.escape(note) + '</p>' if note else ''}"
        f"<h2>History table</h2>{hist.to_html(index=False, na_rep='', classes='history')}"
        "</body></html>")
    out = run.path / "report.html" if path is None else Path(os.fspath(path))
    atomic_write_text(out, page)
    return out


def _evaluation_figures(run: Run, data, class_names):
    """((figures, tables), note): the best checkpoint's confusion matrix, classification
    report and t-SNE on the evaluation data, or a note saying why they are missing."""
    if not run.config.model.loss.builder().is_classification:
        return ([], []), "No confusion matrix or t-SNE: this is a regression run."
    where = "given data"
    if data is None:
        try:
            loaded = run.load_data()
        except (OSError, ValueError) as e:
            return ([], []), ("No confusion matrix or t-SNE: the run's data could not be "
                              f"loaded ({e}).")
        if loaded is None:
            return ([], []), ("No confusion matrix or t-SNE: the run has no 'data' in run.yaml "
                              "(pass data=(X, y) to write_report).")
        X, y, where = loaded.evaluation()
        class_names = class_names if class_names is not None else loaded.class_names
    else:
        X, y = data
    phase = Checkpoints.BEST
    try:
        run.checkpoint(phase)
    except FileNotFoundError:
        phase = Checkpoints.LAST
    try:
        logits = run.checkpoint_outputs(X, phase)
    except FileNotFoundError as e:
        return ([], []), f"No confusion matrix or t-SNE: {e}"
    from nnjit.viz.figures import confusion_matrix, tsne
    from nnjit.viz.metrics import classification_report

    y = np.asarray(y).reshape(len(y), -1)
    y_true = y[:, 0] if y.shape[1] == 1 else np.argmax(y, axis=1)
    y_true = y_true.astype(np.int64)
    pred = (np.argmax(logits, axis=1) if logits.shape[1] > 1
            else (logits[:, 0] > 0).astype(np.int64))
    k = max(int(y_true.max()), int(pred.max()), logits.shape[1] - 1) + 1
    names = list(class_names) if class_names is not None and len(class_names) == k else None
    epoch = run.checkpoint_epoch(phase)
    label = f"{phase.value} checkpoint (epoch {epoch}), {where} data, {len(y)} rows"
    figures = [(f"Confusion matrix: {label}",
                confusion_matrix(y_true, pred, labels=list(range(k)), target_names=names))]
    report = classification_report(y_true, pred, target_names=names,
                                   labels=list(range(k)))
    tables = [f"<h2>Classification report: {label}</h2>"
              + report.to_html(float_format=lambda v: f"{v:.3f}", classes="report",
                               na_rep="")]  # (the accuracy row has no precision or recall)
    rows = np.arange(len(y))
    if len(rows) > REPORT_TSNE_ROWS:
        rows = np.sort(np.random.default_rng(0).choice(len(y), REPORT_TSNE_ROWS, replace=False))
    note = ""
    if len(rows) >= 5:
        perplexity = float(min(30.0, (len(rows) - 1) / 3))
        try:
            figures.append((f"t-SNE of the logits: {label}",
                            tsne(logits[rows], y_true[rows], perplexity=perplexity, seed=0,
                                 class_names=names, max_iter=REPORT_TSNE_ITERATIONS,
                                 title=f"t-SNE of the {phase.value} checkpoint's logits "
                                       f"({len(rows)} rows)")))
        except ImportError as e:  # scikit-learn is an optional extra: the rest still renders
            note = f"No t-SNE of the logits: {e}"
            print(f"nnjit report: t-SNE skipped: {e}", file=sys.stderr)
    return (figures, tables), note
