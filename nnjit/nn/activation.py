"""Activation layers: thin modules over :mod:`nnjit.nn.functional`."""

from __future__ import annotations

from nnjit.checks import Real
from nnjit.nn import functional as F
from nnjit.nn.module import Module
from nnjit.tape.tape import Tensor


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class LeakyReLU(Module):
    """x if x > 0 else negative_slope * x (default slope 0.01, as PyTorch)."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = Real().check("LeakyReLU: negative_slope", negative_slope)

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = Real().check("ELU: alpha", alpha)

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class SELU(Module):
    """Scaled ELU with PyTorch's constants."""

    def forward(self, x: Tensor) -> Tensor:
        return F.selu(x)


class Tanh(Module):
    """tanh(x)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x)), computed stably."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Softplus(Module):
    """log(1 + exp(x)), computed stably."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x)


class GELU(Module):
    """Exact (erf) GELU."""

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x)
