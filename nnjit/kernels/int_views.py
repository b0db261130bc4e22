"""Integer views of the float arena, for compiled code reading or copying integer slots.

An integer slot (``SlotSpec.integer``: category indices) holds the bits of int32 in a float32
arena and of int64 in a float64 one. These views reinterpret a span of the arena as those
integers (same width, no conversion), borrowed and untracked as :mod:`nnjit.kernels.views`'
(valid only inside the compiled call, no bounds check). Copying any slot through them is a
bitwise copy, so one kernel moves floats and integers alike. Slot-level forms:
:func:`nnjit.tape.slot_views.int_slot_view`.
"""

from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_untracked
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

_INT_OF = {types.float32: types.int32, types.float64: types.int64}


def _int_view(context, builder, signature, args, ndim):
    """An untracked C-contiguous integer view of float ``args[0]`` at offset ``args[1]``."""
    result = signature.return_type
    src = make_array(signature.args[0])(context, builder, args[0])
    out = make_array(result)(context, builder)
    off, *shape = (context.cast(builder, v, t, types.intp)
                   for v, t in zip(args[1:], signature.args[1:]))
    item = context.get_data_type(result.dtype)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(item))
    strides = [itemsize] if ndim == 1 else [builder.mul(shape[1], itemsize), itemsize]
    data = builder.bitcast(cgutils.gep_inbounds(builder, src.data, off), item.as_pointer())
    populate_array(out, data=data, shape=shape, strides=strides, itemsize=itemsize,
                   meminfo=None, parent=None)
    return impl_ret_untracked(context, builder, result, out._getvalue())


def _int_type(buf):
    if isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C":
        return _INT_OF.get(buf.dtype)
    return None


@intrinsic
def int_view1d(typingctx, buf, offset, size):
    """``buf[offset:offset + size]`` (float32 / float64) read as int32 / int64 (no copy)."""
    kind = _int_type(buf)
    if kind is None:
        return None
    sig = types.Array(kind, 1, "C")(buf, offset, size)
    return sig, lambda c, b, s, a: _int_view(c, b, s, a, 1)


@intrinsic
def int_view2d(typingctx, buf, offset, rows, cols):
    """A (rows, cols) view of ``buf`` from ``offset`` read as int32 / int64 (no copy)."""
    kind = _int_type(buf)
    if kind is None:
        return None
    sig = types.Array(kind, 2, "C")(buf, offset, rows, cols)
    return sig, lambda c, b, s, a: _int_view(c, b, s, a, 2)
