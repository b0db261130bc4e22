"""scikit-learn's two stochastic solvers, as optimizers of the compiled loop.

``MLPClassifier`` / ``MLPRegressor`` update their weights with arithmetic of their own, which
differs from ``torch.optim``'s (the ``sklearn`` forms of
:func:`nnjit.kernels.optim.sgd_update` and :func:`~nnjit.kernels.optim.adam_update`);
:mod:`nnjit.sklearn` uses these two so that its estimators follow scikit-learn's loss curves,
not merely its ideas.
"""

from __future__ import annotations

import numpy as np

from nnjit.engine.fields import OPT_SKLEARN_ADAM, OPT_SKLEARN_SGD
from nnjit.optim.base import Optimizer, _check


class SklearnSGD(Optimizer):
    r"""scikit-learn's ``SGDOptimizer``: :math:`v \leftarrow \mu v - \eta g`, then
    :math:`\theta \leftarrow \theta + \mu v - \eta g` (Nesterov) or :math:`\theta + v`.

    Args:
        lr (alias learning_rate): step size (scikit-learn's ``learning_rate_init``, default 0.001).
        momentum: :math:`\mu` in [0, 1] (default 0.9).
        nesterov: Nesterov's momentum (default True, scikit-learn's ``nesterovs_momentum``).
    """

    kind = OPT_SKLEARN_SGD
    n_buffers = 1

    def __init__(self, lr=None, momentum=0.9, nesterov=True, *, learning_rate=None):
        super().__init__(lr, learning_rate, 0.001)
        self.momentum = _check(self, "momentum", momentum, 0.0, 1.0)
        self.nesterov = bool(nesterov)

    def hyper_vector(self):
        # SGD's layout (dampening and weight decay 0): the compiled step shares its call
        return np.array([self.lr, self.momentum, 0.0, float(self.nesterov), 0.0, 0.0],
                        dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, momentum=self.momentum, nesterov=self.nesterov)


class SklearnAdam(Optimizer):
    r"""scikit-learn's ``AdamOptimizer``: the moments as in Adam, then
    :math:`\theta \leftarrow \theta - \eta_t\, m / (\sqrt{v} + \epsilon)` with
    :math:`\eta_t = \eta \sqrt{1-\beta_2^t} / (1-\beta_1^t)` (``epsilon`` is added to the
    uncorrected :math:`\sqrt{v}`, unlike :class:`~nnjit.optim.Adam`).

    Args:
        lr (alias learning_rate): step size (default 0.001).
        beta_1, beta_2: moment decay rates in [0, 1).
        epsilon: > 0 (default 1e-8).
    """

    kind = OPT_SKLEARN_ADAM
    n_buffers = 2

    def __init__(self, lr=None, beta_1=0.9, beta_2=0.999, epsilon=1e-8, *, learning_rate=None):
        super().__init__(lr, learning_rate, 0.001)
        self.beta_1 = _check(self, "beta_1", beta_1, 0.0, 1.0, high_inclusive=False)
        self.beta_2 = _check(self, "beta_2", beta_2, 0.0, 1.0, high_inclusive=False)
        self.epsilon = _check(self, "epsilon", epsilon, 0.0, low_inclusive=False)

    def hyper_vector(self):
        # Adam's layout (no weight decay, not decoupled): the compiled step shares its call
        return np.array([self.lr, self.beta_1, self.beta_2, self.epsilon, 0.0, 0.0],
                        dtype=np.float64)

    def get_config(self):
        return dict(lr=self.lr, beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
