"""The graph family: message passing over a CSR grouped by target (GCN, GraphSAGE, GAT).

aux0 of every graph op names the CSR it reads (:data:`GRAPH_RAW`, :data:`GRAPH_LOOPS`,
:data:`GRAPH_FEATURES`: the table of :mod:`nnjit.graph.graph_data`). Edge slots hold one row per
edge of that CSR, in its order; node slots one row per node. The family is not core: only a
program that records graph ops compiles it (with its job loader, which samples subgraphs for
:class:`nnjit.data.neighbor_loader.NeighborLoader`). Its kernels (:mod:`nnjit.kernels.graph_ops`)
are inlined into one compiled function per direction, as the activations.

The recorders take the graph's ``Edges`` first (what a graph model's ``forward`` receives), as
the references take the op's graph. They hold the recording (shape checks, the tape records, the
edge weights shared per tape); :class:`nnjit.graph.edges.Edges`' methods and
``SparseFeatures.dense``, which GNN layers call, delegate to them.
"""

import weakref

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
from nnjit.tape.tape import SlotSpec, Tensor

__all__ = ["EDGE_SETS", "EDGE_WEIGHTS_GCN", "EDGE_WEIGHTS_MEAN", "GRAPH_FEATURES", "GRAPH_LOOPS",
           "GRAPH_RAW", "FAMILY", "SPECS", "WEIGHT_KINDS", "csr_dense", "csr_number",
           "edge_gather_add", "edge_weights", "head_dot", "head_mean", "scatter_max",
           "segment_softmax", "spmm"]

FIRST_OPCODE = 70
(_SPMM, _EDGE_WEIGHTS, _SCATTER_MAX, _SEGMENT_SOFTMAX, _HEAD_DOT, _EDGE_GATHER_ADD, _CSR_DENSE,
 _HEAD_MEAN) = range(FIRST_OPCODE, FIRST_OPCODE + 8)


# -- recorders (what Edges' methods and SparseFeatures.dense call) -----------------------------
#: The edge sets a recorder's ``csr`` names: the graph's edges, or its edges without self loops
#: plus exactly one per node (GCN's and GAT's A + I).
EDGE_SETS = {"raw": GRAPH_RAW, "loops": GRAPH_LOOPS}
#: The edge weights :func:`edge_weights` records: symmetric GCN normalisation, 1 / in-degree.
WEIGHT_KINDS = {"gcn": EDGE_WEIGHTS_GCN, "mean": EDGE_WEIGHTS_MEAN}

# tape -> {(kind, CSR): slot} of the edge weights recorded on it, shared by every layer. Slots,
# not Tensors: a Tensor holds its tape, which would keep the weak key alive.
_weights_recorded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def csr_number(csr: str) -> int:
    """The CSR (aux0) of the edge set named ``csr`` (a key of :data:`EDGE_SETS`)."""
    if csr not in EDGE_SETS:
        raise ValueError(f"unknown edge set {csr!r}; valid: {', '.join(EDGE_SETS)}")
    return EDGE_SETS[csr]


def _check_nodes(edges, x, where: str) -> None:
    rows = edges.structure.max_rows  # all nodes, or the largest sampled subgraph
    if int(x.rows) != rows:
        raise ValueError(f"{where}: expected node features with {rows} rows (one per node), "
                         f"got shape ({int(x.rows)}, {x.cols})")


def spmm(edges, x, weights=None, bias=None, *, csr="raw"):
    """``out[i] = sum over edges j -> i of weights[e] * x[j] (+ bias)``, per head when
    ``weights`` is (E, H) and x is (N, H * C); unit weights when None (Edges.propagate)."""
    where = x.tape.current_owner or "propagate"
    _check_nodes(edges, x, where)
    k = csr_number(csr)
    n_edges = edges.structure.num_edges[k]
    if weights is not None and (weights.rows != n_edges or x.cols % weights.cols):
        raise ValueError(f"{where}: edge weights of shape {weights.shape} do not fit "
                         f"{n_edges} edges and {x.cols} feature columns")
    return x.tape.record(_SPMM, [x, weights, bias], x.rows, x.cols, aux=(k,))


def edge_weights(edges, *, kind="gcn", csr="raw"):
    """Edge weights (E, 1) of ``kind`` "gcn" (symmetric normalisation, for "loops") or "mean"
    (1 / in-degree), recorded once per tape and shared by every layer (Edges.weights)."""
    if kind not in WEIGHT_KINDS:
        raise ValueError(f"unknown edge weights kind {kind!r}; valid: {', '.join(WEIGHT_KINDS)}")
    tape = edges.tape
    k = csr_number(csr)
    key = (WEIGHT_KINDS[kind], k)
    recorded = _weights_recorded.setdefault(tape, {})
    if key not in recorded:
        recorded[key] = tape.record(_EDGE_WEIGHTS, [], edges.structure.num_edges[k], 1,
                                    aux=(k, key[0]), out_requires_grad=False, out_edges=k).slot
    return Tensor(tape, recorded[key])


def scatter_max(edges, x, *, csr="raw"):
    """``out[i] = max over edges j -> i of x[j]`` per column, 0 without incoming edges
    (Edges.max_aggregate). Its record's in1 is an argmax slot (N, F) made here."""
    _check_nodes(edges, x, x.tape.current_owner or "max_aggregate")
    k = csr_number(csr)
    arg = x.tape._new_slot_like(x, "max.argmax")
    return x.tape.record(_SCATTER_MAX, [x], x.rows, x.cols, aux=(k,), extra_inputs=[arg])


def segment_softmax(edges, scores, *, csr="raw"):
    """Softmax of (E, H) edge scores over each node's incoming edges, per head
    (Edges.softmax)."""
    return scores.tape.record(_SEGMENT_SOFTMAX, [scores], scores.rows, scores.cols,
                              aux=(csr_number(csr),))


def head_dot(edges, x, att, *, heads):
    """(N, H): per head h, the dot product of x's columns h*C:(h+1)*C with att's."""
    return x.tape.record(_HEAD_DOT, [x, att], x.rows, heads, aux=(GRAPH_RAW,))


def edge_gather_add(edges, a_src, a_dst, *, csr="raw"):
    """Per edge j -> i: ``a_src[j] + a_dst[i]`` (E, H) (Edges.gather_add)."""
    k = csr_number(csr)
    return a_src.tape.record(_EDGE_GATHER_ADD, [a_src, a_dst], edges.structure.num_edges[k],
                             a_src.cols, aux=(k,), out_edges=k)


def csr_dense(edges, features, weight, bias=None):
    """``X @ weight.T + bias`` as a dense (N, out) tensor, X the sparse features (its non-zeros
    are the op's in0) (SparseFeatures.dense).

    The op keeps a transposed copy of the weight (its gradient, in the gradient arena) in a
    scratch slot (F, out), named by aux1, so every non-zero reads one contiguous row."""
    tape = features.tape
    scratch = tape._new_slot(SlotSpec(weight.cols, weight.rows, name="csr_dense.w_t"))
    return tape.record(_CSR_DENSE, [features.nonzeros, weight, bias], features.rows,
                       weight.rows, aux=(GRAPH_FEATURES, scratch.slot))


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
