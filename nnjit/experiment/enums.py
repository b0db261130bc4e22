"""Enums whose members name a thing and build it: ``Optims.ADAM(lr=0.01)`` is ``nnjit.Adam(...)``.

Every member's value is a lowercase string (``Optims.ADAM == "adam"``); that string is what configs
and YAML files hold. Lookup by value or by member name is case-insensitive and accepts ``-`` for
``_``: ``Optims("Adam")``, ``Optims.get("ADAM")``, ``Losses.get("bce-with-logits")``. An unknown
name raises ``ValueError`` that lists the valid ones.

Adding a member is one line: ``NAME = "value", builder``. The builder is what calling the member
runs. A future ``Nets.GRAPH_CONV = "graph_conv", _build_graph_conv`` needs nothing else here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import Enum
from typing import Any

from nnjit import schedulers
from nnjit.experiment.excerpt import excerpt
from nnjit.losses import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
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
from nnjit.optim import SGD, Adam, AdamW, RMSprop

__all__ = ["Activations", "Checkpoints", "Devices", "Losses", "Nets", "Optims", "Schedulers"]


class _BuilderEnum(str, Enum):
    """Base class: string values, forgiving lookup, members that build what they name."""

    def __new__(cls, value: str, builder: Any = None):
        member = str.__new__(cls, value)
        member._value_ = value
        member._builder = builder
        return member

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, str):
            key = value.strip().lower().replace("-", "_")
            for member in cls:
                if key in (member.value, member.name.lower()):
                    return member
        raise ValueError(f"Unknown {cls.__name__} name {excerpt(value)}; valid names: "
                         f"{', '.join(repr(m.value) for m in cls)}")

    @classmethod
    def get(cls, identifier):
        """The member named ``identifier`` (a member, its value or its name, any case).

        Raises:
            ValueError: unknown name; the message lists the valid ones.
        """
        if isinstance(identifier, cls):
            return identifier
        return cls(identifier)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The valid values, in definition order."""
        return tuple(m.value for m in cls)

    @property
    def builder(self) -> Callable:
        """What calling the member runs (usually the class it names)."""
        return self._builder

    def __call__(self, *args, **kwargs):
        """Build the object this member names, passing the arguments through."""
        return self._builder(*args, **kwargs)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# -- networks ------------------------------------------------------------------------------------
def _build_mlp(config=None, **fields):
    """A :class:`~nnjit.nn.Sequential` of ``Linear, activation[, Dropout]`` per hidden layer,
    then an output ``Linear``, from a :class:`~nnjit.experiment.NetConfig` (or its fields)."""
    from nnjit.experiment.config import NetConfig

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
        from nnjit.experiment.config import NetConfig
        from nnjit.nn.gnn.net import GraphNet

        config = NetConfig(**fields) if config is None else config
        conv = getattr(nn, conv_name)
        options = {"aggr": config.aggr} if conv is nn.SAGEConv else {}
        dims = (config.in_dim, *config.hidden_dims, config.out_dim)
        return GraphNet(conv, dims, config.activation(), config.dropout, heads=config.heads,
                        **options)

    return build


class Nets(_BuilderEnum):
    """Network architectures; ``Nets.MLP(net_config)`` builds the module. The ``GRAPH_*`` nets
    train on a :class:`nnjit.Graph` (``forward(x, edges)``)."""

    MLP = "mlp", _build_mlp
    GRAPH_CONV = "graph_conv", _graph_builder("GCNConv")
    GRAPH_SAGE = "graph_sage", _graph_builder("SAGEConv")
    GRAPH_ATT = "graph_att", _graph_builder("GATConv")


# -- losses, optimizers, activations, schedulers -------------------------------------------------
class Losses(_BuilderEnum):
    """Loss functions; ``Losses.MSE()`` is ``nnjit.MSELoss()``."""

    CROSS_ENTROPY = "cross_entropy", CrossEntropyLoss
    MSE = "mse", MSELoss
    BCE_WITH_LOGITS = "bce_with_logits", BCEWithLogitsLoss


class Optims(_BuilderEnum):
    """Optimizers; ``Optims.ADAM(lr=0.01)`` is ``nnjit.Adam(lr=0.01)``."""

    SGD = "sgd", SGD
    ADAM = "adam", Adam
    ADAMW = "adamw", AdamW
    RMSPROP = "rmsprop", RMSprop


class Activations(_BuilderEnum):
    """Activation layers; ``Activations.LEAKY_RELU(0.2)`` is ``nnjit.LeakyReLU(0.2)``."""

    RELU = "relu", ReLU
    LEAKY_RELU = "leaky_relu", LeakyReLU
    ELU = "elu", ELU
    SELU = "selu", SELU
    TANH = "tanh", Tanh
    SIGMOID = "sigmoid", Sigmoid
    SOFTPLUS = "softplus", Softplus
    GELU = "gelu", GELU


class Schedulers(_BuilderEnum):
    """Learning-rate schedulers (:mod:`nnjit.schedulers`); ``Schedulers.STEP(step_size=10)``."""

    STEP = "step", schedulers.StepLR
    EXPONENTIAL = "exponential", schedulers.ExponentialLR
    COSINE = "cosine", schedulers.CosineAnnealingLR
    ONE_CYCLE = "one_cycle", schedulers.OneCycleLR
    LINEAR_WARMUP = "linear_warmup", schedulers.LinearWarmupDecay
    PLATEAU = "plateau", schedulers.ReduceLROnPlateau


# -- devices -------------------------------------------------------------------------------------
def _always() -> bool:
    return True


class Devices(_BuilderEnum):
    """Where training runs. Only the CPU today. Each member holds a check of whether it is
    available; ``Devices.get()`` returns the best available device."""

    CPU = "cpu", _always

    def is_available(self) -> bool:
        return bool(self._builder())

    @classmethod
    def get(cls, identifier=None) -> Devices:
        """The device named ``identifier``, or the best available one when it is ``None``.

        Raises:
            ValueError: unknown name, or a device not available on this machine.
        """
        if identifier is None:
            return next(d for d in cls if d.is_available())
        device = super().get(identifier)
        return device()

    def __call__(self) -> Devices:
        """The device itself, after checking that it is available here."""
        if not self.is_available():
            available = [d.value for d in type(self) if d.is_available()]
            raise ValueError(f"device {self.value!r} is not available on this machine; "
                             f"available: {', '.join(available)}")
        return self


# -- checkpoint phases ---------------------------------------------------------------------------
class Checkpoints(_BuilderEnum):
    """The checkpoints a run keeps (``checkpoints/<value>.nne``).

    The builder is the fraction of the run, in quarters. A phase is saved at the end of the
    first epoch (0-based index) by whose end at least that fraction of the ``N`` epochs has run:
    ``Qk`` is ``ceil(k * N / 4) - 1``, ``FIRST`` is 0 and ``LAST`` is ``N - 1``. ``BEST`` depends
    on the monitored metric, so it has no fixed epoch.

    Example:
        >>> Checkpoints.phases(10)   # {FIRST: 0, Q1: 2, Q2: 4, Q3: 6, LAST: 9}
        >>> Checkpoints.Q1(10)       # 2; calling a member gives its epoch
    """

    FIRST = "first", 0
    Q1 = "q1", 1
    Q2 = "q2", 2
    Q3 = "q3", 3
    LAST = "last", 4
    BEST = "best", None

    @property
    def filename(self) -> str:
        return f"{self.value}.nne"

    def epoch(self, n_epochs: int) -> int | None:
        """The 0-based epoch after which this phase is saved in a run of ``n_epochs``; ``None``
        for ``BEST``."""
        n = schedulers.Param("int", low=1).check("Checkpoints.epoch n_epochs", n_epochs)
        if self._builder is None:
            return None
        return max(math.ceil(self._builder * n / 4) - 1, 0)

    def __call__(self, n_epochs: int) -> int | None:
        return self.epoch(n_epochs)

    @classmethod
    def phases(cls, n_epochs: int) -> dict[Checkpoints, int]:
        """Every fixed phase (all but ``BEST``) with its epoch."""
        return {c: c.epoch(n_epochs) for c in cls if c._builder is not None}

    @classmethod
    def due(cls, epoch: int, n_epochs: int) -> tuple[Checkpoints, ...]:
        """The fixed phases to save at the end of 0-based ``epoch``."""
        return tuple(c for c, e in cls.phases(n_epochs).items() if e == epoch)
