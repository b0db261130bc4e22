"""``MessagePassing``: what the graph layers share (argument checks, parameters, tracing)."""

from __future__ import annotations

import math

import numpy as np

from nnjit.checks import Int
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.graph.edges import Edges, SparseFeatures
from nnjit.nn.module import Module
from nnjit.nn.parameter import Parameter
from nnjit.random import generator
from nnjit.tape.tape import Tensor

_POSITIVE = Int(min=1, says="a positive int")


def positive_int(layer: str, name: str, value) -> int:
    """``value`` as an int >= 1, else an error naming ``layer: name``."""
    return _POSITIVE.check(f"{layer}: {name}", value)


def glorot(shape: tuple[int, int], fan: tuple[int, int] | None = None) -> Parameter:
    """Glorot-uniform parameter (PyG's ``glorot``: fan from the last two dims, or ``fan``)."""
    fan_in, fan_out = fan or shape
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return Parameter(generator().uniform(-limit, limit, shape).astype(DEFAULT_DTYPE))


def zeros(n: int) -> Parameter:
    return Parameter(np.zeros(n, dtype=DEFAULT_DTYPE))


class MessagePassing(Module):
    """Base of the graph layers: ``forward(x, edges)`` with x (N, in_channels), dense or sparse
    features, and ``edges`` the :class:`nnjit.graph.edges.Edges` the trainer traces with."""

    takes_edges = True

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        name = type(self).__name__
        self.in_channels = positive_int(name, "in_channels", in_channels)
        self.out_channels = positive_int(name, "out_channels", out_channels)

    def __call__(self, x, edges):
        where = f"{type(self).__name__} '{self.__dict__.get('_path') or type(self).__name__}'"
        if not isinstance(edges, Edges):
            raise TypeError(f"{where}: expected (x, edges) with the edges the trainer passes to "
                            f"forward(self, x, edges), got {type(edges).__name__}; train graph "
                            f"models with trainer.fit(graph)")
        if not isinstance(x, (Tensor, SparseFeatures)) or x.cols != self.in_channels:
            shape = getattr(x, "shape", None)
            raise ValueError(f"{where}: expected node features with {self.in_channels} columns, "
                             f"got {type(x).__name__} of shape {shape}")
        return super().__call__(x, edges)

    def param(self, tape, name: str) -> Tensor | None:
        """The slot of this layer's parameter ``name`` (None when it is None)."""
        p = getattr(self, name)
        if p is None:
            return None
        return tape.parameter(p, f"{self._path}.{name}" if self._path else name)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"
