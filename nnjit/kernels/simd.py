"""64-byte float vectors (16 float32 or 8 float64 lanes) as numba values, for register-blocked
kernels.

LLVM does not keep a tile of accumulators in registers across a reduction loop written with
scalar loops (it spills them, or re-vectorises the wrong loop); these intrinsics let a kernel name
each accumulator as a vector value, so the tile stays in registers and every multiply-add is one
FMA instruction. A vector is an LLVM ``<N x float>`` value: an AVX-512 register, two AVX2 ones.

Loads and stores take a 1-D array and an element offset, with no bounds check and no negative
index wraparound (the wraparound code alone halved a tile's speed): the caller guarantees the
range, checked once per call, not per element.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.datamodel import models, register_default
from numba.extending import intrinsic

#: bytes per vector: one AVX-512 register
VECTOR_BYTES = 64


class Vector(types.Type):
    """A 64-byte vector of ``dtype`` (float32 or float64) lanes."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.lanes = VECTOR_BYTES // (dtype.bitwidth // 8)
        super().__init__(name=f"Vector({dtype} x {self.lanes})")


@register_default(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        lane = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(lane, fe_type.lanes))


def _float_array(arr) -> bool:
    return (isinstance(arr, types.Array) and arr.ndim == 1
            and arr.dtype in (types.float32, types.float64))


def _element_pointer(context, builder, array_type, array, at_type, at):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [context.cast(builder, at, at_type, types.intp)])


def _splat_value(context, builder, vector_type, scalar):
    lt = context.get_value_type(vector_type)
    one = builder.insert_element(ir.Constant(lt, ir.Undefined), scalar,
                                 ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vector_type.lanes), [0] * vector_type.lanes)
    return builder.shuffle_vector(one, ir.Constant(lt, ir.Undefined), mask)


@intrinsic
def lanes(typingctx, arr):
    """Lanes of a vector of ``arr``'s dtype (a compile-time constant)."""
    if not _float_array(arr):
        return None
    n = Vector(arr.dtype).lanes

    def codegen(context, builder, sig, args):
        return context.get_constant(types.intp, n)

    return types.intp(arr), codegen


@intrinsic
def load(typingctx, arr, at):
    """The vector ``arr[at:at + lanes]`` (unaligned)."""
    if not _float_array(arr):
        return None
    vty = Vector(arr.dtype)

    def codegen(context, builder, sig, args):
        p = _element_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        return builder.load(builder.bitcast(p, context.get_value_type(vty).as_pointer()),
                            align=arr.dtype.bitwidth // 8)

    return vty(arr, at), codegen


@intrinsic
def store(typingctx, arr, at, v):
    """``arr[at:at + lanes] = v`` (unaligned)."""
    if not (_float_array(arr) and isinstance(v, Vector) and v.dtype == arr.dtype):
        return None

    def codegen(context, builder, sig, args):
        p = _element_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        builder.store(args[2], builder.bitcast(p, context.get_value_type(v).as_pointer()),
                      align=arr.dtype.bitwidth // 8)
        return context.get_dummy_value()

    return types.void(arr, at, v), codegen


@intrinsic
def splat(typingctx, arr, at):
    """A vector whose every lane is ``arr[at]`` (one broadcast load)."""
    if not _float_array(arr):
        return None
    vty = Vector(arr.dtype)

    def codegen(context, builder, sig, args):
        p = _element_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        return _splat_value(context, builder, vty, builder.load(p))

    return vty(arr, at), codegen


@intrinsic
def zeros(typingctx, arr):
    """A vector of zeros of ``arr``'s dtype."""
    if not _float_array(arr):
        return None
    vty = Vector(arr.dtype)

    def codegen(context, builder, sig, args):
        return ir.Constant(context.get_value_type(vty), None)

    return vty(arr), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` lane by lane, one fused multiply-add."""
    if not (isinstance(a, Vector) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        lt = context.get_value_type(a)
        name = f"llvm.fma.v{a.lanes}f{a.dtype.bitwidth}"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lt, [lt] * 3), name)
        return builder.call(fn, args)

    return a(a, b, c), codegen


@intrinsic
def add(typingctx, a, b):
    """``a + b`` lane by lane."""
    if not (isinstance(a, Vector) and a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])

    return a(a, b), codegen



@intrinsic
def sub(typingctx, a, b):
    """``a - b`` lane by lane."""
    if not (isinstance(a, Vector) and a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.fsub(args[0], args[1])

    return a(a, b), codegen


@intrinsic
def total(typingctx, a):
    """The sum of the lanes of ``a`` (halves added pairwise: a fixed order, no fast-math)."""
    if not isinstance(a, Vector):
        return None

    def codegen(context, builder, sig, args):
        v = args[0]
        n = a.lanes
        while n > 1:
            n //= 2
            lo = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), n),
                                                          list(range(n))))
            hi = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), n),
                                                          list(range(n, 2 * n))))
            v = builder.fadd(lo, hi)
        return builder.extract_element(v, ir.Constant(ir.IntType(32), 0))

    return a.dtype(a), codegen


@intrinsic
def transpose(typingctx, src, src_at, src_ld, dst, dst_at, dst_ld, add):
    """A lanes x lanes block transposed: ``dst[dst_at + l*dst_ld + i] = src[src_at + i*src_ld +
    l]`` (``+=`` when ``add``) for i, l < lanes: rows loaded whole, then log2(lanes) rounds of
    shuffles, a few instructions per vector instead of a load and a store per element."""
    if not (_float_array(src) and _float_array(dst) and src.dtype == dst.dtype
            and all(isinstance(t, types.Integer) for t in (src_at, src_ld, dst_at, dst_ld))
            and isinstance(add, types.Boolean)):
        return None
    sig = types.void(src, src_at, src_ld, dst, dst_at, dst_ld, add)

    def codegen(context, builder, sig, args):
        vty = Vector(src.dtype)
        n, lt = vty.lanes, context.get_value_type(vty)
        align = src.dtype.bitwidth // 8

        def pointer(k, i):
            at = context.cast(builder, args[k + 1], sig.args[k + 1], types.intp)
            ld = context.cast(builder, args[k + 2], sig.args[k + 2], types.intp)
            row = builder.add(at, builder.mul(ld, context.get_constant(types.intp, i)))
            p = _element_pointer(context, builder, sig.args[k], args[k], types.intp, row)
            return builder.bitcast(p, lt.as_pointer())

        rows = [builder.load(pointer(0, i), align=align) for i in range(n)]
        # round d swaps bit d of the row index with bit d of the lane index: after every bit,
        # row i lane l holds what row l lane i held
        d = n // 2
        while d:
            out = list(rows)
            for i in range(n):
                if i & d == 0:
                    lo = [lane if lane & d == 0 else n + lane - d for lane in range(n)]
                    hi = [lane + d if lane & d == 0 else n + lane for lane in range(n)]
                    mask = [ir.Constant(ir.VectorType(ir.IntType(32), n), m) for m in (lo, hi)]
                    out[i] = builder.shuffle_vector(rows[i], rows[i + d], mask[0])
                    out[i + d] = builder.shuffle_vector(rows[i], rows[i + d], mask[1])
            rows = out
            d //= 2
        for i, v in enumerate(rows):
            p = pointer(3, i)
            old = builder.load(p, align=align)
            builder.store(builder.select(args[6], builder.fadd(old, v), v), p, align=align)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def align_offset(typingctx, arr, at):
    """Elements to add to ``at`` so that ``arr[at + result]`` starts a 64-byte line (0 to
    lanes - 1; the array's elements are aligned to their own size)."""
    if not _float_array(arr):
        return None

    def codegen(context, builder, sig, args):
        p = _element_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        size = arr.dtype.bitwidth // 8
        i64 = ir.IntType(64)
        rest = builder.and_(builder.ptrtoint(p, i64), ir.Constant(i64, VECTOR_BYTES - 1))
        gap = builder.and_(builder.sub(ir.Constant(i64, VECTOR_BYTES), rest),
                           ir.Constant(i64, VECTOR_BYTES - 1))
        return builder.udiv(gap, ir.Constant(i64, size))

    return types.int64(arr, at), codegen
