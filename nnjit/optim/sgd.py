"""Stochastic gradient descent with optional momentum and Nesterov momentum."""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_SGD
from nnjit.optim.base import Optimizer, _check


class SGD(Optimizer):
    r"""SGD as in ``torch.optim.SGD``.

    .. math::
        g \leftarrow g + \lambda\theta;\quad
        b \leftarrow \mu b + (1-\tau) g;\quad
        \theta \leftarrow \theta - \eta\,(\text{nesterov} ? g + \mu b : b)

    Args:
        lr (alias learning_rate): step size (default 0.01).
        momentum: :math:`\mu` in [0, 1).
        dampening: :math:`\tau` in [0, 1].
        nesterov: use Nesterov momentum (needs momentum > 0 and dampening 0).
        weight_decay: L2 coefficient :math:`\lambda` >= 0 added to the gradient.
    """

    kind = OPT_SGD
    n_buffers = 1

    def __init__(self, lr=None, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0,
                 *, learning_rate=None):
        super().__init__(lr, learning_rate, 0.01)
        self.momentum = _check(self, "momentum", momentum, 0.0, 1.0, high_inclusive=False)
        self.dampening = _check(self, "dampening", dampening, 0.0, 1.0)
        self.weight_decay = _check(self, "weight_decay", weight_decay, 0.0)
        self.nesterov = bool(nesterov)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")

    def hyper_vector(self):
        return np.array([self.lr, self.momentum, self.dampening, float(self.nesterov),
                         self.weight_decay, 0.0], dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, momentum=self.momentum, dampening=self.dampening,
                    nesterov=self.nesterov, weight_decay=self.weight_decay)
