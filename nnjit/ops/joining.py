"""The joining family: CONCAT (two tensors side by side along features) and COLUMNS (a block
of a tensor's columns: ``x[:, j]``, ``x[:, a:b]``).

Both copy through integer views of the arena (a bitwise copy), so integer tensors (category
indices) stay integers: integer with integer gives an integer result; float with integer is
refused. Gradients flow for float tensors. ``nn.functional.cat`` of more than two tensors is a
chain of CONCATs (a record holds at most three inputs; tabular widths make the extra copies
negligible). Kernels: :mod:`nnjit.kernels.joining`.
"""

import numpy as np

from nnjit.kernels import joining as kj
from nnjit.ops.context import (
    CTX_GRADS,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SLOTS,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape import tape as _tape
from nnjit.tape.arena import S_COLS
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_FLAGS, R_IN0, R_IN1, R_OUT
from nnjit.tape.slot_views import int_slot_view, slot_view
from nnjit.tape.tape import Tensor

FIRST_OPCODE = 120
_CONCAT = FIRST_OPCODE
_COLUMNS = FIRST_OPCODE + 1
_NEED_A = NEEDS_GRAD[0]
_NEED_B = NEEDS_GRAD[1]
_ACC_A = ACCUMULATE[0]
_ACC_B = ACCUMULATE[1]


def _where(x, default: str) -> str:
    return getattr(getattr(x, "tape", None), "current_owner", "") or default


def _rows_match(a: Tensor, b: Tensor) -> bool:
    return a.spec.batch == b.spec.batch and int(a.rows) == int(b.rows)


def _check_joinable(t, k: int, where: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: cat takes tensors, input {k} is {type(t).__name__}")
    if len(t.dims) != 1:
        raise ValueError(f"{where}: cat joins 2-D tensors (batch, features) along features; "
                         f"input {k} has shape {t.shape} (flatten or view it first)")


def concat_pair(a, b):
    """Record ``[a | b]``: the columns of ``a`` then those of ``b`` (both 2-D, same rows)."""
    where = _where(a, "cat")
    _check_joinable(a, 0, where)
    _check_joinable(b, 1, where)
    if b.tape is not a.tape:
        raise ValueError(f"{where}: cat: the tensors belong to different tapes")
    if a.is_integer != b.is_integer:
        raise TypeError(f"{where}: cat cannot join a float tensor and an integer tensor "
                        f"(shapes {a.shape} and {b.shape}): keep indices and features apart "
                        "(embed the indices first)")
    if not _rows_match(a, b):
        raise ValueError(f"{where}: cat needs the same rows, got shapes {a.shape} and "
                         f"{b.shape}")
    integer = a.is_integer
    return a.tape.record(_CONCAT, [a, b], a.rows, a.cols + b.cols, out_integer=integer,
                         out_requires_grad=False if integer else None)


def cat(tensors, dim: int = 1):
    """Concatenate 2-D tensors along features (``torch.cat(tensors, dim=1)``): integer tensors
    with integer tensors (the result holds integers), float with float."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"cat: expected a list or tuple of tensors, got "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise ValueError("cat: expected a non-empty list of tensors")
    where = _where(tensors[0], "cat")
    if isinstance(dim, bool) or dim not in (1, -1):
        raise ValueError(f"{where}: cat joins along features only (dim=1 or -1), got "
                         f"dim={dim!r}: rows are samples")
    for k, t in enumerate(tensors):
        _check_joinable(t, k, where)
    kinds = [t.is_integer for t in tensors]
    if any(kinds) and not all(kinds):
        raise TypeError(f"{where}: cat cannot join float and integer tensors (input "
                        f"{kinds.index(False)} holds floats, input {kinds.index(True)} "
                        "integers): embed the indices first")
    out = tensors[0]
    for t in tensors[1:]:
        out = concat_pair(out, t)
    return out


concat = cat


def columns(x, start: int, width: int):
    """Record ``x[:, start:start + width]`` (a 2-D tensor's column block, integer-safe)."""
    where = _where(x, "columns")
    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: expected a tensor, got {type(x).__name__}")
    if len(x.dims) != 1:
        raise ValueError(f"{where}: column indexing takes a 2-D tensor (batch, features), got "
                         f"shape {x.shape} (flatten it first)")
    start, width = int(start), int(width)
    if not (0 <= start and 1 <= width and start + width <= x.cols):
        raise IndexError(f"{where}: columns {start}:{start + width} are outside the "
                         f"{x.cols} columns of a tensor of shape {x.shape}")
    integer = x.is_integer
    return x.tape.record(_COLUMNS, [x], x.rows, width, aux=(start,), out_integer=integer,
                         out_requires_grad=False if integer else None)


def getitem(x, key):
    """``Tensor.__getitem__``: ``x[:, j]`` (shape (batch,)) and ``x[:, a:b]`` (shape
    (batch, b - a)) of a 2-D tensor; other forms are refused."""
    where = _where(x, "tensor indexing")
    forms = "x[:, j] or x[:, a:b]"
    if not (isinstance(key, tuple) and len(key) == 2 and key[0] == slice(None)):
        raise TypeError(f"{where}: a traced tensor supports only {forms} (every row, some "
                        f"columns), got index {key!r}")
    if len(x.dims) != 1:
        raise ValueError(f"{where}: {forms} takes a 2-D tensor, got shape {x.shape}")
    col, n = key[1], x.cols
    if isinstance(col, (int, np.integer)) and not isinstance(col, bool):
        j = int(col)
        if not -n <= j < n:
            raise IndexError(f"{where}: column {j} is out of range for a tensor of shape "
                             f"{x.shape}")
        out = columns(x, j % n, 1)
        return Tensor(out.tape, out.slot, ())
    if isinstance(col, slice):
        if col.step not in (None, 1):
            raise ValueError(f"{where}: column slices take step 1, got {col!r}")
        start, stop, _ = col.indices(n)
        if stop <= start:
            raise IndexError(f"{where}: column slice {col.start}:{col.stop} of a tensor of "
                             f"shape {x.shape} selects no column")
        return columns(x, start, stop - start)
    raise TypeError(f"{where}: a column index must be an int or a slice ({forms}), got "
                    f"{col!r}")


SPECS = (
    OpSpec("CONCAT", 2, "(B,F),(B,G)->(B,F+G)", lambda a, b: np.concatenate([a, b], axis=1),
           concat_pair, grad_inputs=(0, 1), int_inputs=(0, 1)),
    # the check draws the slice as dims: start columns before it, width in it, rest after it
    OpSpec("COLUMNS", 1, "(B,start+width+rest)->(B,width)",
           lambda x, start, width: x[:, start:start + width], columns,
           hyper=("start", "width"), sample_hyper={"start": 0, "width": 1}, grad_inputs=(0,),
           int_inputs=(0,), aux={"aux0": "first column of the slice"}),
)


@dispatcher
def forward(op, i, ctx):
    handled = (op == _CONCAT) | (op == _COLUMNS)
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        a = int_slot_view(values, slots, records[i, R_IN0], rows)
        out = int_slot_view(values, slots, records[i, R_OUT], rows)
        if op == _CONCAT:
            kj.put_columns(a, out, 0)
            kj.put_columns(int_slot_view(values, slots, records[i, R_IN1], rows), out,
                           a.shape[1])
        else:
            kj.take_columns(a, records[i, R_AUX0], out)
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = (op == _CONCAT) | (op == _COLUMNS)
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        grads = ctx[CTX_GRADS]
        rows = ctx[CTX_ROWS]
        f = records[i, R_FLAGS]
        dy = slot_view(grads, slots, records[i, R_OUT], rows)
        if op == _CONCAT:
            a = records[i, R_IN0]
            if (f & _NEED_A) != 0:
                kj.take_columns_grad(dy, 0, slot_view(grads, slots, a, rows), (f & _ACC_A) != 0)
            if (f & _NEED_B) != 0:
                kj.take_columns_grad(dy, slots[a, S_COLS],
                                     slot_view(grads, slots, records[i, R_IN1], rows),
                                     (f & _ACC_B) != 0)
        elif (f & _NEED_A) != 0:
            kj.put_columns_grad(dy, slot_view(grads, slots, records[i, R_IN0], rows),
                                records[i, R_AUX0], (f & _ACC_A) != 0)
    return handled


FAMILY = register(OpFamily("joining", SPECS, forward, backward, first_opcode=FIRST_OPCODE))
_tape.OPERATORS["getitem"] = getitem
