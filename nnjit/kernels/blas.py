"""General matrix products with leading dimensions, transposes and ``beta``, called from compiled
code without copies.

``np.dot(a, b, out)`` in numba takes whole contiguous matrices only (a strided view is copied,
into a fresh allocation) and always overwrites ``out``. :func:`gemm` reaches the same BLAS
(SciPy's, through numba's helper ``numba_xxgemm``) with the full interface: operands are 1-D
arrays (the arena, a scratch span) with an element offset and a row stride each, so products
read sub-matrices in place, accumulate (``beta=1``) and write into strided outputs.

The helper is declared by name and resolved when the machine code is linked, as numba's own
``np.dot`` does, so the compiled functions that call it stay cacheable on disk.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from nnjit.kernels._jit import jit

_BLAS_KIND = {types.float32: ord("s"), types.float64: ord("d")}


@intrinsic
def _xxgemm(typingctx, trans_a, trans_b, m, n, k, alpha, a, a_at, lda, b, b_at, ldb, beta, c,
            c_at, ldc):
    """numba_xxgemm on 1-D arrays of one float dtype, row-major; returns its status (0: done)."""
    arrays = (a, b, c)
    if not all(isinstance(x, types.Array) and x.ndim == 1 for x in arrays):
        return None
    dtype = c.dtype
    if dtype not in _BLAS_KIND or a.dtype != dtype or b.dtype != dtype:
        return None
    sig = types.intc(trans_a, trans_b, m, n, k, alpha, a, a_at, lda, b, b_at, ldb, beta, c, c_at,
                     ldc)

    def codegen(context, builder, signature, args):
        (ta, tb, m_, n_, k_, alpha_, a_, a_at_, lda_, b_, b_at_, ldb_, beta_, c_, c_at_,
         ldc_) = args
        intp = context.get_value_type(types.intp)
        char = ir.IntType(8)
        void_p = cgutils.voidptr_t
        fnty = ir.FunctionType(ir.IntType(32), [char, char, char, intp, intp, intp, void_p,
                                                void_p, intp, void_p, intp, void_p, void_p, intp])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")

        def pointer(array_type, value, at_type, at):
            data = context.make_array(array_type)(context, builder, value).data
            offset = context.cast(builder, at, at_type, types.intp)
            return builder.bitcast(builder.gep(data, [offset]), void_p)

        def as_intp(value, ty):
            return context.cast(builder, value, ty, types.intp)

        def scalar_slot(value, ty):
            slot = cgutils.alloca_once(builder, context.get_value_type(dtype))
            builder.store(context.cast(builder, value, ty, dtype), slot)
            return builder.bitcast(slot, void_p)

        tys = signature.args
        no, yes = ir.Constant(char, ord("n")), ir.Constant(char, ord("t"))
        # C (m x n, row-major) = op(A) op(B) is, read column-major, C.T = op(B).T op(A).T: the
        # Fortran call gets B first, and a row-major operand that is not transposed is already
        # the transpose Fortran needs.
        flag_a = builder.select(context.cast(builder, tb, tys[1], types.boolean), yes, no)
        flag_b = builder.select(context.cast(builder, ta, tys[0], types.boolean), yes, no)
        return builder.call(fn, [
            ir.Constant(char, _BLAS_KIND[dtype]), flag_a, flag_b,
            as_intp(n_, tys[3]), as_intp(m_, tys[2]), as_intp(k_, tys[4]),
            scalar_slot(alpha_, tys[5]),
            pointer(tys[9], b_, tys[10], b_at_), as_intp(ldb_, tys[11]),
            pointer(tys[6], a_, tys[7], a_at_), as_intp(lda_, tys[8]),
            scalar_slot(beta_, tys[12]),
            pointer(tys[13], c_, tys[14], c_at_), as_intp(ldc_, tys[15]),
        ])

    return sig, codegen


@jit(inline="always")
def _fits(size, at, rows, cols, ld):
    """A row-major ``rows x cols`` block at ``at`` with row stride ``ld`` fits in ``size``."""
    return rows == 0 or cols == 0 or (at >= 0 and ld >= cols and at + (rows - 1) * ld + cols <= size)


@jit
def gemm(trans_a, trans_b, m, n, k, alpha, a, a_at, lda, b, b_at, ldb, beta, c, c_at, ldc):
    """C = alpha * op(A) @ op(B) + beta * C, every matrix row-major in a 1-D array.

    C is ``m x n`` at ``c[c_at:]`` with rows ``ldc`` apart; op(A) is ``m x k``: A itself at
    ``a[a_at:]`` (rows ``lda`` apart) or, with ``trans_a``, the transpose of the ``k x m`` matrix
    stored there; op(B) (``k x n``) likewise. ``beta=0`` overwrites C (whatever it held, NaN
    included); ``beta=1`` adds to it. A block reaching outside its array raises IndexError before
    BLAS sees it (BLAS would read or write past the end).
    """
    if m == 0 or n == 0:
        return
    a_rows, a_cols = (k, m) if trans_a else (m, k)
    b_rows, b_cols = (n, k) if trans_b else (k, n)
    if not (_fits(a.shape[0], a_at, a_rows, a_cols, lda)
            and _fits(b.shape[0], b_at, b_rows, b_cols, ldb)
            and _fits(c.shape[0], c_at, m, n, ldc)):
        raise IndexError("gemm: a matrix reaches outside its array")
    if k == 0:  # BLAS would scale C by beta; the product is empty
        for i in range(m):
            for j in range(n):
                c[c_at + i * ldc + j] = beta * c[c_at + i * ldc + j] if beta != 0 else 0
        return
    _xxgemm(trans_a, trans_b, m, n, k, alpha, a, a_at, max(lda, 1), b, b_at, max(ldb, 1), beta,
            c, c_at, max(ldc, 1))
