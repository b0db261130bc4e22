"""Zero-cost views of the flat arena, for compiled code.

``buf[o:o + r * c].reshape(r, c)`` calls numba's general ``attempt_nocopy_reshape`` helper
(~35 ns per view), and every view, slices included, takes and drops a reference on the arena
with atomic operations (~40% of an Iris epoch went to those). The interpreter makes dozens of
views per minibatch, so these intrinsics write shape and strides directly and leave the view
*untracked* (no meminfo): ~0.4 ns. They are borrowed views: valid only while the arena array
they come from is alive, which holds for every use inside one compiled call. Never return one
to Python.
"""

from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_untracked
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array


def _borrowed_view(context, builder, signature, args, ndim):
    """Build an untracked C-contiguous view of ``args[0]`` at offset ``args[1]``, shape args[2:]."""
    result = signature.return_type
    src = make_array(signature.args[0])(context, builder, args[0])
    out = make_array(result)(context, builder)
    off, *shape = (
        context.cast(builder, v, t, types.intp) for v, t in zip(args[1:], signature.args[1:])
    )
    itemsize = context.get_constant(
        types.intp, context.get_abi_sizeof(context.get_data_type(result.dtype))
    )
    strides = [itemsize] if ndim == 1 else [builder.mul(shape[1], itemsize), itemsize]
    populate_array(
        out,
        data=cgutils.gep_inbounds(builder, src.data, off),
        shape=shape,
        strides=strides,
        itemsize=itemsize,
        meminfo=None,
        parent=None,
    )
    return impl_ret_untracked(context, builder, result, out._getvalue())


def _is_flat(buf) -> bool:
    return isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C"


@intrinsic
def view1d(typingctx, buf, offset, size):
    """A borrowed 1-D view ``buf[offset:offset + size]`` (no bounds check)."""
    if not _is_flat(buf):
        return None
    result = types.Array(buf.dtype, 1, "C")
    return result(buf, offset, size), lambda c, b, s, a: _borrowed_view(c, b, s, a, 1)


@intrinsic
def view2d(typingctx, buf, offset, rows, cols):
    """A borrowed C-contiguous (rows, cols) view of ``buf`` starting at ``offset``.

    No bounds check: the caller's slot table guarantees ``offset + rows * cols <= buf.size``.
    """
    if not _is_flat(buf):
        return None
    result = types.Array(buf.dtype, 2, "C")
    return result(buf, offset, rows, cols), lambda c, b, s, a: _borrowed_view(c, b, s, a, 2)


@intrinsic
def borrow(typingctx, arr):
    """``arr`` itself, untracked: passing it on costs no reference counting.

    Hot loops that hand the same arrays to kernels thousands of times per epoch borrow them once
    at entry; the caller keeps the originals alive for the whole call.
    """
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        src = make_array(arr)(context, builder, args[0])
        out = make_array(arr)(context, builder)
        populate_array(
            out,
            data=src.data,
            shape=cgutils.unpack_tuple(builder, src.shape),
            strides=cgutils.unpack_tuple(builder, src.strides),
            itemsize=src.itemsize,
            meminfo=None,
            parent=None,
        )
        return impl_ret_untracked(context, builder, arr, out._getvalue())

    return arr(arr), codegen
