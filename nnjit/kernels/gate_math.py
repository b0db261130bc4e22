"""exp, sigmoid and tanh written as arithmetic that LLVM vectorises, for the recurrent cells.

numba calls libm for ``math.exp`` / ``math.tanh`` one element at a time: ~9 ns per element for
sigmoid times tanh in float32 on this project's machines, and an LSTM step evaluates five of
them per hidden unit, which made the transcendentals cost more than the step's matrix product.
These helpers are inlined and contain no calls, so a loop over a row vectorises them.

``exp`` reduces ``v = k ln2 + r`` with ``|r| <= ln2 / 2`` (Cody-Waite: ``ln2`` split in a part
exact in 9 bits, so ``k * LN2_HI`` is exact in float32 and float64 alike), evaluates the Taylor
polynomial in ``r`` (degree 12 in float64, truncation below 2e-16 relative; degree 7 in float32,
7e-9) and scales by ``2**k`` built from its exponent bits. The argument is clamped to
[-80, 80]: a sigmoid or tanh of it is then exact to far below either dtype's resolution, and
``2**k`` stays a normal float32.
"""

import math

import numpy as np

from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from nnjit.kernels._jit import jit

LN2_HI = 0.693359375  # 355 / 512: k * LN2_HI is exact for |k| < 2**15
LN2_LO = -2.1219444005469058277e-4  # ln 2 - LN2_HI
LOG2E = 1.4426950408889634074
CLAMP = 80.0


@intrinsic
def pow2(typingctx, k, like):
    """``2.0 ** k`` in the float type of ``like`` (``k`` an integer in the normal exponent range),
    built from its exponent bits."""
    if not isinstance(k, types.Integer) or like not in (types.float32, types.float64):
        return None
    bits = like.bitwidth
    mantissa, bias = (23, 127) if bits == 32 else (52, 1023)

    def codegen(context, builder, signature, args):
        ity = ir.IntType(bits)
        kv = context.cast(builder, args[0], signature.args[0], types.int64)
        kv = builder.trunc(kv, ity) if bits == 32 else kv
        word = builder.shl(builder.add(kv, ir.Constant(ity, bias)), ir.Constant(ity, mantissa))
        return builder.bitcast(word, context.get_value_type(like))

    return like(k, like), codegen


def _reduced_exp(v, dt):
    """e ** v for v in [-80, 80] in dtype ``dt`` (typed by :func:`_reduced_exp_impl`)."""


@overload(_reduced_exp, inline="always")
def _reduced_exp_impl(v, dt):
    """float32: k as a 32-bit integer (a 64-bit one costs AVX-512 two conversions per vector) and
    Taylor to degree 7 (truncation 7e-9 relative: below float32's 6e-8); float64: degree 12."""
    if v == types.float32:
        def exp32(v, dt):
            k = np.int32(math.floor(v * dt.type(LOG2E) + dt.type(0.5)))
            kf = dt.type(k)
            r = (v - kf * dt.type(LN2_HI)) - kf * dt.type(LN2_LO)
            p = dt.type(1.98412698412698412698e-04)
            p = p * r + dt.type(1.38888888888888888889e-03)
            p = p * r + dt.type(8.33333333333333333333e-03)
            p = p * r + dt.type(4.16666666666666666667e-02)
            p = p * r + dt.type(1.66666666666666666667e-01)
            p = p * r + dt.type(0.5)
            p = p * r + dt.type(1.0)
            p = p * r + dt.type(1.0)
            return p * pow2(k, dt.type(1.0))
        return exp32

    def exp64(v, dt):
        k = math.floor(v * dt.type(LOG2E) + dt.type(0.5))
        kf = dt.type(k)
        r = (v - kf * dt.type(LN2_HI)) - kf * dt.type(LN2_LO)
        # Horner over 1/n!, n = 12 .. 0
        p = dt.type(2.08767569878680989792e-09)
        p = p * r + dt.type(2.50521083854417187751e-08)
        p = p * r + dt.type(2.75573192239858906526e-07)
        p = p * r + dt.type(2.75573192239858906526e-06)
        p = p * r + dt.type(2.48015873015873015873e-05)
        p = p * r + dt.type(1.98412698412698412698e-04)
        p = p * r + dt.type(1.38888888888888888889e-03)
        p = p * r + dt.type(8.33333333333333333333e-03)
        p = p * r + dt.type(4.16666666666666666667e-02)
        p = p * r + dt.type(1.66666666666666666667e-01)
        p = p * r + dt.type(0.5)
        p = p * r + dt.type(1.0)
        p = p * r + dt.type(1.0)
        return p * pow2(k, dt.type(1.0))
    return exp64


@jit(inline="always")
def exp(v, dt):
    """e ** v in dtype ``dt`` (an array's ``.dtype``: constants of its type, as a float64
    literal would promote a float32 loop); v clamped to [-80, 80] (module doc)."""
    lim = dt.type(CLAMP)
    return _reduced_exp(min(max(v, -lim), lim), dt)


@jit(inline="always")
def sigmoid(v, dt):
    """1 / (1 + e ** -v) in dtype ``dt`` (exact limits: exp's clamp keeps 1 + e finite)."""
    one = dt.type(1.0)
    return one / (one + exp(-v, dt))


@jit(inline="always")
def tanh(v, dt):
    """tanh v = 2 / (1 + e ** -2v) - 1 in dtype ``dt`` (absolute error near 0 at the dtype's
    resolution)."""
    one = dt.type(1.0)
    two = dt.type(2.0)
    return two / (one + exp(-two * v, dt)) - one
