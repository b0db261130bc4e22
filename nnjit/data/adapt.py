"""Training inputs, adapted once into the one object a fit consumes (:class:`FitData`).

``Trainer.fit`` accepts a :class:`DataLoader`, ``(X, y)``, a :class:`Graph` or a
:class:`NeighborLoader` to train on, and the same forms (or a graph's own ``val_mask``) to
validate on. Here they become loaders, are checked against each other (a graph's validation is
a mask of the same graph, batched the same way), and a graph gets the CSR structure its model is
traced on (:class:`nnjit.graph.edges.GraphStructure`: packed CSRs, or the buffers of neighbour-
sampled batches). The trainer then reads arrays in its arena dtype and sizes from one object.
"""

from __future__ import annotations

import numpy as np

from nnjit.data.full_batch import FullBatch
from nnjit.data.graph import Graph
from nnjit.data.images import ImageDataset
from nnjit.data.inputs import spec_mismatch
from nnjit.data.loader import DataLoader
from nnjit.data.neighbor_loader import NeighborLoader
from nnjit.data.sequences import SequenceDataset

_EMPTIES: dict = {}
_GRAPH_TRAIN = (Graph, NeighborLoader)  # training data that is a graph
_GRAPH_VAL = (Graph, FullBatch, NeighborLoader)  # validation data that is a graph


def empty_rows(dtype, cols: int | None) -> np.ndarray:
    """A shared ``(0, cols)`` array (``(0,)`` for ``cols=None``) of ``dtype``: passed where the
    compiled loop expects an array it does not use (it has nothing to write)."""
    key = (dtype, cols)
    empty = _EMPTIES.get(key)
    if empty is None:
        empty = _EMPTIES[key] = np.zeros(0 if cols is None else (0, cols), dtype=dtype)
    return empty


def as_loader(data, y, where: str, batch_size=None) -> DataLoader:
    """``data`` (a DataLoader, a Graph, an ImageDataset or SequenceDataset, ``(X, y)`` or X with
    ``y``; X one array or a tuple of them, one per model input) as a DataLoader; arrays and
    datasets get ``batch_size`` rows per batch (a number, ``batch_size(n_rows)``, or 256) and no
    shuffling."""
    if isinstance(data, Graph):  # full batch; y names the mask the loss counts
        return FullBatch(data, y if y is not None else (
            "train" if data.train_mask is not None else None))
    if isinstance(data, DataLoader):
        if y is not None:
            raise ValueError(f"{where}: pass targets inside the DataLoader, not as y")
        return data
    if isinstance(data, (ImageDataset, SequenceDataset)):  # inputs and labels, as arrays are
        size = batch_size(len(data)) if callable(batch_size) else (batch_size or 256)
        return DataLoader(data, y, batch_size=size, shuffle=False)
    if isinstance(data, tuple) and len(data) == 2 and y is None:
        data, y = data
    if getattr(data, "shape", (1,))[:1] == (0,) or (isinstance(data, list) and not data):
        raise ValueError(f"{where}: X is empty (0 samples)")
    if y is None:
        raise ValueError(f"{where}: expected a DataLoader or (X, y), got "
                         f"{type(data).__name__} without targets")
    size = batch_size(len(data)) if callable(batch_size) else (batch_size or 256)
    return DataLoader(data, y, batch_size=size, shuffle=False)


def training_graph(data, val, where: str):
    """The Graph that ``data`` is or samples (or None); a graph's validation must be a mask
    of the same graph, batched the same way."""
    if not isinstance(data, _GRAPH_TRAIN):
        if isinstance(val, _GRAPH_VAL):
            raise ValueError(f"{where}: graph validation data needs graph training data")
        return None
    graph = data.graph if isinstance(data, NeighborLoader) else data
    expected = NeighborLoader if isinstance(data, NeighborLoader) else FullBatch
    if isinstance(val, expected):
        if val.graph is not graph:
            raise ValueError(f"{where}: the validation mask must be on the training graph")
        if expected is NeighborLoader and (val.num_neighbors != data.num_neighbors
                                           or val.batch_size > data.batch_size):
            raise ValueError(f"{where}: validation batches must use the training fan-outs "
                             f"{data.num_neighbors} and at most {data.batch_size} seeds; use "
                             "loader.like(mask)")
    elif val is not None:
        raise ValueError(f"{where}: for a graph, pass val={expected.__name__}(graph, mask...) "
                         f"or leave it out (the graph's val_mask), got {type(val).__name__}")
    return graph


def with_validation(train, val, val_dataloader, where: str):
    """``(train, val)`` as a fit takes them: ``val`` or its alias ``val_dataloader``, checked
    against ``train``; a graph without validation data validates on its own ``val_mask``."""
    if val is not None and val_dataloader is not None:
        raise ValueError(f"{where}: pass val or val_dataloader, not both")
    val = val if val is not None else val_dataloader
    graph = training_graph(train, val, where)
    if graph is not None and val is None and graph.val_mask is not None:
        # validate on the graph's own val mask, as it trains (full batch or sampled)
        val = (train.like("val") if isinstance(train, NeighborLoader)
               else FullBatch(graph, "val"))
    return train, val


class GraphInput:
    """The structure a graph model is traced on for a loader, rebuilt only when the loader's
    graph (or its sampling: fan-outs, batch size) changes, so a program laid out for it stays
    valid across fits and predictions on the same graph."""

    __slots__ = ("structure", "source")

    def __init__(self):
        self.structure = None  # GraphStructure, or None for plain arrays
        self.source = None  # what it was built for: the Graph, or (graph, fan-outs, batch)

    def use(self, loader):
        """The structure for ``loader`` (FullBatch, NeighborLoader), or None (other data)."""
        if isinstance(loader, NeighborLoader):
            from nnjit.graph.edges import GraphStructure

            key = (loader.graph, tuple(loader.num_neighbors), loader.batch_size)
            if key != self.source:
                self.structure = GraphStructure.sampled_from(loader.graph, loader.num_neighbors,
                                                             loader.batch_size)
                self.source = key
        elif isinstance(loader, FullBatch):
            from nnjit.graph.edges import GraphStructure

            graph = loader.graph
            if graph is not self.source:
                self.structure = GraphStructure(graph.edge_index, graph.num_nodes,
                                                graph.x if graph.is_sparse else None)
                self.source = graph
        else:
            self.structure = self.source = None
        return self.structure


class FitData:
    """A fit's training and validation data, adapted once.

    Attributes:
        train: the training loader; ``val``: the validation loader or None.
        loss: the trainer's loss, which prepares the targets.
        structure: the graph structure the model is traced on (None for arrays).
        X: the training batch input in the arena dtype (every input packed side by side, a
            graph's node features, or a sampled graph's seed ids).
        specs: each input's :class:`~nnjit.data.inputs.InputSpec` (row shape, integer or not).
        max_rows: the largest batch the fit's arena must hold (see :meth:`rows_per_batch`).
    """

    __slots__ = ("train", "val", "structure", "X", "specs", "max_rows", "loss", "dtype")

    def __init__(self, train, val, graph: GraphInput, loss, dtype):
        self.train = train = as_loader(train, None, "fit: train")
        self.structure = graph.use(train)
        # Validation given as arrays runs in batches no larger than needed (the arena is laid
        # out for the largest batch, so 256 rows for 12 validation rows would only cost memory).
        self.val = None if val is None else as_loader(
            val, None, "fit: val", batch_size=lambda n: max(train.batch_size, min(n, 256)))
        self.loss, self.dtype = loss, dtype
        self.X = train.features(dtype)
        self.specs = train.input_specs
        self.max_rows = self.rows_per_batch()

    @property
    def sampled(self) -> bool:
        """Neighbour-sampled graph batches."""
        return self.structure is not None and self.structure.sampled

    def rows_per_batch(self) -> int:
        """The largest batch a fit's arena must hold: the batch size, but never more rows than
        the data has (60 rows with batch_size=10**7 need 60 rows, not 10**7). The validation
        batch is the layout's, so it keeps the batches it had: as many rows as before, or all."""
        train, val = self.train, self.val
        batch = max(train.batch_size, val.batch_size if val else 1)
        if self.structure is not None:  # (graph layouts are sized by the graph or its sampler)
            return batch
        rows = min(train.batch_size, len(self.X))
        if val is not None:
            rows = max(rows, min(batch, val.n_samples))
        return rows

    def targets(self, n_outputs: int) -> np.ndarray:
        """The training targets, prepared by the loss for a model with ``n_outputs`` outputs."""
        return self.train.targets(self.loss, n_outputs, self.dtype)

    def validation_arrays(self, n_outputs: int, Y: np.ndarray):
        """``(Xv, Yv)`` in the arena dtype, checked to match the training ``X`` and ``Y``; empty
        arrays without validation data."""
        X, val, dtype = self.X, self.val, self.dtype
        if val is None:
            return empty_rows(dtype, X.shape[1]), empty_rows(dtype, Y.shape[1])
        Xv = val.features(dtype)
        problem = (spec_mismatch(val.input_specs, self.specs, "fit: val X", "train X has")
                   if self.structure is None else None)
        if problem is None and Xv.shape[1] != X.shape[1]:
            problem = f"fit: val X has {Xv.shape[1]} features, train X has {X.shape[1]}"
        if problem is not None:
            raise ValueError(problem)
        Yv = val.targets(self.loss, n_outputs, dtype)
        if Yv.shape[1] != Y.shape[1]:
            raise ValueError(f"fit: val y has {Yv.shape[1]} columns, train y has {Y.shape[1]}"
                             " (use the same target form for both)")
        return Xv, Yv
