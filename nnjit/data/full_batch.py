"""``FullBatch``: a whole graph as one batch, with the loss on one mask's nodes.

Node classification on a graph that fits in memory (Cora, ...) trains full-batch, as PyTorch
Geometric's examples: every epoch runs the model once over all nodes and counts the loss (and
accuracy) only on the nodes of a mask. Targets of the other nodes are stored as -1, which the
compiled cross-entropy ignores (PyTorch's ``ignore_index``), so the mean is over the mask.
"""

from __future__ import annotations

import numpy as np

from nnjit.data.loader import DataLoader

IGNORED = -1


class FullBatch(DataLoader):
    """The nodes of ``graph`` as one batch; the loss counts the nodes where ``mask`` is True.

    Args:
        graph: a validated :class:`nnjit.data.graph.Graph`.
        mask: bool (N,), a mask name (``"train"``, ``"val"``, ``"test"``), or None for all nodes.
    """

    def __init__(self, graph, mask=None):
        self.graph = graph
        self.mask = resolve_mask(graph, mask)
        n = graph.num_nodes
        if not self.mask.any():  # the loss would count nothing: a fit trains nothing, a mean is NaN
            what = (f"the graph's {mask if mask.endswith('_mask') else mask + '_mask'}"
                    if isinstance(mask, str) else "mask" if mask is not None else "the graph")
            raise ValueError(f"FullBatch: {what} selects no node (0 of {n}); the loss and "
                             "accuracy would count nothing")
        # Sparse features reach the model through the graph data, not the batch input.
        self.X = np.zeros((n, 0), np.float32) if graph.is_sparse else graph.x
        self.y = graph.y
        self.batch_size = max(n, 1)
        self.shuffle = False
        self.drop_last = False
        self._cache: dict = {}

    def targets(self, loss, n_outputs: int, dtype) -> np.ndarray:
        """Class indices (N, 1) in the arena dtype, -1 outside the mask."""
        if self.y is None:
            raise ValueError("FullBatch: the graph has no labels (y=None)")
        if not loss.is_classification or getattr(loss, "opcode", None) is None or n_outputs < 2:
            raise ValueError(f"graph node classification needs CrossEntropyLoss and a model with "
                             f">= 2 outputs, got {type(loss).__name__} with {n_outputs}")
        key = ("y", n_outputs, np.dtype(dtype))
        if key not in self._cache:
            if self.y.size and int(self.y.max()) >= n_outputs:
                raise ValueError(f"FullBatch: labels go up to {int(self.y.max())} but the model "
                                 f"has {n_outputs} outputs")
            y = np.where(self.mask, self.y, IGNORED).astype(dtype).reshape(-1, 1)
            self._cache[key] = y
        return self._cache[key]

    def __repr__(self) -> str:
        return f"FullBatch({self.graph!r}, mask nodes={int(self.mask.sum())})"


def resolve_mask(graph, mask) -> np.ndarray:
    """A bool (N,) mask from a name (train/val/test), an array, or None (all nodes)."""
    n = graph.num_nodes
    if mask is None:
        return np.ones(n, dtype=bool)
    if isinstance(mask, str):
        name = mask if mask.endswith("_mask") else f"{mask}_mask"
        if name not in ("train_mask", "val_mask", "test_mask"):
            raise ValueError(f"unknown mask {mask!r}; valid: 'train', 'val', 'test' or a bool "
                             "array")
        value = getattr(graph, name)
        if value is None:
            raise ValueError(f"the graph has no {name}")
        return value
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != (n,):
        raise ValueError(f"mask must be a bool array of shape ({n},), got dtype {mask.dtype} "
                         f"shape {mask.shape}")
    return mask
