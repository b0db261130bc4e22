"""RAdam (Liu et al., 2020, https://arxiv.org/abs/1908.03265)."""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_RADAM
from nnjit.optim.adam import betas_pair
from nnjit.optim.base import Optimizer, _check


class RAdam(Optimizer):
    r"""Rectified Adam as ``torch.optim.RAdam``: Adam whose adaptive step is scaled by the
    rectification term once the variance estimate's approximated length
    :math:`\rho_t = \rho_\infty - 2t\beta_2^t/(1-\beta_2^t)` exceeds 5, and a bias-corrected
    momentum step before.

    Args:
        lr (alias learning_rate): step size (default 0.001).
        betas: :math:`(\beta_1, \beta_2)`, each in [0, 1).
        eps: > 0.
        weight_decay: >= 0; added to the gradient, or with ``decoupled_weight_decay`` applied to
            the weights as AdamW does.
        decoupled_weight_decay: see ``weight_decay``.
    """

    kind = OPT_RADAM
    n_buffers = 2

    def __init__(self, lr=None, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False, *, learning_rate=None):
        super().__init__(lr, learning_rate, 0.001)
        self.betas = betas_pair(self, betas)
        self.eps = _check(self, "eps", eps, 0.0, low_inclusive=False)
        self.weight_decay = _check(self, "weight_decay", weight_decay, 0.0)
        self.decoupled_weight_decay = bool(decoupled_weight_decay)

    def hyper_vector(self):
        return np.array([self.lr, self.betas[0], self.betas[1], self.eps, self.weight_decay,
                         float(self.decoupled_weight_decay)], dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, betas=self.betas, eps=self.eps, weight_decay=self.weight_decay,
                    decoupled_weight_decay=self.decoupled_weight_decay)
