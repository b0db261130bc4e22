"""Loading a job of a graph program: full batch as any batch, or a sampled subgraph.

For neighbour-sampled training (:class:`nnjit.data.neighbor_loader.NeighborLoader`) a job's rows
are seed node ids. :func:`load_graph_job` samples their multi-hop neighbourhood into the graph
data's buffers (:func:`nnjit.kernels.sampling.sample_subgraph`), builds the self-loop CSR when the
model reads it, gathers the subgraph's features into the input slot (seeds first), writes the
seeds' labels and -1 (ignored) for every other node, and sets the row counts of the edge slots.
Node slots then hold the subgraph's nodes and the loss counts the seeds only. All buffers were
sized once from the batch size and fan-outs: memory is bounded by them, not by the graph.
"""

from nnjit.engine.batch_loading import load_batch, load_rows
from nnjit.engine.fields import L_INPUT, L_TARGET
from nnjit.graph.graph_data import (
    G_CSR,
    G_FANOUTS,
    G_FEATURES_SLOT,
    G_FULL,
    G_INPUT_LOADED,
    G_LOCAL_OF,
    G_MAX_EDGES,
    G_MAX_NODES,
    G_MODE,
    G_NEED_LOOPS,
    G_NODE_IDS,
    G_NUM_NODES,
    G_SEEDS,
    GRAPH_LOOPS,
    GRAPH_RAW,
    MODE_FULL_BATCH,
    MODE_SAMPLED,
)
from nnjit.kernels._jit import jit
from nnjit.kernels.sampling import add_self_loops, sample_subgraph
from nnjit.kernels.views import view1d
from nnjit.tape.arena import S_FLAGS, S_ROWS, SLOT_EDGES_LOOPS, SLOT_EDGES_RAW
from nnjit.tape.slot_views import slot_view


@jit
def load_graph_job(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots,
                   layout, cfg, gdata, rng):
    """A job of a graph program; returns the rows of its node slots (see the module doc). The
    arguments are every job loader's (:func:`nnjit.engine.dispatch.loader_signature`)."""
    if gdata[G_MODE] == MODE_FULL_BATCH:  # row i is node i: never permuted
        if gdata[G_INPUT_LOADED] == 0:  # the features, once per call (see G_INPUT_LOADED)
            load_batch(src_x, perm, False, start, rows,
                        slot_view(values, slots, layout[L_INPUT], rows))
            gdata[G_INPUT_LOADED] = 1
        if with_targets:
            load_batch(src_y, perm, False, start, rows,
                        slot_view(values, slots, layout[L_TARGET], rows))
        return rows
    if gdata[G_MODE] != MODE_SAMPLED:
        return load_rows(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots,
                         layout, cfg, gdata, rng)
    num_nodes = gdata[G_NUM_NODES]
    max_nodes = gdata[G_MAX_NODES]
    max_edges = gdata[G_MAX_EDGES]
    seeds = view1d(gdata, gdata[G_SEEDS], rows)
    for r in range(rows):
        k = perm[start + r] if use_perm else start + r
        seeds[r] = int(src_x[k, 0])
    full_indptr = view1d(gdata, gdata[G_FULL], num_nodes + 1)
    full_src = view1d(gdata, gdata[G_FULL + 1], full_indptr[num_nodes])
    fanouts = view1d(gdata, gdata[G_FANOUTS], gdata[G_FANOUTS + 1])
    node_ids = view1d(gdata, gdata[G_NODE_IDS], max_nodes)
    local_of = view1d(gdata, gdata[G_LOCAL_OF], num_nodes)
    raw = G_CSR + 3 * GRAPH_RAW
    raw_indptr = view1d(gdata, gdata[raw], max_nodes + 1)
    raw_src = view1d(gdata, gdata[raw + 1], max_edges)
    n_nodes, n_edges = sample_subgraph(full_indptr, full_src, seeds, fanouts, rng, node_ids,
                                       local_of, raw_indptr, raw_src, False)
    if n_nodes < 0:
        raise ValueError("neighbour sampling failed: repeated or out-of-range seed nodes")
    gdata[raw + 2] = n_nodes
    n_loop_edges = 0
    if gdata[G_NEED_LOOPS] != 0:
        loops = G_CSR + 3 * GRAPH_LOOPS
        n_loop_edges = add_self_loops(raw_indptr, raw_src, n_nodes,
                                      view1d(gdata, gdata[loops], max_nodes + 1),
                                      view1d(gdata, gdata[loops + 1], max_edges + max_nodes))
        gdata[loops + 2] = n_nodes
    features = slot_view(values, slots, gdata[G_FEATURES_SLOT], 0)
    x = slot_view(values, slots, layout[L_INPUT], n_nodes)
    for j in range(n_nodes):
        g = node_ids[j]
        for c in range(x.shape[1]):
            x[j, c] = features[g, c]
    if with_targets:
        t = slot_view(values, slots, layout[L_TARGET], n_nodes)
        for r in range(rows):
            k = perm[start + r] if use_perm else start + r
            t[r, 0] = src_y[k, 0]
        ignored = t.dtype.type(-1.0)
        for r in range(rows, n_nodes):
            t[r, 0] = ignored
    for s in range(slots.shape[0]):
        flags = slots[s, S_FLAGS]
        if flags & SLOT_EDGES_RAW:
            slots[s, S_ROWS] = n_edges
        elif flags & SLOT_EDGES_LOOPS:
            slots[s, S_ROWS] = n_loop_edges
    return n_nodes
