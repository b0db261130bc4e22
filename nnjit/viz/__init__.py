"""Plotly figures and metric tables for nnjit runs (``import nnjit.viz``; not loaded by ``nnjit``).

- ``confusion_matrix(y_true, y_pred, labels=None, normalize=None)`` -> heatmap ``Figure``
- ``classification_report(y_true, y_pred, target_names=None)`` -> ``pandas.DataFrame``
- ``history_plot(histories, columns=('train_loss', 'val_loss'), names=None)`` -> line ``Figure``
- ``scatter(x, y, color=None, ...)`` -> scatter ``Figure``
- ``tsne(logits_or_features, labels, perplexity=30, seed=0)`` -> 2-D t-SNE scatter ``Figure``
  (scikit-learn, an optional extra: ``pip install 'nnjit[viz]'``, imported only when called)

Every function returns its result and has no display or file side effects.
"""

from nnjit.viz.figures import confusion_matrix as confusion_matrix
from nnjit.viz.figures import history_plot as history_plot
from nnjit.viz.figures import scatter as scatter
from nnjit.viz.figures import tsne as tsne
from nnjit.viz.figures import tsne_coordinates as tsne_coordinates
from nnjit.viz.metrics import classification_report as classification_report
from nnjit.viz.metrics import confusion_counts as confusion_counts

__all__ = ["classification_report", "confusion_counts", "confusion_matrix", "history_plot",
           "scatter", "tsne", "tsne_coordinates"]
