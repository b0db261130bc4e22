"""The embedding family: EMBEDDING, rows of a weight table looked up by integer indices.

Input 0 holds integers (``SlotSpec.integer``: int32 bits in a float32 arena, int64 in a float64
one), read through an integer view: an index never round-trips through float. An index outside
``[0, num_embeddings)`` is never read; the kernel writes a zero row and reports the record
(:func:`nnjit.ops.report_bad_input`), and the task stops after that forward pass with
:class:`~nnjit.engine.status.BadInputError` naming the layer, the index and the valid range.
Kernels: :mod:`nnjit.kernels.embedding`.
"""

import numpy as np

from nnjit.kernels import embedding as ke
from nnjit.ops.context import (
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
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_FLAGS, R_IN0, R_IN1, R_OUT
from nnjit.tape.slot_views import int_slot_view, slot_view
from nnjit.tape.tape import Tensor

FIRST_OPCODE = 110
_EMBEDDING = FIRST_OPCODE
_NEED_W = NEEDS_GRAD[1]
_ACC_W = ACCUMULATE[1]


def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by the integer tensor
    ``input`` (PyTorch's ``F.embedding``): dims ``()`` (one index per row) give dims
    ``(embedding_dim,)``, dims ``(K,)`` give ``(K, embedding_dim)``. The row ``padding_idx``
    (negative counts from the end) receives no gradient."""
    tape = getattr(input, "tape", None)
    where = (tape.current_owner if tape is not None else "") or "embedding"
    if not isinstance(input, Tensor) or not input.is_integer:
        raise TypeError(f"{where}: embedding indices must be an integer tensor (an integer "
                        f"model input or a column of one), got {input!r}")
    if len(input.dims) > 1:
        raise ValueError(f"{where}: embedding indices must be one index or a vector of indices "
                         f"per row, got shape {input.shape}")
    num, dim = int(weight.rows), int(weight.cols)
    padding = _padding(padding_idx, num, where)
    k = input.dims[0] if input.dims else 1
    out_dims = (k, dim) if input.dims else (dim,)
    return tape.record(_EMBEDDING, [input, weight], input.rows, k * dim, aux=(padding,),
                       out_dims=out_dims)


def _padding(padding_idx, num: int, where: str) -> int:
    """``padding_idx`` as a row in [0, num), or -1 for None (PyTorch's rule for negatives)."""
    if padding_idx is None:
        return -1
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)):
        raise TypeError(f"{where}: padding_idx must be an int or None, got {padding_idx!r}")
    p = int(padding_idx)
    if not -num <= p < num:
        raise ValueError(f"{where}: padding_idx {p} must be within num_embeddings ({num}): "
                         f"-{num} <= padding_idx < {num}")
    return p + num if p < 0 else p


def _reference(idx, weight, padding_idx=None):
    return weight[np.asarray(idx, np.int64)].reshape(idx.shape[0], -1)


def _sample_indices(rng, dims):
    """Valid indices, duplicates likely (small tables): the scatter-add must sum them."""
    return {0: rng.integers(0, dims["N"], size=(dims["B"], dims["K"]))}


def bad_index_message(program, i: int) -> str:
    """The first out-of-range index record ``i`` read (its batch is still loaded) and the valid
    range."""
    node = program.nodes[i]
    idx = program.integer_view(node.inputs[0])
    num = int(program.tape.slots[node.inputs[1]].rows)
    bad = idx[(idx < 0) | (idx >= num)]
    value = f"index {int(bad.flat[0])} is" if bad.size else "an index was"
    return (f"embedding {value} out of range: valid indices are 0..{num - 1} "
            f"(num_embeddings={num})")


SPECS = (
    OpSpec("EMBEDDING", 2, "(B,K),(N,D)->(B,K*D)", _reference, embedding,
           hyper=("padding_idx",), sample_hyper={"padding_idx": None}, grad_inputs=(1,),
           int_inputs=(0,), sample_inputs=_sample_indices, bad_input=bad_index_message,
           aux={"aux0": "padding_idx: the weight row that receives no gradient (-1: none)"}),
)


@dispatcher
def forward(op, i, ctx):
    handled = op == _EMBEDDING
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        if not ke.embedding_forward(int_slot_view(values, slots, records[i, R_IN0], rows),
                                    slot_view(values, slots, records[i, R_IN1], rows),
                                    slot_view(values, slots, records[i, R_OUT], rows)):
            report_bad_input(ctx, i)
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = op == _EMBEDDING
    if handled:
        records = ctx[CTX_RECORDS]
        f = records[i, R_FLAGS]
        if (f & _NEED_W) != 0:
            slots = ctx[CTX_SLOTS]
            rows = ctx[CTX_ROWS]
            ke.embedding_backward(int_slot_view(ctx[CTX_VALUES], slots, records[i, R_IN0], rows),
                                  slot_view(ctx[CTX_GRADS], slots, records[i, R_OUT], rows),
                                  slot_view(ctx[CTX_GRADS], slots, records[i, R_IN1], rows),
                                  records[i, R_AUX0], (f & _ACC_W) != 0)
    return handled


FAMILY = register(OpFamily("embedding", SPECS, forward, backward, first_opcode=FIRST_OPCODE))
