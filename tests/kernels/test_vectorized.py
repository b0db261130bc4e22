"""The hot elementwise and optimizer kernels compile to packed AVX code in float32.

Inspects the generated assembly (recompiled without the cache: numba cannot inspect cached
code). A kernel that stops vectorising (float64 promotion, a division check, an aliasing
problem) loses its ymm/zmm instructions and fails here.
"""

from __future__ import annotations

import re

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

from nnjit.kernels import dense, elementwise, optim
from nnjit.kernels._jit import jit

pytestmark = [
    pytest.mark.skipif(numba.config.DISABLE_JIT, reason="inspects compiled code"),
    pytest.mark.skipif("avx" not in llvm.get_host_cpu_features().flatten(),
                       reason="the host CPU has no AVX"),
]

f32 = np.float32
vec = np.ones(256, f32)
KERNELS = [
    (elementwise.relu_forward, (vec, vec.copy())),
    (elementwise.relu_backward, (vec, vec.copy(), vec.copy(), True)),
    (elementwise.leaky_relu_forward, (vec, vec.copy(), 0.01)),
    (elementwise.add_forward, (vec, vec.copy(), vec.copy())),
    (elementwise.mul_backward, (vec, vec.copy(), vec.copy(), False)),
    (elementwise.dropout_backward, (vec, vec.copy(), vec.copy(), True)),
    (elementwise.tanh_backward, (vec, vec.copy(), vec.copy(), False)),
    (elementwise.sigmoid_backward, (vec, vec.copy(), vec.copy(), False)),
    (optim.adam_update, (vec.copy(), vec, vec.copy(), vec.copy(), 1e-3, 0.9, 0.999, 1e-8, 0.0,
                         False, 3)),
    (optim.sgd_update, (vec.copy(), vec, vec.copy(), 0.1, 0.9, 0.0, False, 0.0, 3)),
    (optim.rmsprop_update, (vec.copy(), vec, vec.copy(), vec.copy(), 0.01, 0.99, 1e-8, 0.0, 0.0,
                            3)),
    (dense.add_into, (np.ones((16, 16), f32), np.ones((16, 16), f32))),
]

# Packed single-precision arithmetic on a 256/512-bit register (conversions and moves don't count:
# a loop promoted to float64 still moves and converts float32 vectors).
PACKED = re.compile(r"\bv(add|sub|mul|div|max|min|sqrt|blendv|and|cmp\w*|f\w*madd\w*|f\w*msub\w*)"
                    r"ps\b[^\n]*%[yz]mm")


@pytest.mark.parametrize("kernel, args", KERNELS, ids=lambda k: getattr(k, "__name__", ""))
def test_float32_kernel_uses_packed_avx(kernel, args):
    fresh = jit(kernel.py_func, cache=False)
    fresh(*args)
    asm = "\n".join(fresh.inspect_asm().values())
    assert PACKED.search(asm), f"{kernel.__name__}: no packed ymm/zmm float32 instruction"
