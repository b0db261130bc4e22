"""A monotonic wall clock usable inside compiled code (for per-epoch timings).

Numba's nopython mode has no ``time.perf_counter``. Calling ``clock_gettime`` through ctypes would
embed a function address and make the caller uncacheable; this intrinsic declares the libc symbol
by name instead, so LLVM links it at load time and ``cache=True`` keeps working.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_CLOCK_MONOTONIC = 1  # Linux and macOS value of the constant


@intrinsic
def monotonic_ns(typingctx):
    """Nanoseconds from ``clock_gettime(CLOCK_MONOTONIC)`` as int64."""

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        i32 = ir.IntType(32)
        timespec = ir.LiteralStructType([i64, i64])
        fnty = ir.FunctionType(i32, [i32, timespec.as_pointer()])
        clock_gettime = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, timespec)
        builder.call(clock_gettime, [ir.Constant(i32, _CLOCK_MONOTONIC), ts])
        seconds = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nanos = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(seconds, ir.Constant(i64, 1_000_000_000)), nanos)

    return types.int64(), codegen
