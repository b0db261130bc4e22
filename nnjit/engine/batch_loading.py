"""Loading a job's rows into the arena, at the slots the program layout vector names.

Shared by the interpreter (:func:`load_rows`, the plain loader) and the graph family's sampled
batch loader (:mod:`nnjit.graph.sampled_batch`), which both import it.
"""

from nnjit.engine.fields import (L_AUG_C, L_AUG_FLIP, L_AUG_H, L_AUG_PAD, L_AUG_SLOT, L_AUG_W,
                                 L_INPUT, L_TARGET)
from nnjit.kernels._jit import jit
from nnjit.kernels.augment import augment_rows
from nnjit.tape.slot_views import slot_view


@jit
def load_batch(src, perm, use_perm, start, rows, dst):
    """Copy ``rows`` rows of ``src`` (via ``perm`` when ``use_perm``) into ``dst`` (rows, C)."""
    cols = src.shape[1]
    for r in range(rows):
        k = perm[start + r] if use_perm else start + r
        for j in range(cols):
            dst[r, j] = src[k, j]


@jit(inline="always")
def load_rows(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots, layout,
              gdata, rng):
    """Copy a job's rows of X (and Y) into the input (and target) slots; returns the batch rows.

    A build whose op families supply a job loader (the graph family's
    :func:`nnjit.graph.sampled_batch.load_graph_job`) calls that one instead.
    """
    load_batch(src_x, perm, use_perm, start, rows, slot_view(values, slots, layout[L_INPUT], rows))
    if with_targets:
        load_batch(src_y, perm, use_perm, start, rows,
                   slot_view(values, slots, layout[L_TARGET], rows))
    # Augmentation (random crop, flip) of a fit's training batches only: use_perm is True exactly
    # for those (never validation, evaluate, predict or gradients); Python sets L_AUG_* per fit.
    if use_perm and layout[L_AUG_SLOT] >= 0:
        augment_rows(slot_view(values, slots, layout[L_AUG_SLOT], rows), rows, layout[L_AUG_C],
                     layout[L_AUG_H], layout[L_AUG_W], layout[L_AUG_PAD], layout[L_AUG_FLIP] != 0,
                     rng)
    return rows
