"""The container of a node-classification graph data set: :class:`GraphDataset`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnjit.data.graph_sizes import GraphSizes


@dataclass(frozen=True, eq=False, repr=False)
class GraphDataset(GraphSizes):
    """A node-classification graph (one graph, transductive split).

    Attributes
    ----------
    x : np.ndarray
        float32, shape ``(num_nodes, num_features)``, node features.
    y : np.ndarray
        int64, shape ``(num_nodes,)``, node classes.
    edge_index : np.ndarray
        int64, shape ``(2, num_edges)``: edge ``e`` goes from ``edge_index[0, e]`` to
        ``edge_index[1, e]`` (PyG convention; undirected graphs store both directions).
    train_mask, val_mask, test_mask : np.ndarray
        bool, shape ``(num_nodes,)``; pairwise disjoint.
    target_names : tuple[str, ...]
        ``target_names[k]`` is the name of class ``k``.
    name, description : str
        As for :class:`Dataset`.
    """

    x: np.ndarray
    y: np.ndarray
    edge_index: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    target_names: tuple[str, ...]
    name: str
    description: str

    @property
    def num_classes(self) -> int:
        return len(self.target_names)

    def __repr__(self) -> str:
        return (
            f"GraphDataset(name={self.name!r}, num_nodes={self.num_nodes}, "
            f"num_edges={self.num_edges}, num_features={self.num_features}, "
            f"num_classes={self.num_classes}, train/val/test="
            f"{int(self.train_mask.sum())}/{int(self.val_mask.sum())}/{int(self.test_mask.sum())})"
        )
