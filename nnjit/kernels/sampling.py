"""Neighbour sampling (GraphSAGE / PyG ``NeighborLoader``) in compiled code, into fixed buffers.

:func:`sample_subgraph` draws, for a batch of seed nodes, up to ``fanouts[0]`` incoming neighbours
of every seed, then up to ``fanouts[1]`` incoming neighbours of every node first reached in hop 1,
and so on (PyG's ``num_neighbors=[25, 10]``: outermost hop first), and writes the subgraph as a CSR
grouped by target, in local node ids, into buffers the caller allocated once with the sizes from
:func:`max_sizes`. Memory is bounded by those buffers, never by the graph size times the layers.

Layout of the result (``n_nodes, n_edges = sample_subgraph(...)``):

- ``node_ids[:n_nodes]``: global ids of the subgraph's nodes, the ``B`` seeds first and in order
  (local ids ``0..B-1``; the loss counts only these), then the nodes first reached in hop 1, in
  order of discovery, then hop 2, and so on. Every node appears once.
- ``out_indptr[:n_nodes + 1]``, ``out_src[:n_edges]``: the sampled edges grouped by target (local
  ids). Every node of a hop before the last has its sampled incoming edges; the nodes first reached
  in the last hop have none (their features enter only as sources). With ``add_self_loops`` every
  node's segment starts with one self loop, and self loops of the full graph are never sampled
  (so there is exactly one loop per node, as :func:`nnjit.data.graph.gcn_norm`).
- ``local_of`` (global id -> local id, -1 elsewhere) is used as the inverse map while sampling and
  restored to all -1 before returning, touching only the entries set (``O(sample)``, not ``O(N)``).

Sampling is without replacement over a node's incoming edge positions (every incoming edge when
the in-degree is at most the fan-out; ``-1`` means all), so duplicate edges of the full graph can
both be drawn. It uses Robert Floyd's algorithm (Bentley, "Programming pearls: a sample of
brilliance", CACM 1987): ``k`` draws and ``O(k**2)`` comparisons whatever the degree, the chosen
positions kept in ``out_src`` itself until they are mapped to local ids, so nothing is allocated.
Draws come from the model's xoshiro256** state (:mod:`nnjit.kernels.rng`): the same state gives
the same sample.
"""

from __future__ import annotations

from nnjit.kernels._jit import jit
from nnjit.kernels.rng import next_below

#: Return value of :func:`sample_subgraph` (both counts) when a seed is out of range or repeated.
BAD_SEEDS = -1
#: Return value of :func:`sample_subgraph` (both counts) when a buffer is too small.
BUFFER_TOO_SMALL = -2


def max_sizes(batch_size, fanouts, add_self_loops, num_nodes=None, num_edges=None):
    """Upper bounds ``(max_nodes, max_edges)`` of :func:`sample_subgraph`'s output, in plain Python.

    Args:
        batch_size: number of seeds ``B`` (>= 0).
        fanouts: fan-out per hop, outermost first; ``-1`` means every neighbour.
        add_self_loops: whether one self loop per node is added.
        num_nodes, num_edges: sizes of the full graph, optional; they tighten the bounds (a
            subgraph never has more nodes than the graph, nor more sampled edges than it, since
            every edge of it is a distinct edge of the full graph). Required when a fan-out is -1.

    Returns:
        ``(max_nodes, max_edges)``: allocate ``node_ids`` ``(max_nodes,)``, ``out_indptr``
        ``(max_nodes + 1,)`` and ``out_src`` ``(max_edges,)``.

    Raises:
        ValueError: for a negative batch size, a fan-out below -1, or a -1 fan-out without
            ``num_nodes`` and ``num_edges``.
    """
    batch_size = int(batch_size)
    fanouts = [int(f) for f in fanouts]
    if batch_size < 0:
        raise ValueError(f"Expected 'batch_size' >= 0 (got {batch_size}).")
    bad = [f for f in fanouts if f < -1]
    if bad:
        raise ValueError(f"Expected every fan-out to be >= 0, or -1 for all neighbours "
                         f"(got {fanouts}).")
    if -1 in fanouts and (num_nodes is None or num_edges is None):
        raise ValueError(f"A fan-out of -1 (all neighbours) has no bound without the graph: pass "
                         f"num_nodes and num_edges (got fanouts={fanouts}).")
    cap_nodes = None if num_nodes is None else int(num_nodes)
    cap_edges = None if num_edges is None else int(num_edges)
    frontier = batch_size if cap_nodes is None else min(batch_size, cap_nodes)
    nodes = frontier
    edges = 0
    for f in fanouts:
        if f == -1:
            hop_edges = cap_edges
        else:
            hop_edges = frontier * f
            if cap_edges is not None:
                hop_edges = min(hop_edges, cap_edges)
        edges += hop_edges
        frontier = hop_edges                        # each new node came with >= 1 sampled edge
        if cap_nodes is not None:
            frontier = min(frontier, cap_nodes)
        nodes += frontier
    if cap_nodes is not None:
        nodes = min(nodes, cap_nodes)
    if cap_edges is not None:
        edges = min(edges, cap_edges)
    if add_self_loops:
        edges += nodes
    return nodes, edges


@jit
def _release(node_ids, local_of, n_nodes):
    """Set ``local_of`` back to -1 for the first ``n_nodes`` entries of ``node_ids``."""
    for j in range(n_nodes):
        local_of[node_ids[j]] = -1


@jit
def sample_subgraph(indptr, src, seeds, fanouts, rng, node_ids, local_of, out_indptr, out_src,
                    add_self_loops):
    """Sample a multi-hop neighbourhood of ``seeds`` into the caller's buffers (see module doc).

    Args:
        indptr: int64 ``(N + 1,)``; src: int64 ``(E,)``: the full graph's CSR by target.
        seeds: int64 ``(B,)`` distinct global ids in ``[0, N)``.
        fanouts: int64 ``(L,)``, fan-out per hop, outermost first; -1 = all incoming neighbours.
        rng: int64 ``(4,)`` xoshiro256** state, advanced in place.
        node_ids: int64 ``(max_nodes,)``; out_indptr: int64 ``(max_nodes + 1,)``; out_src: int64
            ``(max_edges,)``: outputs (sizes from :func:`max_sizes`).
        local_of: int64 ``(N,)``, all -1 on entry; all -1 again on return.
        add_self_loops: bool.

    Returns:
        ``(n_nodes, n_edges)``; ``(BAD_SEEDS, BAD_SEEDS)`` when a seed is out of range or
        repeated, ``(BUFFER_TOO_SMALL, BUFFER_TOO_SMALL)`` when a buffer cannot hold the sample
        (the buffers' contents are then undefined, ``local_of`` is still restored).
    """
    n_full = indptr.shape[0] - 1
    max_nodes = node_ids.shape[0]
    max_edges = out_src.shape[0]
    n_seeds = seeds.shape[0]
    if n_seeds > max_nodes or out_indptr.shape[0] < n_seeds + 1:
        return BUFFER_TOO_SMALL, BUFFER_TOO_SMALL
    n_nodes = 0
    for j in range(n_seeds):
        g = seeds[j]
        if g < 0 or g >= n_full or local_of[g] != -1:
            _release(node_ids, local_of, n_nodes)
            return BAD_SEEDS, BAD_SEEDS
        local_of[g] = j
        node_ids[j] = g
        n_nodes += 1

    n_edges = 0
    out_indptr[0] = 0
    lo = 0                       # the current hop's targets are local ids lo..hi-1
    hi = n_seeds
    for hop in range(fanouts.shape[0] + 1):
        fan = fanouts[hop] if hop < fanouts.shape[0] else 0
        for t in range(lo, hi):
            g = node_ids[t]
            if add_self_loops:
                if n_edges >= max_edges:
                    _release(node_ids, local_of, n_nodes)
                    return BUFFER_TOO_SMALL, BUFFER_TOO_SMALL
                out_src[n_edges] = t
                n_edges += 1
            start = indptr[g]
            deg = indptr[g + 1] - start
            k = deg if (fan < 0 or fan >= deg) else fan
            if n_edges + k > max_edges:
                _release(node_ids, local_of, n_nodes)
                return BUFFER_TOO_SMALL, BUFFER_TOO_SMALL
            # chosen positions (offsets into the segment) go to out_src[n_edges:n_edges + k]
            if k == deg:
                for m in range(k):
                    out_src[n_edges + m] = m
            else:
                for m in range(k):                    # Floyd: j runs over deg-k .. deg-1
                    jj = deg - k + m
                    r = next_below(rng, jj + 1)
                    for q in range(m):
                        if out_src[n_edges + q] == r:
                            r = jj                    # r already taken: take jj (new by design)
                            break
                    out_src[n_edges + m] = r
            kept = 0
            for m in range(k):
                s = src[start + out_src[n_edges + m]]
                if add_self_loops and s == g:
                    continue                          # the added loop replaces the graph's own
                loc = local_of[s]
                if loc == -1:
                    if n_nodes >= max_nodes or n_nodes + 1 >= out_indptr.shape[0]:
                        _release(node_ids, local_of, n_nodes)
                        return BUFFER_TOO_SMALL, BUFFER_TOO_SMALL
                    loc = n_nodes
                    local_of[s] = loc
                    node_ids[loc] = s
                    n_nodes += 1
                out_src[n_edges + kept] = loc
                kept += 1
            n_edges += kept
            out_indptr[t + 1] = n_edges
        lo = hi
        hi = n_nodes
    _release(node_ids, local_of, n_nodes)
    return n_nodes, n_edges


@jit
def add_self_loops(indptr, src, n_nodes, out_indptr, out_src):
    """The CSR (by target) of ``indptr``/``src``'s first ``n_nodes`` targets with each
    segment's self loops replaced by one loop, placed first (a sampled subgraph's :math:`A + I`;
    :func:`nnjit.data.graph.replace_self_loops` is the same for a whole graph's edge_index).
    ``out_src`` needs room for the edges plus ``n_nodes``. Returns the edge count."""
    e = 0
    out_indptr[0] = 0
    for i in range(n_nodes):
        out_src[e] = i
        e += 1
        for k in range(indptr[i], indptr[i + 1]):
            if src[k] != i:
                out_src[e] = src[k]
                e += 1
        out_indptr[i + 1] = e
    return e
