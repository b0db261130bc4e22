"""Node, edge and feature counts of a graph held as ``x`` (N, F) and ``edge_index`` (2, E)."""

from __future__ import annotations


class GraphSizes:
    """``num_nodes``, ``num_edges`` and ``num_features`` of anything with ``x`` (N, F) and
    ``edge_index`` (2, E); shared by :class:`nnjit.datasets.GraphDataset` and
    :class:`nnjit.data.graph.Graph`."""

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        """Number of *directed* edges (columns of ``edge_index``)."""
        return int(self.edge_index.shape[1])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])
