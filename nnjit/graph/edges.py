"""What a graph model's ``forward(self, x, edges)`` receives while it is traced.

:class:`Edges` stands for the graph's structure: message-passing layers record graph ops on it
(:meth:`Edges.propagate`, :meth:`Edges.max_aggregate`, ...). :class:`SparseFeatures` stands for a
bag-of-words feature matrix kept in CSR form; :class:`nnjit.nn.Linear` and the conv layers turn
it into a dense ``(N, out)`` tensor with one sparse-times-dense op, and :class:`nnjit.nn.Dropout`
drops its non-zeros. :class:`GraphStructure` holds the CSR arrays of one graph and packs them for
compiled code (:mod:`nnjit.graph.graph_data`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from nnjit.graph import graph_data as gd
from nnjit.graph.graph_data import GRAPH_FEATURES, GRAPH_LOOPS, GRAPH_RAW
from nnjit.ops import graph as graph_ops
from nnjit.tape.tape import BatchDim, Symbolic, Tape, Tensor


class GraphStructure:
    """The CSRs (grouped by target) of one graph, and their packed int64 form ``gdata``.

    Args:
        edge_index: int64 (2, E), validated (see :class:`nnjit.data.graph.Graph`).
        num_nodes: N.
        features: a scipy CSR feature matrix, or None for dense features.
    """

    def __init__(self, edge_index: np.ndarray, num_nodes: int, features=None):
        from nnjit.data.graph import replace_self_loops, to_csr

        self.num_nodes = int(num_nodes)
        indptr, src, _ = to_csr(edge_index, self.num_nodes)
        lp, ls, _ = to_csr(replace_self_loops(edge_index, self.num_nodes), self.num_nodes)
        csrs = {GRAPH_RAW: (indptr, src), GRAPH_LOOPS: (lp, ls)}
        self.features = None
        if features is not None:
            f = sp.csr_matrix(features)
            csrs[GRAPH_FEATURES] = (f.indptr.astype(np.int64), f.indices.astype(np.int64))
            self.features = f
        self.num_edges = {k: len(v[1]) for k, v in csrs.items()}
        self.gdata = gd.pack(self.num_nodes, csrs)
        self.sampled = False
        self.max_rows = self.num_nodes  # rows of the node slots
        self.node_features = None

    @classmethod
    def sampled_from(cls, graph, fanouts, batch_size: int) -> GraphStructure:
        """Buffers for neighbour-sampled batches of ``batch_size`` seeds (see NeighborLoader)."""
        from nnjit.data.graph import to_csr
        from nnjit.kernels.sampling import max_sizes

        self = cls.__new__(cls)
        self.num_nodes = graph.num_nodes
        indptr, src, _ = to_csr(graph.edge_index, self.num_nodes)
        max_nodes, max_edges = max_sizes(batch_size, fanouts, False, self.num_nodes, len(src))
        self.num_edges = {GRAPH_RAW: max_edges, GRAPH_LOOPS: max_edges + max_nodes}
        self.gdata = gd.pack_sampled(indptr, src, np.asarray(fanouts, np.int64), batch_size,
                                     max_nodes, max_edges)
        self.features = None
        self.sampled = True
        self.max_rows = max_nodes
        self.node_features = graph.x
        return self


class SparseFeatures(Symbolic):
    """A symbolic (N, F) sparse feature matrix: its non-zeros live in a (nnz, 1) slot."""

    def __init__(self, nonzeros: Tensor, rows: int, cols: int):
        self.nonzeros = nonzeros
        self.tape: Tape = nonzeros.tape
        self._rows = rows
        self._cols = cols

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def cols(self) -> int:
        return self._cols

    @property
    def shape(self) -> tuple[int, int]:
        return (self._rows, self._cols)

    @property
    def requires_grad(self) -> bool:
        return False

    def dense(self, weight: Tensor, bias: Tensor | None) -> Tensor:
        """``X @ weight.T + bias`` as a dense (N, out) tensor (one sparse-times-dense op,
        :func:`nnjit.ops.graph.csr_dense`)."""
        return graph_ops.csr_dense(None, self, weight, bias)  # (no edge set: the feature CSR)

    def dropout(self, p: float) -> SparseFeatures:
        """Dropout on the non-zeros (the zeros stay zero): as dropout on the dense matrix."""
        return SparseFeatures(self.tape.dropout(self.nonzeros, p), self._rows, self._cols)

    def __repr__(self) -> str:
        return f"SparseFeatures(shape={self.shape}, nnz={self.nonzeros.rows})"


class Edges(Symbolic):
    """The graph's edges during tracing: message-passing layers record their ops here.

    ``csr`` arguments pick the edge set: ``"raw"`` (the graph's edges) or ``"loops"`` (without
    its self loops, plus exactly one per node: GCN's and GAT's :math:`A + I`). Each method
    records one op of the graph family (:mod:`nnjit.ops.graph`, where its recorder is).
    """

    CSRS = graph_ops.EDGE_SETS

    def __init__(self, tape: Tape, structure: GraphStructure):
        self.tape = tape
        self.structure = structure

    @property
    def num_nodes(self) -> int:
        return self.structure.num_nodes

    def num_edges(self, csr: str = "raw") -> int:
        return self.structure.num_edges[graph_ops.csr_number(csr)]

    def weights(self, kind: str, csr: str = "raw") -> Tensor:
        """Edge weights (E, 1) of ``kind`` ``"gcn"`` (symmetric normalisation, for ``"loops"``)
        or ``"mean"`` (1 / in-degree), recorded once per tape and shared by every layer."""
        return graph_ops.edge_weights(self, kind=kind, csr=csr)

    def propagate(self, x: Tensor, csr: str = "raw", weights: Tensor | None = None,
                  bias: Tensor | None = None) -> Tensor:
        """``out[i] = sum over edges j -> i of weights[e] * x[j] (+ bias)``, per head when
        ``weights`` is (E, H) and x is (N, H * C); unit weights when None."""
        return graph_ops.spmm(self, x, weights, bias, csr=csr)

    def max_aggregate(self, x: Tensor, csr: str = "raw") -> Tensor:
        """``out[i] = max over edges j -> i of x[j]`` per column (0 without incoming edges)."""
        return graph_ops.scatter_max(self, x, csr=csr)

    def gather_add(self, a_src: Tensor, a_dst: Tensor, csr: str = "raw") -> Tensor:
        """Per edge j -> i: ``a_src[j] + a_dst[i]`` (E, H)."""
        return graph_ops.edge_gather_add(self, a_src, a_dst, csr=csr)

    def softmax(self, scores: Tensor, csr: str = "raw") -> Tensor:
        """Softmax of (E, H) edge scores over each node's incoming edges, per head."""
        return graph_ops.segment_softmax(self, scores, csr=csr)

    def __repr__(self) -> str:
        return f"Edges(num_nodes={self.num_nodes}, num_edges={self.num_edges()})"


def graph_inputs(tape: Tape, structure: GraphStructure, n_features: int):
    """The (x, edges) a graph model is traced with; dense x is the tape's batch input."""
    edges = Edges(tape, structure)
    tape.graph = structure
    if structure.sampled:  # the batch input holds the sampled nodes' rows of all features
        features = tape.constant(structure.node_features, "graph.features")
        structure.gdata[gd.G_FEATURES_SLOT] = features.slot
        x = tape.input(structure.node_features.shape[1], "input")
        return x, x, edges
    if structure.features is not None:
        f = structure.features
        nonzeros = tape.constant(f.data.reshape(-1, 1), "features.nonzeros")
        x = SparseFeatures(nonzeros, BatchDim(structure.num_nodes), f.shape[1])
        return None, x, edges
    x = tape.input(n_features, "input")
    return x, x, edges
