"""AdamW (Loshchilov & Hutter, 2019, https://arxiv.org/abs/1711.05101)."""

from __future__ import annotations

from nnjit.optim.adam import Adam


class AdamW(Adam):
    r"""Adam with decoupled weight decay, as ``torch.optim.AdamW``:
    :math:`\theta \leftarrow \theta (1 - \eta\lambda)` before the Adam update.

    Args: as :class:`Adam`; ``weight_decay`` defaults to 0.01.
    """

    decoupled = True
    default_weight_decay = 0.01
