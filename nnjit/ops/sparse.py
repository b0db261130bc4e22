"""The sparse family: SPARSE_LINEAR, a first layer whose input is the rows of a CSR matrix.

``out = X[ids] @ W + b``: input 0 holds each batch row's number in the CSR matrix the program's
graph data carries (:mod:`nnjit.graph.csr_rows`; integer bits, as an embedding's indices), W is
``(in_features, out_features)`` (scikit-learn's ``coefs_[0]`` layout: each non-zero reads and,
backward, adds into one contiguous row of W) and b ``(1, out_features)``. Backward produces the
weight and bias gradients only: X is data. The products are :mod:`nnjit.kernels.sparse_rows`'
(the row kernels the graph family's CSR_DENSE shares). A row number outside the matrix, or a
matrix whose column count is not the layer's ``in_features``, is never read: the op reports its
record (:func:`nnjit.ops.report_bad_input`) and the task stops with a message saying so.

Not core: only a program that records SPARSE_LINEAR compiles this family (an entry of the
dispatch table); the compiled loop and the batch loader are a dense fit's.
"""

from nnjit.graph.csr_rows import CSR_COLS, CSR_ROWS, csr_rows
from nnjit.graph.graph_data import G_MODE, MODE_CSR_ROWS
from nnjit.kernels import dense as kd
from nnjit.kernels import sparse_rows as ks
from nnjit.kernels._jit import inlined
from nnjit.ops.context import (
    CTX_GDATA,
    CTX_GRADS,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SLOTS,
    CTX_VALUES,
    dispatcher,
    report_bad_input,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_FLAGS, R_IN0, R_IN1, R_IN2, R_OUT
from nnjit.tape.slot_views import int_slot_view, slot_flat, slot_view
from nnjit.tape.tape import Tensor

FIRST_OPCODE = 140
_SPARSE_LINEAR = FIRST_OPCODE
_NEED_W, _NEED_B = NEEDS_GRAD[1], NEEDS_GRAD[2]
_ACC_W, _ACC_B = ACCUMULATE[1], ACCUMULATE[2]

#: The test that checks SPARSE_LINEAR against a dense Linear (the generic op check cannot draw
#: its input: rows of a CSR matrix in the graph data).
COVERING_TEST = "tests/sklearn/test_sparse_input.py::test_sparse_linear_matches_linear"


def sparse_linear(rows, weight, bias=None):
    """Record ``X[rows] @ weight + bias``: ``rows`` an integer tensor (B, 1) of row numbers of
    the program's CSR input, ``weight`` (F, O), ``bias`` (1, O) or None; output (B, O)."""
    tape = getattr(rows, "tape", None)
    where = (tape.current_owner if tape is not None else "") or "sparse_linear"
    if not isinstance(rows, Tensor) or not rows.is_integer or rows.cols != 1:
        raise TypeError(f"{where}: the input must be an integer tensor of row numbers (B, 1) "
                        f"of a sparse input, got {rows!r}")
    inputs = [rows, weight] + ([bias] if bias is not None else [])
    return tape.record(_SPARSE_LINEAR, inputs, rows.rows, weight.cols)


def bad_rows_message(program, i: int) -> str:
    """What record ``i`` could not read: a row number outside the sparse input, or a sparse input
    whose columns are not the layer's input features."""
    if program.gdata[G_MODE] != MODE_CSR_ROWS:
        return ("the program was given no sparse input (nnjit.sklearn's MLP estimators fit "
                "a CSR X through it)")
    node = program.nodes[i]
    features = int(program.tape.slots[node.inputs[1]].rows)
    rows, cols = int(program.gdata[CSR_ROWS]), int(program.gdata[CSR_COLS])
    if cols != features:
        return (f"the sparse input has {cols} columns, the layer takes {features} input "
                "features")
    ids = program.integer_view(node.inputs[0])
    bad = ids[(ids < 0) | (ids >= rows)]
    value = f"row {int(bad.flat[0])}" if bad.size else "a row"
    return f"{value} of the sparse input was asked for; it has rows 0..{rows - 1}"


SPECS = (
    OpSpec("SPARSE_LINEAR", 3, "(B,1),(F,O),(1,O)?->(B,O)", None, sparse_linear,
           grad_inputs=(1, 2), int_inputs=(0,), bad_input=bad_rows_message,
           reference_note=f"checked against a dense Linear by {COVERING_TEST}"),
)

_forward_kernel = inlined(ks.sparse_linear_forward)
_backward_kernel = inlined(ks.sparse_linear_backward_w)
_bias_backward = inlined(kd.dense_backward_bias)


@dispatcher
def forward(op, i, ctx):
    handled = op == _SPARSE_LINEAR
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        n_rows, n_cols, indptr, indices, nonzeros = csr_rows(ctx[CTX_GDATA])
        w = slot_view(values, slots, records[i, R_IN1], rows)
        c = records[i, R_IN2]
        out = slot_view(values, slots, records[i, R_OUT], rows)
        if n_cols != w.shape[0]:  # (read nothing: the columns would index outside w)
            n_rows = 0
        if not _forward_kernel(int_slot_view(values, slots, records[i, R_IN0], rows), n_rows,
                               indptr, indices, nonzeros, w,
                               slot_flat(values, slots, c if c >= 0 else records[i, R_IN1],
                                         rows), out, c >= 0):
            report_bad_input(ctx, i)
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = op == _SPARSE_LINEAR
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        grads = ctx[CTX_GRADS]
        rows = ctx[CTX_ROWS]
        f = records[i, R_FLAGS]
        dy = slot_view(grads, slots, records[i, R_OUT], rows)
        if (f & _NEED_W) != 0:
            n_rows, n_cols, indptr, indices, nonzeros = csr_rows(ctx[CTX_GDATA])
            dw = slot_view(grads, slots, records[i, R_IN1], rows)
            if n_cols != dw.shape[0]:
                n_rows = 0
            _backward_kernel(int_slot_view(ctx[CTX_VALUES], slots, records[i, R_IN0], rows),
                             n_rows, indptr, indices, nonzeros, dy, dw, (f & _ACC_W) != 0)
        c = records[i, R_IN2]
        if c >= 0 and (f & _NEED_B) != 0:
            _bias_backward(dy, slot_flat(grads, slots, c, rows), (f & _ACC_B) != 0)
    return handled


FAMILY = register(OpFamily("sparse", SPECS, forward, backward, first_opcode=FIRST_OPCODE))
