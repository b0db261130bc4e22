"""The graph family: message passing over a CSR grouped by target (GCN, GraphSAGE, GAT).

aux0 of every graph op names the CSR it reads (:data:`GRAPH_RAW`, :data:`GRAPH_LOOPS`,
:data:`GRAPH_FEATURES`: the table of :mod:`nnjit.graph.graph_data`). Edge slots hold one row per
edge of that CSR, in its order; node slots one row per node. The family is not core: only a
program that records graph ops compiles it (with its job loader, which samples subgraphs for
:class:`nnjit.data.neighbor_loader.NeighborLoader`). Its kernels (:mod:`nnjit.kernels.graph_ops`)
are inlined into one compiled function per direction, as the activations.

The recorders take the graph's ``Edges`` first (what a graph model's ``forward`` receives), as
the references take the op's graph.
"""

from nnjit.graph.graph_data import (
    EDGE_WEIGHTS_GCN,
    EDGE_WEIGHTS_MEAN,
    G_MODE,
    G_WEIGHTS_READY,
    GRAPH_FEATURES,
    GRAPH_LOOPS,
    GRAPH_RAW,
    MODE_SAMPLED,
    N_CSR,
    csr_of,
)
from nnjit.graph.sampled_batch import load_graph_job
from nnjit.kernels import dense as kd
from nnjit.kernels import graph_ops as kg
from nnjit.kernels._jit import inlined, jit
from nnjit.ops import graph_reference as ref
from nnjit.ops.context import (
    CTX_GDATA,
    CTX_GRADS,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SLOTS,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape.records import (
    ACCUMULATE,
    NEEDS_GRAD,
    R_AUX0,
    R_AUX1,
    R_FLAGS,
    R_IN0,
    R_IN1,
    R_IN2,
    R_OUT,
)
from nnjit.tape.slot_views import slot_flat, slot_view

__all__ = ["EDGE_WEIGHTS_GCN", "EDGE_WEIGHTS_MEAN", "GRAPH_FEATURES", "GRAPH_LOOPS", "GRAPH_RAW",
           "FAMILY", "SPECS"]

FIRST_OPCODE = 70
(_SPMM, _EDGE_WEIGHTS, _SCATTER_MAX, _SEGMENT_SOFTMAX, _HEAD_DOT, _EDGE_GATHER_ADD, _CSR_DENSE,
 _HEAD_MEAN) = range(FIRST_OPCODE, FIRST_OPCODE + 8)


# -- recorders (the Edges methods and module functions GNN layers call) ------------------------
def spmm(edges, x, weights=None, bias=None, *, csr="raw"):
    """``out[i] = sum over edges j -> i of weights[e] * x[j] (+ bias)`` (Edges.propagate)."""
    return edges.propagate(x, csr, weights, bias)


def edge_weights(edges, *, kind="gcn", csr="raw"):
    """Edge weights (E, 1) of ``kind`` "gcn" or "mean" (Edges.weights)."""
    return edges.weights(kind, csr)


def scatter_max(edges, x, *, csr="raw"):
    """Per-column max over each node's incoming edges (Edges.max_aggregate)."""
    return edges.max_aggregate(x, csr)


def segment_softmax(edges, scores, *, csr="raw"):
    """Softmax of (E, H) edge scores over each node's incoming edges (Edges.softmax)."""
    return edges.softmax(scores, csr)


def head_dot(edges, x, att, *, heads):
    """(N, H): per head h, the dot product of x's columns h*C:(h+1)*C with att's."""
    return x.tape.record(_HEAD_DOT, [x, att], x.rows, heads, aux=(GRAPH_RAW,))


def edge_gather_add(edges, a_src, a_dst, *, csr="raw"):
    """Per edge j -> i: ``a_src[j] + a_dst[i]`` (Edges.gather_add)."""
    return edges.gather_add(a_src, a_dst, csr)


def csr_dense(edges, features, weight, bias=None):
    """``X @ weight.T + bias`` of sparse features X (its non-zeros are the op's in0)."""
    return features.dense(weight, bias)


def head_mean(edges, x, bias=None, *, heads):
    """(N, C): the mean of x's H column blocks of width C (plus ``bias`` (1, C))."""
    return x.tape.record(_HEAD_MEAN, [x, bias], x.rows, x.cols // heads, aux=(GRAPH_RAW,))


_CSR_AUX = "which CSR: GRAPH_RAW (0), GRAPH_LOOPS (1)"
SPECS = (
    OpSpec("SPMM", 3, "(N,H*C),(E,H)?,(1,H*C)?->(N,H*C)", ref.spmm, spmm, grad_inputs=(0, 1, 2),
           aux={"aux0": _CSR_AUX}, graph=True),
    OpSpec("EDGE_WEIGHTS", 0, "->(E,1)", ref.edge_weights, edge_weights, hyper=("kind",),
           sample_hyper={"kind": ("gcn", "mean")},
           aux={"aux0": _CSR_AUX, "aux1": "EDGE_WEIGHTS_GCN (0) or EDGE_WEIGHTS_MEAN (1)"},
           graph=True),
    # (in1 of its record is the argmax slot (N, F) its recorder makes)
    OpSpec("SCATTER_MAX", 1, "(N,F)->(N,F)", ref.scatter_max, scatter_max, grad_inputs=(0,),
           aux={"aux0": _CSR_AUX}, graph=True),
    OpSpec("SEGMENT_SOFTMAX", 1, "(E,H)->(E,H)", ref.segment_softmax, segment_softmax,
           grad_inputs=(0,), aux={"aux0": _CSR_AUX}, graph=True),
    OpSpec("HEAD_DOT", 2, "(N,H*C),(1,H*C)->(N,H)", ref.head_dot, head_dot, hyper=("heads",),
           sample_hyper={"heads": 2}, grad_inputs=(0, 1), aux={"aux0": "GRAPH_RAW (unused)"},
           graph=True),
    OpSpec("EDGE_GATHER_ADD", 2, "(N,H),(N,H)->(E,H)", ref.edge_gather_add, edge_gather_add,
           grad_inputs=(0, 1), aux={"aux0": _CSR_AUX}, graph=True),
    OpSpec("CSR_DENSE", 3, "(Z,1),(O,F),(1,O)?->(N,O)", ref.csr_dense, csr_dense,
           grad_inputs=(1, 2),
           aux={"aux0": "GRAPH_FEATURES (2): the sparse feature matrix (N, F) with Z non-zeros",
                "aux1": "slot of the transposed weight's scratch (F, O)"},
           graph=True),
    OpSpec("HEAD_MEAN", 2, "(N,H*C),(1,C)?->(N,C)", ref.head_mean, head_mean, hyper=("heads",),
           sample_hyper={"heads": 2}, grad_inputs=(0, 1), aux={"aux0": "GRAPH_RAW (unused)"},
           graph=True),
)
_END = FIRST_OPCODE + len(SPECS)

# -- compiled ----------------------------------------------------------------------------------
_spmm_f, _spmm_bx, _spmm_bw = (inlined(kg.spmm_forward), inlined(kg.spmm_backward_x),
                               inlined(kg.spmm_backward_w))
_max_f, _max_b = inlined(kg.scatter_max_forward), inlined(kg.scatter_max_backward)
_softmax_f, _softmax_b = (inlined(kg.segment_softmax_forward),
                          inlined(kg.segment_softmax_backward))
_dot_f, _dot_bx, _dot_ba = (inlined(kg.head_dot_forward), inlined(kg.head_dot_backward_x),
                            inlined(kg.head_dot_backward_att))
_gather_f, _gather_b = (inlined(kg.edge_gather_add_forward),
                        inlined(kg.edge_gather_add_backward))
_mean_f, _mean_b = inlined(kg.head_mean_forward), inlined(kg.head_mean_backward)
_csr_f, _csr_bw = inlined(kg.csr_dense_forward), inlined(kg.csr_dense_backward_w)
_gcn_w, _mean_w = inlined(kg.gcn_norm_weights), inlined(kg.mean_weights)
_bias_b = inlined(kd.dense_backward_bias)


@jit(inline="always")
def _add_bias(out, bias):
    for r in range(out.shape[0]):
        for c in range(out.shape[1]):
            out[r, c] += bias[c]


@jit
def graph_forward(op, i, rows, records, slots, values, gdata):
    """Replay graph record ``i`` forward (node slots have ``rows`` rows: the whole graph).

    Returns False, computing nothing, for an opcode no branch handles (the run stops): checked
    before aux0 is read as a CSR number.
    """
    if not _SPMM <= op < _END:
        return False
    a = records[i, R_IN0]
    b = records[i, R_IN1]
    c = records[i, R_IN2]
    o = records[i, R_OUT]
    indptr, src = csr_of(gdata, records[i, R_AUX0])
    out = slot_view(values, slots, o, rows)
    if op == _SPMM:
        x = slot_view(values, slots, a, rows)
        w = slot_view(values, slots, b, rows) if b >= 0 else x
        _spmm_f(indptr, src, w, x, out, b >= 0)
        if c >= 0:
            _add_bias(out, slot_flat(values, slots, c, rows))
    elif op == _EDGE_WEIGHTS:
        kind = records[i, R_AUX1]
        bit = 1 << (kind * N_CSR + records[i, R_AUX0])
        sampled = gdata[G_MODE] == MODE_SAMPLED
        if sampled or (gdata[G_WEIGHTS_READY] & bit) == 0:
            if kind == EDGE_WEIGHTS_GCN:
                _gcn_w(indptr, src, out)
            else:
                _mean_w(indptr, out)
            if not sampled:
                gdata[G_WEIGHTS_READY] |= bit
    elif op == _SCATTER_MAX:
        _max_f(indptr, src, slot_view(values, slots, a, rows), out,
               slot_view(values, slots, b, rows))
    elif op == _SEGMENT_SOFTMAX:
        _softmax_f(indptr, slot_view(values, slots, a, rows), out)
    elif op == _HEAD_DOT:
        _dot_f(slot_view(values, slots, a, rows), slot_flat(values, slots, b, rows), out)
    elif op == _EDGE_GATHER_ADD:
        _gather_f(indptr, src, slot_view(values, slots, a, rows),
                  slot_view(values, slots, b, rows), out)
    elif op == _CSR_DENSE:
        x_indptr, x_indices = csr_of(gdata, GRAPH_FEATURES)
        bias = slot_flat(values, slots, c if c >= 0 else b, rows)
        w_t = slot_view(values, slots, records[i, R_AUX1], rows)
        _csr_f(x_indptr, x_indices, slot_flat(values, slots, a, rows),
               slot_view(values, slots, b, rows), w_t, bias, out, c >= 0)
    elif op == _HEAD_MEAN:
        _mean_f(slot_view(values, slots, a, rows), out)
        if b >= 0:
            _add_bias(out, slot_flat(values, slots, b, rows))
    else:
        return False
    return True


@jit
def graph_backward(op, i, rows, records, slots, values, grads, gdata):
    """Replay graph record ``i`` backward: write or accumulate its inputs' gradients.

    Returns False, computing nothing, for an opcode no branch handles (checked before aux0 is
    read as a CSR number).
    """
    if not _SPMM <= op < _END:
        return False
    a = records[i, R_IN0]
    b = records[i, R_IN1]
    c = records[i, R_IN2]
    o = records[i, R_OUT]
    f = records[i, R_FLAGS]
    need_a = (f & NEEDS_GRAD[0]) != 0
    need_b = (f & NEEDS_GRAD[1]) != 0
    need_c = (f & NEEDS_GRAD[2]) != 0
    acc_a = (f & ACCUMULATE[0]) != 0
    acc_b = (f & ACCUMULATE[1]) != 0
    acc_c = (f & ACCUMULATE[2]) != 0
    indptr, src = csr_of(gdata, records[i, R_AUX0])
    dy = slot_view(grads, slots, o, rows)
    if op == _SPMM:
        x = slot_view(values, slots, a, rows)
        w = slot_view(values, slots, b, rows) if b >= 0 else x
        if need_a:
            _spmm_bx(indptr, src, w, dy, slot_view(grads, slots, a, rows), b >= 0, acc_a)
        if need_b:
            _spmm_bw(indptr, src, x, dy, slot_view(grads, slots, b, rows), acc_b)
        if c >= 0 and need_c:
            _bias_b(dy, slot_flat(grads, slots, c, rows), acc_c)
    elif op == _SCATTER_MAX:
        if need_a:
            _max_b(slot_view(values, slots, b, rows), src, dy, slot_view(grads, slots, a, rows),
                   acc_a)
    elif op == _SEGMENT_SOFTMAX:
        if need_a:
            _softmax_b(indptr, slot_view(values, slots, o, rows), dy,
                       slot_view(grads, slots, a, rows), acc_a)
    elif op == _HEAD_DOT:
        if need_a:
            _dot_bx(slot_flat(values, slots, b, rows), dy, slot_view(grads, slots, a, rows), acc_a)
        if need_b:
            _dot_ba(slot_view(values, slots, a, rows), dy, slot_flat(grads, slots, b, rows), acc_b)
    elif op == _EDGE_GATHER_ADD:
        da = slot_view(grads, slots, a, rows)
        db = slot_view(grads, slots, b, rows)
        _gather_b(indptr, src, dy, da, db, acc_a, acc_b, need_a, need_b)
    elif op == _CSR_DENSE:
        x_indptr, x_indices = csr_of(gdata, GRAPH_FEATURES)
        if need_b:
            _csr_bw(x_indptr, x_indices, slot_flat(values, slots, a, rows), dy,
                    slot_view(grads, slots, b, rows),
                    slot_view(grads, slots, records[i, R_AUX1], rows), acc_b)
        if c >= 0 and need_c:
            _bias_b(dy, slot_flat(grads, slots, c, rows), acc_c)
    elif op == _HEAD_MEAN:
        if need_a:
            _mean_b(dy, slot_view(grads, slots, a, rows), acc_a)
        if b >= 0 and need_b:
            _bias_b(dy, slot_flat(grads, slots, b, rows), acc_b)
    elif op == _EDGE_WEIGHTS:
        pass  # no inputs: nothing to differentiate
    else:
        return False
    return True


@dispatcher
def forward(op, i, ctx):
    return graph_forward(op, i, ctx[CTX_ROWS], ctx[CTX_RECORDS], ctx[CTX_SLOTS],
                         ctx[CTX_VALUES], ctx[CTX_GDATA])


@dispatcher
def backward(op, i, ctx):
    return graph_backward(op, i, ctx[CTX_ROWS], ctx[CTX_RECORDS], ctx[CTX_SLOTS],
                          ctx[CTX_VALUES], ctx[CTX_GRADS], ctx[CTX_GDATA])


FAMILY = register(OpFamily("graph", SPECS, forward, backward, first_opcode=FIRST_OPCODE,
                           load_job=load_graph_job))
