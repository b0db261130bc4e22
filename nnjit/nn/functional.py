"""Functional forms of the ops, for use inside ``forward`` on symbolic tensors."""

from __future__ import annotations

from nnjit.ops.opcodes import Opcode
from nnjit.tape.tape import Tensor


def relu(x: Tensor) -> Tensor:
    """max(x, 0)."""
    return x.tape.unary(Opcode.RELU, x)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    """x if x > 0 else negative_slope * x."""
    return x.tape.unary(Opcode.LEAKY_RELU, x, negative_slope)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """x if x > 0 else alpha * (exp(x) - 1)."""
    return x.tape.unary(Opcode.ELU, x, alpha)


def selu(x: Tensor) -> Tensor:
    """Scaled ELU (Klambauer et al., 2017) with PyTorch's constants."""
    return x.tape.unary(Opcode.SELU, x)


def tanh(x: Tensor) -> Tensor:
    return x.tape.unary(Opcode.TANH, x)


def sigmoid(x: Tensor) -> Tensor:
    return x.tape.unary(Opcode.SIGMOID, x)


def softplus(x: Tensor) -> Tensor:
    """log(1 + exp(x)), computed stably."""
    return x.tape.unary(Opcode.SOFTPLUS, x)


def gelu(x: Tensor) -> Tensor:
    """x * Phi(x), the exact (erf) form, as PyTorch's default."""
    return x.tape.unary(Opcode.GELU, x)


def dropout(x: Tensor, p: float = 0.5) -> Tensor:
    """Inverted dropout: active in training batches only (on the non-zeros of sparse features)."""
    if hasattr(x, "nonzeros"):  # nnjit.graph.edges.SparseFeatures
        return x.dropout(p)
    return x.tape.dropout(x, p)
