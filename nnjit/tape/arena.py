"""Arena layout: one flat buffer for values, one of the same layout for gradients.

The slot table is int64 rows ``[offset, rows, cols, flags]``. Offsets are 64-byte aligned.
All parameters come first, so the parameter block ``arena[:n_params]`` is one contiguous span:
the optimizer step, the best-weights snapshot and its restore are each one loop over it.
Batch slots are laid out for the largest batch; the interpreter uses the current batch's row count
for them, so a short last batch or a validation pass needs no second layout.
"""

from __future__ import annotations

import numpy as np

# Slot table columns and flags.
S_OFFSET, S_ROWS, S_COLS, S_FLAGS = range(4)
SLOT_BATCH = 1  # rows vary with the batch (the stored rows are the maximum)
SLOT_PARAM = 2  # lives in the parameter block
SLOT_GRAD = 4  # has a gradient
SLOT_EDGES_RAW = 8  # one row per edge of the graph's CSR (sampled batches: set per batch)
SLOT_EDGES_LOOPS = 16  # one row per edge of the CSR with self loops
EDGE_FLAGS = (SLOT_EDGES_RAW, SLOT_EDGES_LOOPS)  # by CSR number (GRAPH_RAW, GRAPH_LOOPS)

ALIGN_BYTES = 64


def layout(slots, dtype) -> tuple[np.ndarray, int, int, int]:
    """Place ``slots`` (a list of :class:`~nnjit.tape.tape.SlotSpec`) in one arena.

    Constant slots (data the ops read, e.g. a graph's node features) go last, after every slot
    that may have a gradient, so the gradient arena stops where they start.

    Returns:
        (slot_table, arena_size, n_params, grad_size): the int64 slot table, the arena length in
        elements, the length of the parameter block at its start, and the length the gradient
        arena needs.

    Raises:
        ValueError: if a parameter slot comes after a non-parameter slot.
    """
    align = max(1, ALIGN_BYTES // np.dtype(dtype).itemsize)
    n = len(slots)
    table = [0] * (4 * n)  # flat, converted in one go (this runs on every trace)
    offset = 0
    n_params = 0
    params_done = False
    constants = [i for i, spec in enumerate(slots) if spec.constant]
    order = ([i for i, spec in enumerate(slots) if not spec.constant] + constants if constants
             else range(n))
    grad_size = None
    for j in order:
        spec = slots[j]
        if spec.constant and grad_size is None:
            grad_size = offset
        if spec.param:
            if params_done:
                raise ValueError(f"parameter slot '{spec.name}' laid out after activations")
        elif not params_done:
            params_done = True
            n_params = offset
            offset = (offset + align - 1) // align * align
        edges = spec.edges
        table[4 * j : 4 * j + 4] = (
            offset,
            spec.rows,
            spec.cols,
            (SLOT_BATCH if spec.batch else 0)
            | (SLOT_PARAM if spec.param else 0)
            | (SLOT_GRAD if spec.requires_grad else 0)
            | (EDGE_FLAGS[edges] if 0 <= edges < len(EDGE_FLAGS) else 0),
        )
        size = spec.rows * spec.cols
        # Parameters are packed back to back: the optimizer streams over them as one vector.
        offset += size if spec.param else (size + align - 1) // align * align
    if not params_done:
        n_params = offset
    grad_size = offset if grad_size is None else grad_size
    return (np.array(table, dtype=np.int64).reshape(n, 4), max(offset, 1), n_params,
            max(grad_size, 1))
