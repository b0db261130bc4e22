"""RMSprop (Hinton, Lecture 6e of "Neural Networks for Machine Learning")."""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_RMSPROP
from nnjit.optim.base import Optimizer, _check


class RMSprop(Optimizer):
    r"""RMSprop as ``torch.optim.RMSprop`` (``centered=False``).

    .. math::
        v \leftarrow \alpha v + (1-\alpha) g^2;\quad
        \theta \leftarrow \theta - \eta\, g / (\sqrt{v} + \epsilon)

    Args:
        lr (alias learning_rate): step size (default 0.01).
        alpha: smoothing constant in [0, 1).
        eps: > 0.
        weight_decay: L2 coefficient >= 0.
        momentum: in [0, 1).
    """

    kind = OPT_RMSPROP
    n_buffers = 2

    def __init__(self, lr=None, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, *,
                 learning_rate=None):
        super().__init__(lr, learning_rate, 0.01)
        self.alpha = _check(self, "alpha", alpha, 0.0, 1.0, high_inclusive=False)
        self.eps = _check(self, "eps", eps, 0.0, low_inclusive=False)
        self.weight_decay = _check(self, "weight_decay", weight_decay, 0.0)
        self.momentum = _check(self, "momentum", momentum, 0.0, 1.0, high_inclusive=False)

    def hyper_vector(self):
        return np.array([self.lr, self.alpha, self.eps, self.weight_decay, self.momentum, 0.0],
                        dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, alpha=self.alpha, eps=self.eps, weight_decay=self.weight_decay,
                    momentum=self.momentum)
