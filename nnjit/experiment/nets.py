"""Networks: the :class:`Nets` architectures, the :class:`NetConfig` that gives a net's shape, and
the :class:`Activations` a net uses between its layers.

A net's kind and its shape are one concept: ``NetConfig.kind`` is a :class:`Nets` member, and a
member builds its net from a :class:`NetConfig` (``Nets.MLP(config)``, or
``Nets.MLP(in_dim=..., out_dim=...)``), so the two live in this one module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nnjit.checks import Choice, Int, Real
from nnjit.experiment.builder_enum import BuilderEnum
from nnjit.experiment.config_base import Config, check_field
from nnjit.experiment.excerpt import excerpt
from nnjit.nn import (
    ELU,
    GELU,
    SELU,
    Dropout,
    LeakyReLU,
    Linear,
    ReLU,
    Sequential,
    Sigmoid,
    Softplus,
    Tanh,
)
from nnjit.nn.gnn.sage import AGGREGATIONS
from nnjit.nn.linear import INITS

__all__ = ["Activations", "NetConfig", "Nets"]


class Activations(BuilderEnum):
    """Activation layers; ``Activations.LEAKY_RELU(0.2)`` is ``nnjit.LeakyReLU(0.2)``."""

    RELU = "relu", ReLU
    LEAKY_RELU = "leaky_relu", LeakyReLU
    ELU = "elu", ELU
    SELU = "selu", SELU
    TANH = "tanh", Tanh
    SIGMOID = "sigmoid", Sigmoid
    SOFTPLUS = "softplus", Softplus
    GELU = "gelu", GELU


# -- networks ------------------------------------------------------------------------------------
def _build_mlp(config=None, **fields):
    """A :class:`~nnjit.nn.Sequential` of ``Linear, activation[, Dropout]`` per hidden layer,
    then an output ``Linear``, from a :class:`~nnjit.experiment.NetConfig` (or its fields)."""
    if config is None:
        config = NetConfig(**fields)
    elif fields:
        raise TypeError("Nets.MLP: pass a NetConfig or its fields as keywords, not both")
    if not isinstance(config, NetConfig):
        raise TypeError(f"Nets.MLP: expected a NetConfig, got {type(config).__name__}")
    if config.kind is not Nets.MLP:
        raise ValueError(f"Nets.MLP: the NetConfig is for kind {config.kind.value!r}; build it "
                         f"with Nets.{config.kind.name} (or config.kind(config))")
    layers = []
    dims = (config.in_dim, *config.hidden_dims)
    for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
        layers.append(Linear(d_in, d_out, init=config.init))
        layers.append(config.activation())
        if config.dropout > 0:
            layers.append(Dropout(config.dropout))
    layers.append(Linear(dims[-1], config.out_dim, init=config.init))
    return Sequential(*layers)


def _graph_builder(conv_name: str):
    def build(config=None, **fields):
        """A :class:`~nnjit.nn.gnn.net.GraphNet` of this kind's convolutions from a NetConfig
        (``in_dim -> hidden_dims -> out_dim``, activation, dropout, heads, aggr)."""
        from nnjit import nn
        from nnjit.nn.gnn.net import GraphNet

        config = NetConfig(**fields) if config is None else config
        conv = getattr(nn, conv_name)
        options = {"aggr": config.aggr} if conv is nn.SAGEConv else {}
        dims = (config.in_dim, *config.hidden_dims, config.out_dim)
        return GraphNet(conv, dims, config.activation(), config.dropout, heads=config.heads,
                        **options)

    return build


class Nets(BuilderEnum):
    """Network architectures; ``Nets.MLP(net_config)`` builds the module. The ``GRAPH_*`` nets
    train on a :class:`nnjit.Graph` (``forward(x, edges)``)."""

    MLP = "mlp", _build_mlp
    GRAPH_CONV = "graph_conv", _graph_builder("GCNConv")
    GRAPH_SAGE = "graph_sage", _graph_builder("SAGEConv")
    GRAPH_ATT = "graph_att", _graph_builder("GATConv")



# -- the network's shape -------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class NetConfig(Config):
    """The network's shape.

    Args:
        kind: a :class:`Nets` member or name (default ``"mlp"``); ``kind(config)`` builds it.
        in_dim: input features (int >= 1).
        out_dim: outputs: classes for cross-entropy, targets for regression (int >= 1).
        hidden_dims: widths of the hidden layers, each int >= 1 (default none: a linear model).
        activation: an :class:`Activations` member or name after each hidden layer
            (default ``"relu"``).
        dropout: drop probability after each hidden activation, in [0, 1) (default 0: none).
        init: weight initialisation of the ``Linear`` layers, ``"glorot_uniform"`` (default) or
            ``"torch"``.
        heads: attention heads of the hidden layers of ``graph_att`` (default 1).
        aggr: neighbourhood aggregation of ``graph_sage``: ``"mean"`` (default), ``"max"``,
            ``"sum"``.

    Graph nets use ``dropout`` before every convolution (PyG's examples' layout).
    """

    kind: Nets = Nets.MLP
    in_dim: int
    out_dim: int
    hidden_dims: tuple[int, ...] = ()
    activation: Activations = Activations.RELU
    dropout: float = 0.0
    init: str = "glorot_uniform"
    heads: int = 1
    aggr: str = "mean"

    def __post_init__(self):
        self._enum("kind", Nets)
        self._param("in_dim", Int(min=1))
        self._param("out_dim", Int(min=1))
        dims = self.hidden_dims
        if isinstance(dims, (str, bytes, Mapping)) or not hasattr(dims, "__iter__"):
            raise ValueError(f"NetConfig.hidden_dims must be a list of ints >= 1 (e.g. [64, 32]),"
                             f" got {excerpt(dims)}")
        width = Int(min=1)
        self._set("hidden_dims", tuple(check_field(width, f"NetConfig.hidden_dims[{i}]", d)
                                       for i, d in enumerate(dims)))
        self._enum("activation", Activations)
        self._param("dropout", Real(min=0, lt=1))
        self._param("init", Choice(*INITS))
        self._param("heads", Int(min=1))
        self._param("aggr", Choice(*AGGREGATIONS))

    def build(self):
        """The network module (``self.kind(self)``)."""
        return self.kind(self)
