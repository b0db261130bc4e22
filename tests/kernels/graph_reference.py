"""The kernel tests' names for the NumPy references of :mod:`nnjit.ops.graph_reference`.

The kernels take explicit arrays (``indptr, src, ...``) rather than an ``OpGraph``, so these are
the array-level references that the ops' ``reference(graph, ...)`` functions are built on.
"""

from nnjit.ops.graph_reference import adjacency, csr_from_edges, gcn_norm, mean, targets_of
from nnjit.ops.graph_reference import dense_plus_bias as csr_dense
from nnjit.ops.graph_reference import gather_add_edges as edge_gather_add
from nnjit.ops.graph_reference import head_dot_dense as head_dot
from nnjit.ops.graph_reference import scatter_max_with_arg as scatter_max
from nnjit.ops.graph_reference import segment_softmax_edges as segment_softmax
from nnjit.ops.graph_reference import spmm_dense as spmm

__all__ = ["adjacency", "csr_dense", "csr_from_edges", "edge_gather_add", "gcn_norm", "head_dot",
           "mean", "scatter_max", "segment_softmax", "spmm", "targets_of"]
