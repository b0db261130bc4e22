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
from nnjit.ops.conv import conv2d  # noqa: F401
from nnjit.ops.dropout import dropout  # noqa: F401
from nnjit.ops.embedding import embedding  # noqa: F401
from nnjit.ops.joining import cat, concat  # noqa: F401
from nnjit.ops.normalization import batch_norm, layer_norm  # noqa: F401
from nnjit.ops.pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d  # noqa: F401

__all__ = ["elu", "gelu", "leaky_relu", "relu", "selu", "sigmoid", "softplus", "tanh", "dropout",
           "embedding", "cat", "concat", "batch_norm", "layer_norm", "max_pool2d", "avg_pool2d",
           "adaptive_avg_pool2d", "conv2d"]
