"""Views of one arena slot for compiled code: the current batch's rows for batch slots."""

from nnjit.kernels._jit import jit
from nnjit.kernels.int_views import int_view1d, int_view2d
from nnjit.kernels.views import view1d, view2d
from nnjit.tape.arena import S_COLS, S_FLAGS, S_OFFSET, S_ROWS, SLOT_BATCH


@jit
def slot_view(buf, slots, s, batch_rows):
    """2-D view of slot ``s`` in ``buf`` with the current batch's row count for batch slots."""
    rows = batch_rows if slots[s, S_FLAGS] & SLOT_BATCH else slots[s, S_ROWS]
    return view2d(buf, slots[s, S_OFFSET], rows, slots[s, S_COLS])


@jit
def slot_flat(buf, slots, s, batch_rows):
    """1-D view of slot ``s`` in ``buf``."""
    rows = batch_rows if slots[s, S_FLAGS] & SLOT_BATCH else slots[s, S_ROWS]
    return view1d(buf, slots[s, S_OFFSET], rows * slots[s, S_COLS])


@jit
def int_slot_view(buf, slots, s, batch_rows):
    """2-D view of integer slot ``s`` as its integers (int32 in float32 ``buf``, int64 in
    float64): indices are read without a float conversion."""
    rows = batch_rows if slots[s, S_FLAGS] & SLOT_BATCH else slots[s, S_ROWS]
    return int_view2d(buf, slots[s, S_OFFSET], rows, slots[s, S_COLS])


@jit
def int_slot_flat(buf, slots, s, batch_rows):
    """1-D view of integer slot ``s`` as its integers."""
    rows = batch_rows if slots[s, S_FLAGS] & SLOT_BATCH else slots[s, S_ROWS]
    return int_view1d(buf, slots[s, S_OFFSET], rows * slots[s, S_COLS])
