"""``NeighborLoader``: neighbour-sampled minibatches of a large graph (as PyG's).

Each batch takes ``batch_size`` seed nodes of a mask (shuffled every epoch for training), samples
up to ``num_neighbors[0]`` incoming neighbours of each seed, then ``num_neighbors[1]`` of each
of those, and so on, and runs the model on that subgraph. Sampling happens in compiled code into
buffers sized once from the batch size and fan-outs, with the trainer's seeded RNG. The loss and
metrics count the seed nodes only: their sampled neighbours only pass messages.
"""

from __future__ import annotations

import numpy as np

from nnjit.checks import is_int
from nnjit.data.full_batch import resolve_mask
from nnjit.data.loader import DataLoader


class NeighborLoader(DataLoader):
    """Sampled batches of ``graph``'s nodes in ``mask``.

    Args:
        graph: a validated :class:`nnjit.data.graph.Graph` with dense features and labels.
        num_neighbors: fan-out per layer, outermost first (PyG's ``[25, 10]``); -1 = all.
        batch_size: seed nodes per batch.
        mask: the seed nodes: ``"train"`` (default), ``"val"``, ``"test"`` or a bool array.
        shuffle: reshuffle the seeds every epoch.
    """

    def __init__(self, graph, num_neighbors, batch_size: int = 512, mask="train",
                 shuffle: bool = True):
        if graph.is_sparse:
            raise ValueError("NeighborLoader: the graph's features are sparse (CSR); sampled "
                             "batches need dense features (pass x as a dense array)")
        if graph.y is None:
            raise ValueError("NeighborLoader: the graph has no labels (y=None)")
        fanouts = list(num_neighbors)
        if not fanouts or not all(is_int(f) and (f >= 1 or f == -1) for f in fanouts):
            raise ValueError(f"NeighborLoader: num_neighbors must be a non-empty list of fan-outs "
                             f">= 1 (or -1 for all), got {fanouts!r}")
        fanouts = [int(f) for f in fanouts]
        self.graph = graph
        self.num_neighbors = fanouts
        self.mask = resolve_mask(graph, mask)
        self.seeds = np.flatnonzero(self.mask).astype(np.int64)
        if len(self.seeds) == 0:
            raise ValueError(f"NeighborLoader: the mask {mask!r} selects no nodes")
        # (float ids: an integer array would be an integer input, whose bits the sampler misreads)
        super().__init__(self.seeds.reshape(-1, 1).astype(np.float64), graph.y[self.seeds],
                         batch_size, shuffle)

    def features(self, dtype) -> np.ndarray:
        """The seed node ids, as the arena dtype (exact below 2**24 nodes in float32)."""
        if np.dtype(dtype) == np.float32 and self.graph.num_nodes > 2**24:
            raise ValueError("NeighborLoader: graphs over 16,777,216 nodes need dtype=float64")
        return super().features(dtype)

    def targets(self, loss, n_outputs: int, dtype) -> np.ndarray:
        if int(self.graph.y.max()) >= n_outputs:
            raise ValueError(f"NeighborLoader: labels go up to {int(self.graph.y.max())} but the "
                             f"model has {n_outputs} outputs")
        return super().targets(loss, n_outputs, dtype)

    def like(self, mask) -> NeighborLoader:
        """The same sampling on another mask's nodes, unshuffled (validation)."""
        return NeighborLoader(self.graph, self.num_neighbors, self.batch_size, mask, False)

    def __repr__(self) -> str:
        return (f"NeighborLoader(seeds={len(self.seeds)}, num_neighbors={self.num_neighbors}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle})")
