"""The compiled side of an op: the ``ctx`` tuple every dispatcher receives, and its accessors.

``ctx = (training, rows, records, slots, hyper, values, grads, rng, scratch, gdata, stats,
dense_mode, bad_input)``: whether this batch trains (dropout draws masks, losses write their
gradient seed), the batch's row count, the record table, the slot table, the float64
hyperparameter table, the value and gradient arenas, the model's RNG state, a scratch span of the
gradient arena, the program's graph data, the current job's (loss sum, correct, counted), the BLAS
kernel mode and the one-element bad-input field (:func:`report_bad_input`).
Family dispatchers read it through the accessors below (all inlined), never by position.
"""

from nnjit.kernels._jit import jit
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_IN0, R_OUT
from nnjit.tape.slot_views import slot_flat, slot_view

(CTX_TRAINING, CTX_ROWS, CTX_RECORDS, CTX_SLOTS, CTX_HYPER, CTX_VALUES, CTX_GRADS, CTX_RNG,
 CTX_SCRATCH, CTX_GDATA, CTX_STATS, CTX_DENSE_MODE, CTX_BAD_INPUT) = range(13)


def kernel(fn=None, **overrides):
    """Decorate a user kernel: nnjit's compile options (nogil, on-disk cache, the fast-math
    set of DESIGN.md, numpy's error model); ``overrides`` as numba's ``njit`` keywords."""
    return jit(fn, **overrides)


def dispatcher(fn=None, **overrides):
    """Decorate a family's ``forward``/``backward`` dispatcher (inlined into the replay)."""
    return jit(fn, inline="always", **overrides)


@dispatcher
def is_training(ctx):
    """True when the current batch trains (forward then backward), False for evaluation."""
    return ctx[CTX_TRAINING]


@dispatcher
def batch_rows(ctx):
    """Rows of the current batch (what batch slots hold now)."""
    return ctx[CTX_ROWS]


@dispatcher
def has_input(ctx, i, k):
    """Whether record ``i`` has input ``k`` (an optional input left out is slot -1)."""
    return ctx[CTX_RECORDS][i, R_IN0 + k] >= 0


@dispatcher
def needs_grad(ctx, i, k):
    """Whether the backward of record ``i`` must produce input ``k``'s gradient."""
    return (ctx[CTX_RECORDS][i, 8] & NEEDS_GRAD[k]) != 0


@dispatcher
def accumulates(ctx, i, k):
    """Whether input ``k``'s gradient is added to (True) or overwritten (False: first writer)."""
    return (ctx[CTX_RECORDS][i, 8] & ACCUMULATE[k]) != 0


@dispatcher
def report_bad_input(ctx, i):
    """Record ``i`` found bad input data (an index out of range): the op computes something
    harmless (never reading out of bounds) and returns True as usual; the interpreter stops the
    task after this forward replay with status BAD_INPUT naming the first such record, and
    Python asks the op's spec (:attr:`~nnjit.ops.OpSpec.bad_input`) what was wrong."""
    bad = ctx[CTX_BAD_INPUT]
    if bad[0] == 0.0:
        bad[0] = i + 1.0


@dispatcher
def aux_of(ctx, i, k):
    """The integer in aux field ``k`` of record ``i``."""
    return ctx[CTX_RECORDS][i, R_AUX0 + k]


@dispatcher
def hyper_of(ctx, i, k):
    """The float hyperparameter behind aux field ``k`` of record ``i`` (0.0 when unset)."""
    h = ctx[CTX_RECORDS][i, R_AUX0 + k]
    return ctx[CTX_HYPER][h] if h >= 0 else 0.0


@dispatcher
def input_view(ctx, i, k):
    """2-D view of input ``k``'s values (current batch rows)."""
    return slot_view(ctx[CTX_VALUES], ctx[CTX_SLOTS], ctx[CTX_RECORDS][i, R_IN0 + k],
                     ctx[CTX_ROWS])


@dispatcher
def input_flat(ctx, i, k):
    """1-D view of input ``k``'s values."""
    return slot_flat(ctx[CTX_VALUES], ctx[CTX_SLOTS], ctx[CTX_RECORDS][i, R_IN0 + k],
                     ctx[CTX_ROWS])


@dispatcher
def output_view(ctx, i):
    """2-D view of the output's values."""
    return slot_view(ctx[CTX_VALUES], ctx[CTX_SLOTS], ctx[CTX_RECORDS][i, R_OUT], ctx[CTX_ROWS])


@dispatcher
def output_flat(ctx, i):
    """1-D view of the output's values."""
    return slot_flat(ctx[CTX_VALUES], ctx[CTX_SLOTS], ctx[CTX_RECORDS][i, R_OUT], ctx[CTX_ROWS])


@dispatcher
def input_grad_view(ctx, i, k):
    """2-D view of input ``k``'s gradient."""
    return slot_view(ctx[CTX_GRADS], ctx[CTX_SLOTS], ctx[CTX_RECORDS][i, R_IN0 + k],
                     ctx[CTX_ROWS])


@dispatcher
def input_grad_flat(ctx, i, k):
    """1-D view of input ``k``'s gradient."""
    return slot_flat(ctx[CTX_GRADS], ctx[CTX_SLOTS], ctx[CTX_RECORDS][i, R_IN0 + k],
                     ctx[CTX_ROWS])


@dispatcher
def output_grad_view(ctx, i):
    """2-D view of the output's gradient (what backward reads)."""
    return slot_view(ctx[CTX_GRADS], ctx[CTX_SLOTS], ctx[CTX_RECORDS][i, R_OUT], ctx[CTX_ROWS])


@dispatcher
def output_grad_flat(ctx, i):
    """1-D view of the output's gradient."""
    return slot_flat(ctx[CTX_GRADS], ctx[CTX_SLOTS], ctx[CTX_RECORDS][i, R_OUT], ctx[CTX_ROWS])
