"""The activation family: elementwise unary ops, ``in0 -> out`` of one shape.

One compiled function per direction (:func:`activation_forward`, :func:`activation_backward`)
holds every activation's kernel, inlined from :mod:`nnjit.kernels.elementwise`: numba's compile
cost is mostly per compiled function, so eight activations cost two functions, not sixteen (what
it saved: docs/performance.md, "Measurements behind the code"). The switch on the opcode sits
outside the loops, which still vectorise.
"""

import math

import numpy as np

from nnjit.kernels import elementwise as ke
from nnjit.kernels._jit import inlined, jit
from nnjit.ops.context import (
    CTX_GRADS,
    CTX_HYPER,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SLOTS,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, R_AUX0, R_FLAGS, R_IN0, R_OUT
from nnjit.tape.slot_views import slot_flat

# grad_flags bits as plain ints (one IR load each in the inlined dispatchers)
_NEED_A = NEEDS_GRAD[0]
_ACC_A = ACCUMULATE[0]
FIRST_OPCODE = 20
(_RELU, _LEAKY_RELU, _ELU, _SELU, _TANH, _SIGMOID, _SOFTPLUS,
 _GELU) = range(FIRST_OPCODE, FIRST_OPCODE + 8)


def relu(x):
    """max(x, 0)."""
    return x.tape.unary(_RELU, x)


def leaky_relu(x, negative_slope: float = 0.01):
    """x if x > 0 else negative_slope * x."""
    return x.tape.unary(_LEAKY_RELU, x, negative_slope)


def elu(x, alpha: float = 1.0):
    """x if x > 0 else alpha * (exp(x) - 1)."""
    return x.tape.unary(_ELU, x, alpha)


def selu(x):
    """Scaled ELU (Klambauer et al., 2017) with PyTorch's constants."""
    return x.tape.unary(_SELU, x)


def tanh(x):
    return x.tape.unary(_TANH, x)


def sigmoid(x):
    return x.tape.unary(_SIGMOID, x)


def softplus(x):
    """log(1 + exp(x)), computed stably."""
    return x.tape.unary(_SOFTPLUS, x)


def gelu(x):
    """x * Phi(x), the exact (erf) form, as PyTorch's default."""
    return x.tape.unary(_GELU, x)


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805
_UNARY = "(B,F)->(B,F)"

SPECS = (
    OpSpec("RELU", 1, _UNARY, lambda x: np.maximum(x, 0.0), relu, grad_inputs=(0,)),
    OpSpec("LEAKY_RELU", 1, _UNARY, lambda x, negative_slope: np.where(x > 0, x,
                                                                       negative_slope * x),
           leaky_relu, hyper=("negative_slope",), sample_hyper={"negative_slope": 0.1},
           grad_inputs=(0,), aux={"aux0": "hyper index of negative_slope"}),
    OpSpec("ELU", 1, _UNARY, lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x)), elu,
           hyper=("alpha",), sample_hyper={"alpha": 0.7}, grad_inputs=(0,),
           aux={"aux0": "hyper index of alpha"}),
    OpSpec("SELU", 1, _UNARY,
           lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)), selu,
           grad_inputs=(0,)),
    OpSpec("TANH", 1, _UNARY, np.tanh, tanh, grad_inputs=(0,)),
    OpSpec("SIGMOID", 1, _UNARY, _sigmoid, sigmoid, grad_inputs=(0,)),
    OpSpec("SOFTPLUS", 1, _UNARY, lambda x: np.logaddexp(0.0, x), softplus, grad_inputs=(0,)),
    OpSpec("GELU", 1, _UNARY, _gelu, gelu, grad_inputs=(0,)),
)
_END = FIRST_OPCODE + len(SPECS)

_NAMES = ("relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "gelu")
_fwd = {name: inlined(getattr(ke, f"{name}_forward")) for name in _NAMES}
_bwd = {name: inlined(getattr(ke, f"{name}_backward")) for name in _NAMES}
relu_f, leaky_relu_f, elu_f, selu_f = _fwd["relu"], _fwd["leaky_relu"], _fwd["elu"], _fwd["selu"]
tanh_f, sigmoid_f, softplus_f, gelu_f = (_fwd["tanh"], _fwd["sigmoid"], _fwd["softplus"],
                                         _fwd["gelu"])
relu_b, leaky_relu_b, elu_b, selu_b = _bwd["relu"], _bwd["leaky_relu"], _bwd["elu"], _bwd["selu"]
tanh_b, sigmoid_b, softplus_b, gelu_b = (_bwd["tanh"], _bwd["sigmoid"], _bwd["softplus"],
                                         _bwd["gelu"])


@jit
def activation_forward(op, x, y, alpha):
    """y (n,) = activation ``op`` (its opcode) of x (n,); ``alpha`` is its parameter.

    Returns False, writing nothing, when ``op`` is no activation (the interpreter stops the run).
    """
    if op == _RELU:
        relu_f(x, y)
    elif op == _LEAKY_RELU:
        leaky_relu_f(x, y, alpha)
    elif op == _ELU:
        elu_f(x, y, alpha)
    elif op == _SELU:
        selu_f(x, y)
    elif op == _TANH:
        tanh_f(x, y)
    elif op == _SIGMOID:
        sigmoid_f(x, y)
    elif op == _SOFTPLUS:
        softplus_f(x, y)
    elif op == _GELU:
        gelu_f(x, y)
    else:
        return False
    return True


@jit
def activation_backward(op, x, y, dy, dx, accumulate, alpha):
    """dx (n,) (+)= dy * activation ``op``'s derivative, from x and/or its output y.

    Returns False, writing nothing, when ``op`` is no activation (the interpreter stops the run).
    """
    if op == _RELU:
        relu_b(y, dy, dx, accumulate)
    elif op == _LEAKY_RELU:
        leaky_relu_b(x, dy, dx, accumulate, alpha)
    elif op == _ELU:
        elu_b(x, y, dy, dx, accumulate, alpha)
    elif op == _SELU:
        selu_b(x, y, dy, dx, accumulate)
    elif op == _TANH:
        tanh_b(y, dy, dx, accumulate)
    elif op == _SIGMOID:
        sigmoid_b(y, dy, dx, accumulate)
    elif op == _SOFTPLUS:
        softplus_b(x, dy, dx, accumulate)
    elif op == _GELU:
        gelu_b(x, dy, dx, accumulate)
    else:
        return False
    return True


@dispatcher
def forward(op, i, ctx):
    handled = (op >= _RELU) & (op < _END)
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        h = records[i, R_AUX0]
        handled = activation_forward(op, slot_flat(values, slots, records[i, R_IN0], rows),
                                     slot_flat(values, slots, records[i, R_OUT], rows),
                                     ctx[CTX_HYPER][h] if h >= 0 else 0.0)
    return handled


@dispatcher
def backward(op, i, ctx):
    handled = (op >= _RELU) & (op < _END)
    if handled:
        records = ctx[CTX_RECORDS]
        f = records[i, R_FLAGS]
        if (f & _NEED_A) != 0:
            slots = ctx[CTX_SLOTS]
            values = ctx[CTX_VALUES]
            grads = ctx[CTX_GRADS]
            rows = ctx[CTX_ROWS]
            a = records[i, R_IN0]
            o = records[i, R_OUT]
            h = records[i, R_AUX0]
            handled = activation_backward(op, slot_flat(values, slots, a, rows),
                                          slot_flat(values, slots, o, rows),
                                          slot_flat(grads, slots, o, rows),
                                          slot_flat(grads, slots, a, rows), (f & _ACC_A) != 0,
                                          ctx[CTX_HYPER][h] if h >= 0 else 0.0)
    return handled


FAMILY = register(OpFamily("activations", SPECS, forward, backward, core=True,
                           first_opcode=FIRST_OPCODE))
