"""Graphs for node classification: a validated ``Graph`` type, CSR grouping and GCN normalisation.

NumPy/SciPy only (the compiled edge kernels come later and take the arrays built here).

Conventions (PyTorch Geometric's, ``flow='source_to_target'``):

* ``edge_index`` is int64 of shape ``(2, E)``; edge ``e`` goes from node ``edge_index[0, e]``
  (source) to node ``edge_index[1, e]`` (target). An undirected graph stores both directions.
* Message passing aggregates, for each node, over its **incoming** edges, so :func:`to_csr`
  groups edges by target and :func:`gcn_norm` counts degrees on targets.

Building a graph
----------------
``Graph.from_arrays(x, edge_index, y, train_mask, val_mask, test_mask, self_loops=...,
duplicates=...)`` checks everything once and raises ``ValueError`` (``TypeError`` for a wrong
dtype) with a message that names the argument, states what was expected, shows what arrived
and says how to fix it. ``Graph.from_dataset(nnjit.datasets.load_cora())`` does the same for a
:class:`nnjit.datasets.GraphDataset`. Calling ``Graph(...)`` directly skips the checks.

Self loops and duplicate edges (edges repeating an earlier ``(source, target)`` pair) are
**kept by default**, as PyG does; ``Graph.num_self_loops`` and ``Graph.num_duplicate_edges``
report them. ``self_loops='remove'`` drops every self loop and ``self_loops='error'`` raises;
``duplicates='remove'`` keeps the first occurrence of each pair (order otherwise preserved)
and ``duplicates='error'`` raises with the count. Self loops are handled before duplicates.
Note that :func:`gcn_norm` replaces any self loops by exactly one per node anyway.

Arrays that already have the right dtype and layout are stored without a copy.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from nnjit.checks import is_int
from nnjit.data.graph_sizes import GraphSizes

SELF_LOOP_OPTIONS = ("keep", "remove", "error")
DUPLICATE_OPTIONS = ("keep", "remove", "error")
MASK_NAMES = ("train_mask", "val_mask", "test_mask")


# --------------------------------------------------------------------------------------------
# checks shared by Graph.from_arrays, to_csr and gcn_norm
# --------------------------------------------------------------------------------------------

def _check_num_nodes(num_nodes) -> int:
    if not is_int(num_nodes):
        raise TypeError(f"Expected 'num_nodes' to be an int (got {type(num_nodes).__name__}).")
    if num_nodes < 0:
        raise ValueError(f"Expected 'num_nodes' to be >= 0 (got {num_nodes}).")
    return int(num_nodes)


def check_edge_index(edge_index, num_nodes: int) -> np.ndarray:
    """Validate ``edge_index`` against ``num_nodes`` and return it as C-contiguous int64.

    Raises
    ------
    ValueError
        If ``edge_index`` is not of shape ``(2, E)``, has negative indices or indices
        ``>= num_nodes``.
    TypeError
        If ``edge_index`` does not hold integers.
    """
    num_nodes = _check_num_nodes(num_nodes)
    if sp.issparse(edge_index):
        raise TypeError(
            "Expected 'edge_index' to be a dense integer array of shape (2, E) (got a scipy "
            "sparse matrix). For an adjacency matrix `A` with A[target, source] != 0, pass "
            "`np.stack([A.tocoo().col, A.tocoo().row])`."
        )
    ei = np.asarray(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        hint = ""
        if ei.ndim == 2 and ei.shape[1] == 2:
            hint = " It looks like an (E, 2) edge list: pass its transpose `edge_index.T`."
        raise ValueError(
            f"Expected 'edge_index' to be two-dimensional with shape (2, E) "
            f"(got shape {ei.shape}).{hint}"
        )
    if ei.dtype.kind not in "iu":
        raise TypeError(
            f"Expected 'edge_index' to hold integer node indices (got dtype {ei.dtype}). "
            f"Convert it with `edge_index.astype(np.int64)` once you have checked the values "
            f"are whole numbers."
        )
    if ei.shape[1] > 0:
        lo, hi = ei.min(), ei.max()          # in the input dtype: no overflow from a cast
        if lo < 0:
            raise ValueError(
                f"Found negative indices in 'edge_index' (got {int(lo)}, in "
                f"{int((ei < 0).sum())} entries). Node indices must lie in [0, {num_nodes})."
            )
        if hi >= num_nodes:
            raise ValueError(
                f"Found indices in 'edge_index' that are larger than {num_nodes - 1} "
                f"(got {int(hi)}). Please ensure the node features have as many rows as the "
                f"largest index + 1 ({int(hi) + 1}); they have {num_nodes}."
            )
    return np.ascontiguousarray(ei, dtype=np.int64)


def count_self_loops(edge_index: np.ndarray) -> int:
    """Number of edges whose source equals their target."""
    return int((edge_index[0] == edge_index[1]).sum())


def _apply_edge_policy(edge_index, flagged, policy, option, what, alternatives):
    """Keep, drop or reject (``policy``) the edges marked in ``flagged`` (self loops or
    duplicates); the error names the count, the first such edge and the ``option`` to pass."""
    if not flagged.any() or policy == "keep":
        return edge_index
    if policy == "error":
        first = int(np.flatnonzero(flagged)[0])
        raise ValueError(
            f"Found {int(flagged.sum())} {what}e.g. edge {first}: {int(edge_index[0, first])} "
            f"-> {int(edge_index[1, first])}). Pass {option}='remove' {alternatives}."
        )
    return np.ascontiguousarray(edge_index[:, ~flagged])


def _duplicate_mask(edge_index: np.ndarray, num_nodes: int) -> np.ndarray:
    """Bool (E,): True for every edge that repeats an earlier (source, target) pair."""
    key = edge_index[0] * np.int64(max(num_nodes, 1)) + edge_index[1]
    _, first = np.unique(key, return_index=True)
    dup = np.ones(key.shape[0], dtype=bool)
    dup[first] = False
    return dup


def count_duplicate_edges(edge_index: np.ndarray, num_nodes: int) -> int:
    """Number of edges that repeat an earlier ``(source, target)`` pair (all copies but one)."""
    return int(_duplicate_mask(edge_index, num_nodes).sum())


def _check_x(x):
    if sp.issparse(x):
        if x.ndim != 2:
            raise ValueError(f"Expected 'x' to be two-dimensional (N, F) (got shape {x.shape}).")
        if x.dtype.kind not in "biuf":
            raise TypeError(f"Expected 'x' to hold real numbers (got dtype {x.dtype}).")
        with np.errstate(over="ignore"):
            x = x.tocsr().astype(np.float32, copy=True)  # copy: sum_duplicates works in place
        x.sum_duplicates()
        data = x.data
    else:
        if isinstance(x, tuple):  # (several inputs are for array data, not node features)
            raise ValueError(f"Expected 'x' to be one (N, F) array of node features, got a "
                             f"tuple of {len(x)}; a graph model takes one feature matrix")
        x = np.asarray(x)
        if x.ndim != 2:
            raise ValueError(
                f"Expected 'x' to be two-dimensional with shape (N, F) (got shape {x.shape}). "
                f"For one feature per node pass `x.reshape(-1, 1)`."
            )
        if x.dtype.kind not in "biuf":
            raise TypeError(
                f"Expected 'x' to hold real numbers, stored as float32 (got dtype {x.dtype})."
            )
        with np.errstate(over="ignore"):            # out-of-range values -> inf, reported below
            x = np.ascontiguousarray(x, dtype=np.float32)
        data = x
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(
            f"Expected 'x' to have at least one node (row) and one feature (column) (got shape "
            f"{x.shape}); a graph without nodes has nothing to train or predict."
        )
    bad = ~np.isfinite(data)
    if bad.any():
        raise ValueError(
            f"Found {int(bad.sum())} non-finite values (NaN or inf) in 'x' (after conversion to "
            f"float32). Impute or drop them, or rescale values beyond float32's range, first."
        )
    return x


def _check_y(y, n: int):
    if y is None:
        return None
    y = np.asarray(y)
    if y.shape != (n,):
        hint = " Use `y.ravel()` for a column of labels." if y.size == n else ""
        raise ValueError(
            f"Expected 'y' to hold one label per node, shape ({n},) (got shape {y.shape}).{hint}"
        )
    if y.dtype.kind not in "iu":
        raise TypeError(
            f"Expected 'y' to hold integer class labels 0..C-1 (got dtype {y.dtype}). Map "
            f"labels to integers first, e.g. `np.unique(y, return_inverse=True)[1]`."
        )
    if n and y.min() < 0:
        raise ValueError(
            f"Found negative labels in 'y' (got {int(y.min())}, at {int((y < 0).sum())} nodes). "
            f"Labels must be 0..C-1; leave unlabelled nodes out of the masks instead of "
            f"marking them with a negative label."
        )
    return np.ascontiguousarray(y, dtype=np.int64)


def _check_mask(mask, name: str, n: int):
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(
            f"Expected '{name}' to be a boolean mask of shape ({n},) (got dtype {mask.dtype}). "
            f"From node indices `idx` build one with `m = np.zeros({n}, bool); m[idx] = True`."
        )
    if mask.shape != (n,):
        raise ValueError(
            f"Expected '{name}' to have one entry per node, shape ({n},) (got shape {mask.shape})."
        )
    return np.ascontiguousarray(mask)


# --------------------------------------------------------------------------------------------
# Graph
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Graph(GraphSizes):
    """One graph for node classification (transductive split by masks).

    Build it with :meth:`from_arrays` or :meth:`from_dataset`, which validate; the constructor
    itself does not.

    Attributes
    ----------
    x : np.ndarray or scipy.sparse CSR matrix
        float32, shape ``(N, F)``: node features (dense, or CSR for bag-of-words features).
    edge_index : np.ndarray
        int64, shape ``(2, E)``; row 0 is the source, row 1 the target of each edge.
    y : np.ndarray or None
        int64, shape ``(N,)``, class labels ``0..C-1``.
    train_mask, val_mask, test_mask : np.ndarray or None
        bool, shape ``(N,)``, pairwise disjoint.
    """

    x: object
    edge_index: np.ndarray
    y: np.ndarray | None = None
    train_mask: np.ndarray | None = None
    val_mask: np.ndarray | None = None
    test_mask: np.ndarray | None = None

    @classmethod
    def from_arrays(cls, x, edge_index, y=None, train_mask=None, val_mask=None, test_mask=None,
                    *, self_loops: str = "keep", duplicates: str = "keep") -> Graph:
        """Validate the arrays once and build a :class:`Graph`.

        Parameters
        ----------
        x : array_like or scipy.sparse matrix, shape (N, F)
            Node features, real numbers, stored as float32 (sparse input as CSR with sorted,
            summed indices). NaN or inf is an error.
        edge_index : array_like of int, shape (2, E)
            Edges source -> target; indices in ``[0, N)``.
        y : array_like of int, shape (N,), optional
            Class labels, non-negative.
        train_mask, val_mask, test_mask : array_like of bool, shape (N,), optional
            Pairwise disjoint node masks.
        self_loops : {'keep', 'remove', 'error'}, default 'keep'
            What to do with edges ``i -> i``.
        duplicates : {'keep', 'remove', 'error'}, default 'keep'
            What to do with edges repeating an earlier ``(source, target)`` pair;
            ``'remove'`` keeps the first occurrence. Applied after ``self_loops``.

        Raises
        ------
        ValueError, TypeError
            With a message naming the argument, the expectation, what arrived and a fix.
        """
        if self_loops not in SELF_LOOP_OPTIONS:
            raise ValueError(
                f"Expected 'self_loops' to be one of {SELF_LOOP_OPTIONS} (got {self_loops!r})."
            )
        if duplicates not in DUPLICATE_OPTIONS:
            raise ValueError(
                f"Expected 'duplicates' to be one of {DUPLICATE_OPTIONS} (got {duplicates!r})."
            )
        x = _check_x(x)
        n = int(x.shape[0])
        edge_index = check_edge_index(edge_index, n)

        edge_index = _apply_edge_policy(
            edge_index, edge_index[0] == edge_index[1], self_loops, "self_loops",
            "self loops in 'edge_index' (", "to drop them or self_loops='keep' to keep them")
        edge_index = _apply_edge_policy(
            edge_index, _duplicate_mask(edge_index, n), duplicates, "duplicates",
            "duplicate edges in 'edge_index' (edges repeating an earlier (source, target) pair, ",
            "to keep the first of each or duplicates='keep' to keep them all")

        y = _check_y(y, n)
        masks = {name: _check_mask(m, name, n)
                 for name, m in zip(MASK_NAMES, (train_mask, val_mask, test_mask))}
        names = [k for k, m in masks.items() if m is not None]
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                both = int((masks[a] & masks[b]).sum())
                if both:
                    raise ValueError(
                        f"Masks '{a}' and '{b}' overlap on {both} nodes; each node may be in at "
                        f"most one of train/val/test. Remove the shared nodes from one of them, "
                        f"e.g. `{b} &= ~{a}`."
                    )
        return cls(x=x, edge_index=edge_index, y=y, **masks)

    @classmethod
    def from_dataset(cls, dataset, *, self_loops: str = "keep",
                     duplicates: str = "keep") -> Graph:
        """Validate a :class:`nnjit.datasets.GraphDataset` (e.g. ``load_cora()``) into a Graph."""
        return cls.from_arrays(dataset.x, dataset.edge_index, dataset.y, dataset.train_mask,
                               dataset.val_mask, dataset.test_mask,
                               self_loops=self_loops, duplicates=duplicates)

    @property
    def num_classes(self) -> int:
        """``y.max() + 1`` (as PyG); 0 without labels."""
        if self.y is None or self.y.size == 0:
            return 0
        return int(self.y.max()) + 1

    @property
    def is_sparse(self) -> bool:
        """Whether ``x`` is a scipy.sparse CSR matrix."""
        return sp.issparse(self.x)

    @property
    def num_self_loops(self) -> int:
        return count_self_loops(self.edge_index)

    @property
    def num_duplicate_edges(self) -> int:
        return count_duplicate_edges(self.edge_index, self.num_nodes)

    def __repr__(self) -> str:
        kind = "csr" if self.is_sparse else "dense"
        sizes = "/".join("-" if m is None else str(int(m.sum()))
                         for m in (self.train_mask, self.val_mask, self.test_mask))
        return (f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"num_features={self.num_features} ({kind}), num_classes={self.num_classes}, "
                f"train/val/test={sizes})")


# --------------------------------------------------------------------------------------------
# edge utilities
# --------------------------------------------------------------------------------------------

def to_csr(edge_index, num_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group edges by **target** node: the incoming neighbourhoods message passing reduces over.

    Parameters
    ----------
    edge_index : array_like of int, shape (2, E)
    num_nodes : int

    Returns
    -------
    indptr : np.ndarray
        int64 ``(N + 1,)``; the incoming edges of node ``i`` are positions
        ``indptr[i]:indptr[i + 1]``.
    indices : np.ndarray
        int64 ``(E,)``, the **source** node of each edge in that order.
    edge_ids : np.ndarray
        int64 ``(E,)``, the column of ``edge_index`` each position came from, so per-edge
        values (weights, attention) can be permuted alike: ``w_csr = w[edge_ids]``.

    Within a row, edges keep their order in ``edge_index`` (stable sort).
    """
    num_nodes = _check_num_nodes(num_nodes)
    ei = check_edge_index(edge_index, num_nodes)
    edge_ids = np.argsort(ei[1], kind="stable").astype(np.int64, copy=False)
    indices = np.ascontiguousarray(ei[0, edge_ids])
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(ei[1], minlength=num_nodes), out=indptr[1:])
    return indptr, indices, edge_ids


def replace_self_loops(edge_index: np.ndarray, num_nodes: int) -> np.ndarray:
    """The edges without their self loops, followed by exactly one loop per node
    ``0 -> 0, ..., N-1 -> N-1`` (PyG's ``add_remaining_self_loops`` without weights): the
    :math:`A + I` that GCN and GAT propagate over. ``edge_index`` must be validated int64."""
    loops = np.arange(num_nodes, dtype=np.int64)
    return np.concatenate([edge_index[:, edge_index[0] != edge_index[1]],
                           np.stack([loops, loops])], axis=1)


def gcn_norm(edge_index, num_nodes: int,
             add_self_loops: bool = True) -> tuple[np.ndarray, np.ndarray]:
    r"""Symmetric GCN normalisation :math:`\hat D^{-1/2} \hat A \hat D^{-1/2}` as edge weights.

    From Kipf & Welling, "Semi-Supervised Classification with Graph Convolutional Networks"
    (ICLR 2017, https://arxiv.org/abs/1609.02907), as PyG's ``gcn_norm`` with unit edge
    weights and ``flow='source_to_target'``:

    .. math::
        \hat A = A + I, \qquad \hat d_i = \sum_{e:\, \mathrm{target}(e) = i} 1, \qquad
        w_e = \hat d_{\mathrm{source}(e)}^{-1/2} \, \hat d_{\mathrm{target}(e)}^{-1/2}

    With ``add_self_loops=True`` existing self loops are dropped and exactly one loop per node
    is appended after the remaining edges (PyG's ``add_remaining_self_loops``), so
    ``A + I`` has a 1 on the diagonal even where the input already had a loop. Duplicate edges
    count once each (their entries of ``A`` add up). A node with degree 0 gets weight 0
    (``inf`` replaced by 0, as PyG).

    Parameters
    ----------
    edge_index : array_like of int, shape (2, E)
    num_nodes : int
    add_self_loops : bool, default True

    Returns
    -------
    edge_index : np.ndarray
        int64 ``(2, E')``: the input edges (without self loops when adding them) followed by
        the loops ``0 -> 0, ..., N-1 -> N-1``.
    weights : np.ndarray
        float32 ``(E',)``; ``out[target] += weights[e] * x[source]`` is one GCN propagation.

    Shapes: edge_index ``(2, |E|)`` -> ``(2, |E'|)``, weights ``(|E'|,)``.
    """
    num_nodes = _check_num_nodes(num_nodes)
    ei = check_edge_index(edge_index, num_nodes)
    if add_self_loops:
        ei = replace_self_loops(ei, num_nodes)
    deg = np.bincount(ei[1], minlength=num_nodes).astype(np.float64)
    with np.errstate(divide="ignore"):
        dis = deg ** -0.5
    dis[np.isinf(dis)] = 0.0
    weights = (dis[ei[0]] * dis[ei[1]]).astype(np.float32)
    return np.ascontiguousarray(ei), weights
