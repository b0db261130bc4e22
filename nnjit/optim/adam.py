"""Adam (Kingma & Ba, 2015, https://arxiv.org/abs/1412.6980)."""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_ADAM
from nnjit.optim.base import Optimizer, _check


class Adam(Optimizer):
    r"""Adam as in ``torch.optim.Adam`` (L2 ``weight_decay`` added to the gradient).

    .. math::
        m \leftarrow \beta_1 m + (1-\beta_1) g;\quad v \leftarrow \beta_2 v + (1-\beta_2) g^2;\quad
        \theta \leftarrow \theta - \eta\,\frac{m / (1-\beta_1^t)}{\sqrt{v / (1-\beta_2^t)} + \epsilon}

    Args:
        lr (alias learning_rate): step size (default 0.001).
        betas: :math:`(\beta_1, \beta_2)`, each in [0, 1).
        eps: added to the denominator (> 0).
        weight_decay: L2 coefficient >= 0.
    """

    kind = OPT_ADAM
    n_buffers = 2
    decoupled = False
    default_weight_decay = 0.0

    def __init__(self, lr=None, betas=(0.9, 0.999), eps=1e-8, weight_decay=None, *,
                 learning_rate=None):
        super().__init__(lr, learning_rate, 0.001)
        self.betas = betas_pair(self, betas)
        self.eps = _check(self, "eps", eps, 0.0, low_inclusive=False)
        wd = self.default_weight_decay if weight_decay is None else weight_decay
        self.weight_decay = _check(self, "weight_decay", wd, 0.0)

    def hyper_vector(self):
        return np.array([self.lr, self.betas[0], self.betas[1], self.eps, self.weight_decay,
                         float(self.decoupled)], dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, betas=self.betas, eps=self.eps, weight_decay=self.weight_decay)


def betas_pair(opt, betas) -> tuple[float, float]:
    """``betas`` as a pair of floats, each in [0, 1) (torch's rule); ValueError naming it."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{type(opt).__name__}: betas must be a pair, got {betas!r}")
    for i, b in enumerate(betas):
        _check(opt, f"beta parameter at index {i}", b, 0.0, 1.0, high_inclusive=False)
    return float(betas[0]), float(betas[1])
