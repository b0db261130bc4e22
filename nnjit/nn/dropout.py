"""``Dropout``: inverted dropout driven by the trainer's own RNG."""

from __future__ import annotations

from nnjit.checks import Real
from nnjit.nn import functional as F
from nnjit.nn.module import Module
from nnjit.tape.tape import Tensor


class Dropout(Module):
    """Zero each element with probability ``p`` in training batches and scale the rest by
    ``1 / (1 - p)``; the identity when validating or predicting.

    Args:
        p: drop probability in [0, 1).
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = Real(min=0, lt=1).check("Dropout: p", p)

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"
