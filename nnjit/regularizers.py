"""L2 regularisation, in the two flavours users meet elsewhere.

* :class:`L2Regularizer` (the inspiring C++ engine's): every parameter, biases included,
  gradient ``+= lam * w`` on every step, not divided by the batch size
  (penalty ``0.5 * lam * ||w||^2``; the same as PyTorch's ``weight_decay=lam`` in SGD).
* :class:`SklearnL2Regularizer` (scikit-learn's MLP ``alpha``): weights only, no biases,
  penalty ``0.5 * alpha * ||W||^2 / batch_size``, gradient ``+= alpha * W / batch_size``.

Both add the penalty to the reported training loss, as scikit-learn does.
"""

from __future__ import annotations

import numpy as np

from nnjit.checks import Real


class Regularizer:
    """Base class: which parameters are penalised and how the coefficient scales."""

    per_batch = False
    weights_only = False

    def __init__(self, coef: float):
        self.coef = Real(min=0).check(f"{type(self).__name__}: coef", coef)

    def spans(self, param_spans: dict[str, tuple[int, int]]) -> np.ndarray:
        """``[offset, length]`` rows of the penalised parameters in the parameter block
        (int64, C-contiguous: passed to compiled code as is)."""
        rows = [
            span for name, span in param_spans.items()
            if not (self.weights_only and name.rsplit(".", 1)[-1] == "bias")
        ]
        return np.array(rows, dtype=np.int64).reshape(-1, 2)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.coef})"


class L2Regularizer(Regularizer):
    """``0.5 * lam * ||w||^2`` over every parameter, applied per step (not divided by batch)."""


class SklearnL2Regularizer(Regularizer):
    """scikit-learn's ``alpha``: ``0.5 * alpha * ||W||^2 / batch_size`` over weights only."""

    per_batch = True
    weights_only = True
