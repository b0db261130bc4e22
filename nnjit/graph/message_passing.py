"""The interpreter's graph ops: one compiled forward and one backward dispatcher.

Only the graph build of the interpreter (:func:`nnjit.graph.interpreter.execute_graph`) calls
these, so an MLP never compiles them. The kernels (``nnjit/kernels/graph_ops.py``) are inlined
here from their single source, as in :mod:`nnjit.kernels.families`: numba's compile cost is
per compiled function.
"""

from nnjit.graph.graph_data import G_MODE, G_WEIGHTS_READY, MODE_SAMPLED, N_CSR, csr_of
from nnjit.graph.opcodes import (
    ACCUMULATE,
    EDGE_WEIGHTS_GCN,
    GRAPH_FEATURES,
    NEEDS_GRAD,
    R_AUX0,
    R_AUX1,
    R_FLAGS,
    R_IN0,
    R_IN1,
    R_IN2,
    R_OPCODE,
    R_OUT,
    Opcode,
)
from nnjit.graph.slot_views import slot_flat, slot_view
from nnjit.kernels import dense as kd
from nnjit.kernels import graph_ops as kg
from nnjit.kernels._jit import inlined, jit

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

_SPMM = int(Opcode.SPMM)
_EDGE_WEIGHTS = int(Opcode.EDGE_WEIGHTS)
_SCATTER_MAX = int(Opcode.SCATTER_MAX)
_SEGMENT_SOFTMAX = int(Opcode.SEGMENT_SOFTMAX)
_HEAD_DOT = int(Opcode.HEAD_DOT)
_EDGE_GATHER_ADD = int(Opcode.EDGE_GATHER_ADD)
_CSR_DENSE = int(Opcode.CSR_DENSE)
_HEAD_MEAN = int(Opcode.HEAD_MEAN)


@jit(inline="always")
def _add_bias(out, bias):
    for r in range(out.shape[0]):
        for c in range(out.shape[1]):
            out[r, c] += bias[c]


@jit
def graph_forward(i, rows, records, slots, values, gdata):
    """Replay graph record ``i`` forward (node slots have ``rows`` rows: the whole graph).

    Returns False, computing nothing, for an opcode no branch handles (the interpreter stops).
    """
    op = records[i, R_OPCODE]
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
def graph_backward(i, rows, records, slots, values, grads, gdata):
    """Replay graph record ``i`` backward: write or accumulate its inputs' gradients.

    Returns False, computing nothing, for an opcode no branch handles (the interpreter stops).
    """
    op = records[i, R_OPCODE]
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
