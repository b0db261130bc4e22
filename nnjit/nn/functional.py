"""Functional forms of the ops, for use inside ``forward`` on symbolic tensors.

Each is its op family's recorder (``nnjit/ops/``): one definition per op.
"""

from nnjit.ops.activations import (  # noqa: F401  (the public names of nn.functional)
    elu,
    gelu,
    leaky_relu,
    relu,
    selu,
    sigmoid,
    softplus,
    tanh,
)
from nnjit.ops.dropout import dropout  # noqa: F401

__all__ = ["elu", "gelu", "leaky_relu", "relu", "selu", "sigmoid", "softplus", "tanh", "dropout"]
from nnjit.ops.normalization import batch_norm, layer_norm  # noqa: E402,F401

__all__ += ["batch_norm", "layer_norm"]
