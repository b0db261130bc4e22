"""The SiLU op family of ``benchmarks.custom_ops``: a user-defined family, outside the package,
written as ``docs/custom-ops.md`` describes (kernels, one spec, a recorder, two dispatchers).

Kept in its own file so that editing the benchmark's report does not change the family's source
digest (which would compile its build again).
"""

import math

import numpy as np

from nnjit import ops


@ops.kernel
def silu_forward(x, y, s):
    """y = x * s with s = sigmoid(x) (computed stably, and kept for the backward).
    Shapes: x, y, s (n,)."""
    zero = x.dtype.type(0.0)
    one = x.dtype.type(1.0)
    for k in range(x.shape[0]):
        v = x[k]
        e = math.exp(-abs(v))
        r = one / (one + e)
        sk = r if v >= zero else e * r
        s[k] = sk
        y[k] = v * sk


@ops.kernel
def silu_backward(y, s, dy, dx, accumulate):
    """dx (+)= dy * (s + y * (1 - s)), the derivative s + x * s * (1 - s) from the forward's
    output and saved sigmoid (no second exp). Shapes: y, s, dy, dx (n,)."""
    one = y.dtype.type(1.0)
    for k in range(y.shape[0]):
        g = dy[k] * (s[k] + y[k] * (one - s[k]))
        if accumulate:
            dx[k] += g
        else:
            dx[k] = g


def silu(x):
    """Record SiLU of ``x`` on its tape (inside a Module's forward). The sigmoid goes to a
    buffer slot, input 1 of the record (as dropout keeps its mask)."""
    saved = x.tape.alloc_tensor(x.rows, x.cols)
    return x.tape.record(SILU, [x], x.rows, x.cols, extra_inputs=[saved])


@ops.dispatcher
def forward(op, i, ctx):
    if op == SILU:
        silu_forward(ops.input_flat(ctx, i, 0), ops.output_flat(ctx, i),
                     ops.input_flat(ctx, i, 1))
    else:
        return False
    return True


@ops.dispatcher
def backward(op, i, ctx):
    if op == SILU:
        if ops.needs_grad(ctx, i, 0):
            silu_backward(ops.output_flat(ctx, i), ops.input_flat(ctx, i, 1),
                          ops.output_grad_flat(ctx, i), ops.input_grad_flat(ctx, i, 0),
                          ops.accumulates(ctx, i, 0))
    else:
        return False
    return True


SPECS = [ops.OpSpec(name="SILU", arity=1, signature="(B,F)->(B,F)",
                    reference=lambda x: x / (1.0 + np.exp(-x)), recorder=silu,
                    grad_inputs=(0,))]
FAMILY = ops.register(ops.OpFamily("bench_silu", SPECS, forward, backward))
SILU = FAMILY.opcode("SILU")
