"""The data of a run: a built-in data set name, a CSV path, an image data set read from a path
(``fashion_mnist:PATH``) or a generated series (``sine_series``), split the same way every time.

``nnjit train`` trains on :func:`load_run_data`'s ``train`` part and validates on its ``val``
part; ``nnjit report`` loads the same split again (same seed) to draw the best checkpoint's
confusion matrix and t-SNE on the evaluation rows (``test`` when there are any, else ``val``).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from nnjit.data.split import Split, train_test_split
from nnjit.data.standardize import standardize
from nnjit.datasets import GraphDataset, load
from nnjit.experiment.series import SERIES_SOURCES, load_series

__all__ = ["GraphRunData", "RunData", "load_run_data"]


@dataclasses.dataclass(frozen=True, eq=False)
class RunData(Split):
    """Train / validation / test arrays of a run (a :class:`~nnjit.data.split.Split`;
    ``X_test`` may have no rows), with where they came from."""

    class_names: tuple[str, ...] | None
    source: str
    #: How a CSV's rows became X (a TabularEncoding); None for a built-in data set.
    encoding: object = None


@dataclasses.dataclass(frozen=True, eq=False)
class GraphRunData:
    """A graph run's data: one graph, trained on its ``train_mask`` (full batch) and validated
    on its ``val_mask``; evaluated on its ``test_mask`` (else ``val_mask``)."""

    graph: object  # nnjit.data.graph.Graph
    class_names: tuple[str, ...] | None
    source: str

    def evaluation(self):
        """``(FullBatch of the evaluation mask, its labels, name)``."""
        from nnjit.data.full_batch import FullBatch

        g = self.graph
        name = "test" if g.test_mask is not None and g.test_mask.any() else "val"
        batch = FullBatch(g, name)
        return batch, g.y[batch.mask], name


def graph_from_dataset(dataset):
    """A :class:`~nnjit.data.graph.Graph` of a built-in graph data set, with PyG's
    ``NormalizeFeatures`` (rows sum to 1) applied to its bag-of-words features, kept sparse."""
    import scipy.sparse as sp

    from nnjit.data.graph import Graph

    x = sp.csr_matrix(dataset.x, dtype=np.float32)
    sums = np.asarray(x.sum(axis=1)).ravel()
    x = sp.diags(1.0 / np.where(sums > 0, sums, 1.0)).astype(np.float32) @ x
    return Graph.from_arrays(x, dataset.edge_index, dataset.y, dataset.train_mask,
                             dataset.val_mask, dataset.test_mask)


#: Image data sets read from the user's files: ``NAME:PATH`` -> the loader of PATH.
IMAGE_SOURCES = {"fashion_mnist": "load_fashion_mnist"}


def image_source(spec: str) -> tuple[str, str] | None:
    """``(name, path)`` of a ``NAME:PATH`` spec naming an :data:`IMAGE_SOURCES` entry, else None."""
    name, sep, path = spec.partition(":")
    key = name.strip().lower().replace("-", "_")
    return (key, path) if sep and key in IMAGE_SOURCES else None


def is_csv(spec: str) -> bool:
    return os.path.splitext(spec)[1].lower() == ".csv" or os.path.isfile(spec)


def load_run_data(spec: str, regression: bool, seed: int, target: str | None = None,
                  val: float = 0.15) -> RunData | GraphRunData:
    """Load ``spec`` (a built-in data set name, a CSV path, ``fashion_mnist:PATH`` or a
    generated series, :data:`~nnjit.experiment.series.SERIES_SOURCES`) and split it.

    ``sine_series`` (generated: :func:`~nnjit.experiment.series.sine_windows`) is split in
    time, its last ``val`` windows validating, and not standardised (a forecasting run, ``mse``).

    A built-in graph data set (``"cora"``) comes back as :class:`GraphRunData` (its own masks).

    ``fashion_mnist:PATH`` reads :func:`~nnjit.datasets.load_fashion_mnist` (an IDX folder or an
    ``.npz``): its training part is split ``1 - val`` / ``val`` (stratified, ``seed``), its own
    test part is the test part; images are flat rows of pixels in ``[0, 1]`` (not
    standardised), which a ``cnn`` net views as ``in_shape``.

    A built-in data set is split ``1 - val`` / ``val`` (stratified, ``seed``) and standardised
    with the training part's statistics. A CSV goes through
    :meth:`~nnjit.data.tabular.TabularDataset.from_dataframe` with ``target`` (default: the last
    column), ``val`` and no test part.

    Raises:
        FileNotFoundError: no such CSV file. ValueError: unknown name or column.
    """
    if spec in SERIES_SOURCES:  # generated, split in time
        X_fit, y_fit, X_val, y_val = load_series(spec, regression, val)
        return RunData(X_fit, y_fit, X_val, y_val, X_fit[:0], y_fit[:0], None, spec)
    source = image_source(spec)
    if source is not None:
        from nnjit import datasets

        name, path = source
        images = getattr(datasets, IMAGE_SOURCES[name])(path, flatten=True)
        X_fit, X_val, y_fit, y_val = train_test_split(images.X_train, images.y_train, val,
                                                      seed=seed)
        return RunData(X_fit, y_fit, X_val, y_val, images.X_test, images.y_test,
                       images.target_names, spec)
    if is_csv(spec):
        import pandas as pd

        from nnjit.data.tabular import TabularDataset
        from nnjit.io.regular import open_regular

        if not os.path.exists(spec):
            raise FileNotFoundError(f"no such CSV file: {spec}")
        with open_regular(spec, "rb") as fh:  # (a FIFO or a device is refused, never read)
            df = pd.read_csv(fh)
        target = target or df.columns[-1]
        if target not in df.columns:
            raise ValueError(f"no column {target!r} in {spec}; columns: "
                             f"{', '.join(map(str, df.columns))}")
        ds = TabularDataset.from_dataframe(df, None, target,
                                           task="regression" if regression else "classification",
                                           val=val, test=0.0, seed=seed)
        names = None if ds.classes is None else tuple(str(c) for c in ds.classes)
        return RunData(ds.X_train, ds.y_train, ds.X_val, ds.y_val, ds.X_test, ds.y_test, names,
                       spec, ds.encoding)
    data = load(spec)
    if isinstance(data, GraphDataset):
        names = tuple(getattr(data, "target_names", ()) or ()) or None
        return GraphRunData(graph_from_dataset(data), names, spec)
    X, y = data
    X = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
    X_fit, X_val, y_fit, y_val = train_test_split(X, y, val, seed=seed)
    X_fit, X_val = standardize(X_fit, X_val)
    names = tuple(getattr(data, "target_names", ()) or ()) or None
    return RunData(X_fit, y_fit, X_val, y_val, X_fit[:0], y_fit[:0], names, spec)
