"""NAdam (Dozat, 2016, https://openreview.net/forum?id=OM0jvwB8jIp57ZJjtNEZ)."""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_NADAM
from nnjit.optim.adam import betas_pair
from nnjit.optim.base import Optimizer, _check


class NAdam(Optimizer):
    r"""Adam with Nesterov momentum as ``torch.optim.NAdam``: the momentum coefficient of step
    :math:`t` is :math:`\mu_t = \beta_1 (1 - \tfrac12\, 0.96^{t\psi})` (``momentum_decay``
    :math:`\psi`), and the step mixes the gradient and the momentum with
    :math:`\mu_t` and :math:`\mu_{t+1}` over their running product.

    Args:
        lr (alias learning_rate): step size (default 0.002).
        betas: :math:`(\beta_1, \beta_2)`, each in [0, 1).
        eps: > 0.
        weight_decay: >= 0; added to the gradient, or with ``decoupled_weight_decay`` applied to
            the weights as AdamW does.
        momentum_decay: :math:`\psi` >= 0 (default 0.004).
        decoupled_weight_decay: see ``weight_decay``.
    """

    kind = OPT_NADAM
    n_buffers = 3  # the moments, and the momentum product (the third row's first value)

    def __init__(self, lr=None, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, learning_rate=None):
        super().__init__(lr, learning_rate, 0.002)
        self.betas = betas_pair(self, betas)
        self.eps = _check(self, "eps", eps, 0.0, low_inclusive=False)
        self.weight_decay = _check(self, "weight_decay", weight_decay, 0.0)
        self.momentum_decay = _check(self, "momentum_decay", momentum_decay, 0.0)
        self.decoupled_weight_decay = bool(decoupled_weight_decay)

    def hyper_vector(self):
        return np.array([self.lr, self.betas[0], self.betas[1], self.eps, self.weight_decay,
                         self.momentum_decay, float(self.decoupled_weight_decay)],
                        dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, betas=self.betas, eps=self.eps, weight_decay=self.weight_decay,
                    momentum_decay=self.momentum_decay,
                    decoupled_weight_decay=self.decoupled_weight_decay)
