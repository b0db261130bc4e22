"""One forward and one backward kernel for every activation, switching on the opcode.

Numba's compile cost is mostly per compiled function (~150-300 ms each). Dispatching the eight
activations through two family kernels, with the per-activation loops of
:mod:`nnjit.kernels.elementwise` inlined into them (same source, ``inline="always"``), compiles
two functions instead of sixteen. The switch sits outside the loops, which still vectorise.
"""

from nnjit.graph.opcodes import Opcode
from nnjit.kernels import elementwise as ke
from nnjit.kernels._jit import jit

_RELU = int(Opcode.RELU)
_LEAKY_RELU = int(Opcode.LEAKY_RELU)
_ELU = int(Opcode.ELU)
_SELU = int(Opcode.SELU)
_TANH = int(Opcode.TANH)
_SIGMOID = int(Opcode.SIGMOID)
_SOFTPLUS = int(Opcode.SOFTPLUS)
_GELU = int(Opcode.GELU)


def _inlined(kernel):
    return jit(kernel.py_func, inline="always")


_fwd = {name: _inlined(getattr(ke, f"{name}_forward"))
        for name in ("relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "gelu")}
_bwd = {name: _inlined(getattr(ke, f"{name}_backward"))
        for name in ("relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "gelu")}
relu_f, leaky_relu_f, elu_f, selu_f = _fwd["relu"], _fwd["leaky_relu"], _fwd["elu"], _fwd["selu"]
tanh_f, sigmoid_f, softplus_f, gelu_f = (_fwd["tanh"], _fwd["sigmoid"], _fwd["softplus"],
                                         _fwd["gelu"])
relu_b, leaky_relu_b, elu_b, selu_b = _bwd["relu"], _bwd["leaky_relu"], _bwd["elu"], _bwd["selu"]
tanh_b, sigmoid_b, softplus_b, gelu_b = (_bwd["tanh"], _bwd["sigmoid"], _bwd["softplus"],
                                         _bwd["gelu"])


@jit
def activation_forward(op, x, y, alpha):
    """y (n,) = activation ``op`` (an Opcode value) of x (n,); ``alpha`` is its parameter."""
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
    else:
        gelu_f(x, y)


@jit
def activation_backward(op, x, y, dy, dx, accumulate, alpha):
    """dx (n,) (+)= dy * activation ``op``'s derivative, from x and/or its output y."""
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
    else:
        gelu_b(x, dy, dx, accumulate)
