"""Adadelta (Zeiler, 2012, https://arxiv.org/abs/1212.5701)."""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_ADADELTA
from nnjit.optim.base import Optimizer, _check


class Adadelta(Optimizer):
    r"""Adadelta as ``torch.optim.Adadelta``.

    .. math::
        v \leftarrow \rho v + (1-\rho) g^2;\quad
        \Delta = \frac{\sqrt{u + \epsilon}}{\sqrt{v + \epsilon}}\, g;\quad
        u \leftarrow \rho u + (1-\rho)\Delta^2;\quad \theta \leftarrow \theta - \eta\,\Delta

    Args:
        lr (alias learning_rate): scales the step (default 1.0).
        rho: decay of the running averages, in [0, 1].
        eps: > 0 (default 1e-6).
        weight_decay: L2 coefficient >= 0 (added to the gradient).
    """

    kind = OPT_ADADELTA
    n_buffers = 2

    def __init__(self, lr=None, rho=0.9, eps=1e-6, weight_decay=0.0, *, learning_rate=None):
        super().__init__(lr, learning_rate, 1.0)
        self.rho = _check(self, "rho", rho, 0.0, 1.0)
        self.eps = _check(self, "eps", eps, 0.0, low_inclusive=False)
        self.weight_decay = _check(self, "weight_decay", weight_decay, 0.0)

    def hyper_vector(self):
        return np.array([self.lr, self.rho, self.eps, self.weight_decay], dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, rho=self.rho, eps=self.eps, weight_decay=self.weight_decay)
