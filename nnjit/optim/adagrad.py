"""Adagrad (Duchi, Hazan & Singer, 2011, https://jmlr.org/papers/v12/duchi11a.html)."""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_ADAGRAD
from nnjit.optim.base import Optimizer, _check


class Adagrad(Optimizer):
    r"""Adagrad as ``torch.optim.Adagrad``.

    .. math::
        s \leftarrow s + g^2;\quad
        \theta \leftarrow \theta - \frac{\eta}{1 + (t-1)\,\text{lr\_decay}}\,
        \frac{g}{\sqrt{s} + \epsilon}

    Args:
        lr (alias learning_rate): step size (default 0.01).
        lr_decay: >= 0.
        weight_decay: L2 coefficient >= 0 (added to the gradient).
        initial_accumulator_value: the sum's starting value (>= 0).
        eps: added to the denominator (> 0, default 1e-10).
    """

    kind = OPT_ADAGRAD
    n_buffers = 1

    def __init__(self, lr=None, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, *, learning_rate=None):
        super().__init__(lr, learning_rate, 0.01)
        self.lr_decay = _check(self, "lr_decay", lr_decay, 0.0)
        self.weight_decay = _check(self, "weight_decay", weight_decay, 0.0)
        self.initial_accumulator_value = _check(self, "initial_accumulator_value",
                                                initial_accumulator_value, 0.0)
        self.eps = _check(self, "eps", eps, 0.0, low_inclusive=False)

    def hyper_vector(self):
        return np.array([self.lr, self.lr_decay, self.weight_decay,
                         self.initial_accumulator_value, self.eps], dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, lr_decay=self.lr_decay, weight_decay=self.weight_decay,
                    initial_accumulator_value=self.initial_accumulator_value, eps=self.eps)
