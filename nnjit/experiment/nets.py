"""Networks: the :class:`Nets` architectures, the :class:`NetConfig` that gives a net's shape, and
the :class:`Activations` a net uses between its layers.

A net's kind and its shape are one concept: ``NetConfig.kind`` is a :class:`Nets` member, and a
member builds its net from a :class:`NetConfig` (``Nets.MLP(config)``, or
``Nets.MLP(in_dim=..., out_dim=...)``), so the two live in this one module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nnjit.checks import Bool, Choice, Int, Real
from nnjit.experiment.builder_enum import BuilderEnum
from nnjit.experiment.config_base import Config, check_field
from nnjit.experiment.conv_net import conv_output_shapes
from nnjit.experiment.dense_stack import dense_stack
from nnjit.experiment.excerpt import excerpt
from nnjit.nn import (
    ELU,
    GELU,
    SELU,
    LeakyReLU,
    ReLU,
    Sigmoid,
    Softplus,
    Tanh,
)
from nnjit.nn.gnn.sage import AGGREGATIONS
from nnjit.nn.linear import INITS

__all__ = ["Activations", "NetConfig", "Nets"]

#: The ``cnn``-only fields at their defaults (other kinds must leave them there).
_CNN_DEFAULTS = {"conv_channels": (), "kernel_size": 3, "padding": 0, "pool": 2}

#: The recurrent kinds' fields at their defaults (other kinds must leave them there).
_RNN_DEFAULTS = {"hidden_size": None, "num_layers": 1, "bidirectional": False}

#: A Conv2d padding: an int >= 0 (``"same"`` is checked apart).
_PADDING = Int(min=0, says='an int >= 0 or "same"')


def _check_per_layer(param, where: str, value):
    if param is _PADDING and value == "same":
        return value
    return check_field(param, where, value)


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
    return dense_stack(config.in_dim, config)


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


def _recurrent_builder(kind: str):
    def build(config=None, **fields):
        """A :class:`~nnjit.experiment.recurrent_net.RecurrentNet` of this kind's layer from a
        NetConfig (``in_shape: [steps, features]``, ``hidden_size``, ``num_layers``, ...)."""
        from nnjit.experiment.recurrent_net import RecurrentNet

        config = NetConfig(**fields) if config is None else config
        if config.kind.value != kind:
            raise ValueError(f"Nets.{kind.upper()}: the NetConfig is for kind "
                             f"{config.kind.value!r}; build it with Nets.{config.kind.name} (or "
                             "config.kind(config))")
        return RecurrentNet(config)

    return build


def _build_cnn(config=None, **fields):
    """A :class:`~nnjit.experiment.conv_net.ConvNet` from a NetConfig of kind ``cnn``."""
    from nnjit.experiment.conv_net import ConvNet

    config = NetConfig(**fields) if config is None else config
    if config.kind is not Nets.CNN:
        raise ValueError(f"Nets.CNN: the NetConfig is for kind {config.kind.value!r}; build it "
                         f"with Nets.{config.kind.name} (or config.kind(config))")
    return ConvNet(config)


class Nets(BuilderEnum):
    """Network architectures; ``Nets.MLP(net_config)`` builds the module. The ``GRAPH_*`` nets
    train on a :class:`nnjit.Graph` (``forward(x, edges)``); ``CNN`` on rows holding images;
    ``LSTM``, ``GRU`` and ``RNN`` on rows holding sequences (``steps x features``)."""

    MLP = "mlp", _build_mlp
    CNN = "cnn", _build_cnn
    GRAPH_CONV = "graph_conv", _graph_builder("GCNConv")
    GRAPH_SAGE = "graph_sage", _graph_builder("SAGEConv")
    GRAPH_ATT = "graph_att", _graph_builder("GATConv")
    LSTM = "lstm", _recurrent_builder("lstm")
    GRU = "gru", _recurrent_builder("gru")
    RNN = "rnn", _recurrent_builder("rnn")


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
        in_shape: ``cnn``, ``lstm``, ``gru``, ``rnn`` only (required there): the image shape
            ``[C, H, W]`` of a row, or a recurrent net's ``[steps, features]``; ``in_dim`` must
            be their product.
        conv_channels: ``cnn`` only (required there): ``out_channels`` of each ``Conv2d``.
        kernel_size: ``cnn`` only: ``Conv2d`` kernel size, one int for every conv layer or one
            per layer (default 3).
        padding: ``cnn`` only: ``Conv2d`` padding, an int, ``"same"``, or one per layer
            (default 0).
        pool: ``cnn`` only: a ``MaxPool2d(pool)`` after each conv layer's activation; 1: none
            (default 2).
        hidden_size: ``lstm``, ``gru``, ``rnn`` only (required there): the recurrent layer's
            state size (int >= 1).
        num_layers: ``lstm``, ``gru``, ``rnn`` only: stacked recurrent layers (default 1).
        bidirectional: ``lstm``, ``gru``, ``rnn`` only: both directions (default False).

    Graph nets use ``dropout`` before every convolution (PyG's examples' layout). A ``cnn`` is
    ``Conv2d - activation - MaxPool2d`` per conv layer, then flatten, then ``hidden_dims`` as
    in an MLP (``Linear - activation [- Dropout]``) and the output ``Linear``; ``Conv2d`` layers
    take PyTorch's initialisation, ``init`` applies to the ``Linear`` layers. A recurrent net
    (:class:`~nnjit.experiment.recurrent_net.RecurrentNet`) reads a row as ``in_shape`` steps
    with PyTorch's layer (``dropout`` between its layers too), then ``hidden_dims`` and the
    output ``Linear`` on its top layer's final state.
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
    in_shape: tuple[int, ...] | None = None
    conv_channels: tuple[int, ...] = ()
    kernel_size: int | tuple[int, ...] = 3
    padding: int | str | tuple[int | str, ...] = 0
    pool: int = 2
    hidden_size: int | None = None
    num_layers: int = 1
    bidirectional: bool = False

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
        recurrent = self.kind in (Nets.LSTM, Nets.GRU, Nets.RNN)
        if self.kind is Nets.CNN:
            self._check_cnn()
        elif recurrent:
            self._check_recurrent()
        else:
            self._unused({"in_shape": None}, "'cnn', 'lstm', 'gru', 'rnn'")
        if self.kind is not Nets.CNN:
            self._unused(_CNN_DEFAULTS, "'cnn'")
        if not recurrent:
            self._unused(_RNN_DEFAULTS, "'lstm', 'gru', 'rnn'")

    def _unused(self, defaults: dict, kinds: str) -> None:
        """ValueError unless the fields of ``defaults`` (which apply to ``kinds`` only) are at
        their defaults."""
        for name, default in defaults.items():
            value = getattr(self, name)
            if (tuple(value) if isinstance(value, list) else value) != default:
                raise ValueError(f"NetConfig.{name} applies only to kind{'s' * (',' in kinds)} "
                                 f"{kinds} (this net is {self.kind.value!r}), got "
                                 f"{excerpt(value)}")
            self._set(name, default)  # (a list read back from a full run.yaml: the default)

    def _check_recurrent(self):
        """Validate the recurrent fields: ``in_shape`` ``[steps, features]`` of ``in_dim``."""
        shape = self.in_shape
        if isinstance(shape, (str, bytes, Mapping)) or not hasattr(shape, "__iter__") \
                or len(shape) != 2:
            raise ValueError(f"NetConfig.in_shape must be [steps, features] (e.g. [8, 8]) for "
                             f"kind {self.kind.value!r}, got {excerpt(shape)}")
        size = Int(min=1)
        self._set("in_shape", tuple(check_field(size, f"NetConfig.in_shape[{i}]", d)
                                    for i, d in enumerate(shape)))
        steps, features = self.in_shape
        if self.in_dim != steps * features:
            raise ValueError(f"NetConfig.in_dim must be steps*features = {steps * features} for "
                             f"in_shape {list(self.in_shape)}, got {self.in_dim}")
        if self.hidden_size is None:
            raise ValueError(f"NetConfig.hidden_size is required for kind {self.kind.value!r} "
                             "(the recurrent state size, an int >= 1)")
        self._param("hidden_size", Int(min=1))
        self._param("num_layers", Int(min=1))
        self._param("bidirectional", Bool())

    def _check_cnn(self):
        """Validate and normalise the conv fields (kernel_size and padding: one per layer)."""
        shape = self.in_shape
        if isinstance(shape, (str, bytes, Mapping)) or not hasattr(shape, "__iter__") \
                or len(shape) != 3:
            raise ValueError(f"NetConfig.in_shape must be [C, H, W] (e.g. [1, 28, 28]) for kind "
                             f"'cnn', got {excerpt(shape)}")
        size = Int(min=1)
        self._set("in_shape", tuple(check_field(size, f"NetConfig.in_shape[{i}]", d)
                                    for i, d in enumerate(shape)))
        c, h, w = self.in_shape
        if self.in_dim != c * h * w:
            raise ValueError(f"NetConfig.in_dim must be C*H*W = {c * h * w} for in_shape "
                             f"{list(self.in_shape)}, got {self.in_dim}")
        chans = self.conv_channels
        if isinstance(chans, (str, bytes, Mapping)) or not hasattr(chans, "__iter__") \
                or not len(chans):
            raise ValueError(f"NetConfig.conv_channels must be a non-empty list of ints >= 1 "
                             f"(out_channels of each Conv2d, e.g. [6, 16]), got {excerpt(chans)}")
        self._set("conv_channels", tuple(check_field(size, f"NetConfig.conv_channels[{i}]", d)
                                         for i, d in enumerate(chans)))
        n = len(self.conv_channels)
        self._set("kernel_size", self._per_layer("kernel_size", n, size))
        self._set("padding", self._per_layer("padding", n, _PADDING))
        self._param("pool", Int(min=1))
        conv_output_shapes(self.in_shape, self.conv_channels, self.kernel_size, self.padding,
                           self.pool)

    def _per_layer(self, name: str, n: int, param) -> tuple:
        value = getattr(self, name)
        if isinstance(value, (list, tuple)):
            if len(value) != n:
                raise ValueError(f"NetConfig.{name} must give one value per conv layer ({n}), "
                                 f"got {len(value)}: {excerpt(value)}")
            return tuple(_check_per_layer(param, f"NetConfig.{name}[{i}]", v)
                         for i, v in enumerate(value))
        return (_check_per_layer(param, f"NetConfig.{name}", value),) * n

    def build(self):
        """The network module (``self.kind(self)``)."""
        return self.kind(self)
