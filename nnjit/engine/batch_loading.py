"""Loading a job's rows into the arena, at the slots the program layout vector names.

Shared by the interpreter (:func:`load_rows`, the plain loader; :func:`load_augmented_rows` in
builds for fits with augmentation) and the graph family's sampled batch loader
(:mod:`nnjit.graph.sampled_batch`), which both import it.

The rows of X hold every input of the model side by side (:mod:`nnjit.data.inputs`); the layout
vector has one ``(slot, first column, columns)`` entry per input after its head. Rows are copied
through integer views of the arrays (int32 for float32, int64 for float64), so an integer input's
bits arrive unchanged whatever they would mean as a float (a NaN pattern included); a float is
the same bits either way.
"""

import numpy as np
from numba.extending import overload

from nnjit.engine.fields import (
    C_AUG_C,
    C_AUG_FLIP,
    C_AUG_H,
    C_AUG_PAD,
    C_AUG_SLOT,
    C_AUG_W,
    INPUT_ENTRY_WIDTH,
    INPUT_FIRST_COLUMN,
    INPUT_SLOT,
    L_N_INPUTS,
    L_TARGET,
    LAYOUT_HEAD,
)
from nnjit.kernels._jit import jit
from nnjit.kernels.augment import augment_rows
from nnjit.tape.slot_views import slot_view


def as_bits(a):
    """``a`` (a C-contiguous float32/float64 array) viewed as int32/int64 (compiled code only)."""
    raise NotImplementedError("as_bits runs in compiled code only")


@overload(as_bits, inline="always")
def _as_bits(a):
    bits = np.int32 if a.dtype.bitwidth == 32 else np.int64
    return lambda a: a.view(bits)


@jit
def take_given_order(perm, n, epoch):
    """Copy the batch order of ``epoch`` into ``perm[:n]``: ``perm`` holds n working entries,
    then K orders of n rows each (``SHUFFLE_GIVEN``), and the fit's epoch e takes order e % K.
    Python refills the table between calls when a fit runs more than K epochs."""
    held = perm.shape[0] // n - 1
    src = (epoch % held + 1) * n
    for r in range(n):
        perm[r] = perm[src + r]


@jit
def load_batch(src, perm, use_perm, start, rows, dst):
    """Copy ``rows`` rows of ``src`` (via ``perm`` when ``use_perm``) into ``dst`` (rows, C)."""
    cols = src.shape[1]
    for r in range(rows):
        k = perm[start + r] if use_perm else start + r
        for j in range(cols):
            dst[r, j] = src[k, j]


@jit
def load_columns(src, perm, use_perm, start, rows, first, dst):
    """Copy columns ``first .. first + C`` of ``rows`` rows of ``src`` (via ``perm`` when
    ``use_perm``) into ``dst`` (rows, C), bit for bit."""
    s, d = as_bits(src), as_bits(dst)
    cols = d.shape[1]
    for r in range(rows):
        k = perm[start + r] if use_perm else start + r
        row = s[k, first : first + cols]  # (``s[k, first + j]`` may be negative: not vectorised)
        for j in range(cols):
            d[r, j] = row[j]


@jit(inline="always")
def load_rows(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots, layout,
              cfg, gdata, rng):
    """Copy a job's rows of X (and Y) into the input (and target) slots; returns the batch rows.

    A build whose op families supply a job loader (the graph family's
    :func:`nnjit.graph.sampled_batch.load_graph_job`) calls that one instead.
    """
    for i in range(layout[L_N_INPUTS]):
        entry = LAYOUT_HEAD + i * INPUT_ENTRY_WIDTH
        load_columns(src_x, perm, use_perm, start, rows, layout[entry + INPUT_FIRST_COLUMN],
                     slot_view(values, slots, layout[entry + INPUT_SLOT], rows))
    if with_targets:
        load_batch(src_y, perm, use_perm, start, rows,
                   slot_view(values, slots, layout[L_TARGET], rows))
    return rows


@jit(inline="always")
def load_augmented_rows(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots,
                        layout, cfg, gdata, rng):
    """:func:`load_rows`, then the augmentation (random crop, flip) of a fit's training batches:
    the job loader of the runs with augmentation (an MLP's runs do not compile it).

    ``use_perm`` is True exactly for a fit's training batches (never validation, evaluate,
    predict or gradients); the run's options set the ``C_AUG_*`` fields of ``cfg``.
    """
    rows = load_rows(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots,
                     layout, cfg, gdata, rng)
    if use_perm and cfg[C_AUG_SLOT] >= 0:
        augment_rows(slot_view(values, slots, int(cfg[C_AUG_SLOT]), rows), rows,
                     int(cfg[C_AUG_C]), int(cfg[C_AUG_H]), int(cfg[C_AUG_W]),
                     int(cfg[C_AUG_PAD]), cfg[C_AUG_FLIP] != 0, rng)
    return rows
