"""Adamax (Kingma & Ba, 2015, section 7.1, https://arxiv.org/abs/1412.6980)."""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_ADAMAX
from nnjit.optim.adam import betas_pair
from nnjit.optim.base import Optimizer, _check


class Adamax(Optimizer):
    r"""Adamax (Adam with the infinity norm) as ``torch.optim.Adamax``.

    .. math::
        m \leftarrow \beta_1 m + (1-\beta_1) g;\quad u \leftarrow \max(\beta_2 u, |g| + \epsilon);
        \quad \theta \leftarrow \theta - \frac{\eta}{1-\beta_1^t}\,\frac{m}{u}

    Args:
        lr (alias learning_rate): step size (default 0.002).
        betas: :math:`(\beta_1, \beta_2)`, each in [0, 1).
        eps: > 0.
        weight_decay: L2 coefficient >= 0 (added to the gradient).
    """

    kind = OPT_ADAMAX
    n_buffers = 2

    def __init__(self, lr=None, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *,
                 learning_rate=None):
        super().__init__(lr, learning_rate, 0.002)
        self.betas = betas_pair(self, betas)
        self.eps = _check(self, "eps", eps, 0.0, low_inclusive=False)
        self.weight_decay = _check(self, "weight_decay", weight_decay, 0.0)

    def hyper_vector(self):
        return np.array([self.lr, self.betas[0], self.betas[1], self.eps, self.weight_decay],
                        dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, betas=self.betas, eps=self.eps, weight_decay=self.weight_decay)
