"""``RNNCell``, ``LSTMCell`` and ``GRUCell``: one step of a recurrent layer, PyTorch's cells
(arguments, parameter names ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``, shapes, gate
order, initialisation), for loops written by hand in ``forward`` (decoders, attention).

A call records the recurrent family's ops for one step (:mod:`nnjit.ops.recurrent`): the input
projection, the initial state when given, and a one-step scan.
"""

from __future__ import annotations

import math

import numpy as np

from nnjit.checks import Bool, Choice, Int
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.nn.module import Module
from nnjit.nn.parameter import Parameter
from nnjit.ops.recurrent import rnn_input, rnn_scan, rnn_state
from nnjit.random import generator as default_generator
from nnjit.tape.tape import Tensor

_GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}
_SIZE = Int(min=1, says="a positive int")


class RNNCellBase(Module):
    """The cells' shared machinery: parameters U(-1/sqrt(H), 1/sqrt(H)) and one step.

    ``forward(input, hx=None)``: ``input`` (batch, input_size), ``hx`` (batch, hidden_size)
    (an LSTMCell's a tuple ``(h, c)``), zeros when None; returns the next ``h`` (batch,
    hidden_size) (an LSTMCell ``(h, c)``).
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool = True,
                 generator: np.random.Generator | None = None):
        super().__init__()
        cls = type(self).__name__
        self.mode = mode
        self.input_size = _SIZE.check(f"{cls}: input_size", input_size)
        self.hidden_size = _SIZE.check(f"{cls}: hidden_size", hidden_size)
        self.bias = Bool().check(f"{cls}: bias", bias)
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise TypeError(f"{cls}: generator must be a numpy.random.Generator or None, got "
                            f"{type(generator).__name__}")
        rng = default_generator() if generator is None else generator
        bound = 1.0 / math.sqrt(self.hidden_size)
        gates = _GATES[mode] * self.hidden_size
        shapes = {"weight_ih": (gates, self.input_size), "weight_hh": (gates, self.hidden_size)}
        if self.bias:
            shapes.update(bias_ih=(gates,), bias_hh=(gates,))
        for name, shape in shapes.items():
            setattr(self, name, Parameter(rng.uniform(-bound, bound, shape).astype(DEFAULT_DTYPE)))

    def forward(self, input: Tensor, hx=None):
        where = f"{type(self).__name__} '{self._path or type(self).__name__}'"
        if (not isinstance(input, Tensor) or input.is_integer or len(input.dims) != 1
                or input.cols != self.input_size):
            got = (int(input.rows), *input.dims) if isinstance(input, Tensor) else type(input)
            raise ValueError(f"{where}: expected a float input of shape (batch, "
                             f"{self.input_size}), got {got}")
        h0, c0 = self._states(hx, input, where)
        tape = input.tape
        w_ih, w_hh, b_ih, b_hh = (self._tensor(tape, n) for n in
                                  ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
        state = None if h0 is None else rnn_state(h0, c0, index=0, hidden=self.hidden_size)
        p = rnn_input(input.view(-1, 1, self.input_size), w_ih, b_ih)
        _, h, c = rnn_scan(p, w_hh, b_hh, kind=self.mode, state=state)
        return (h, c) if self.mode == "lstm" else h

    def _states(self, hx, x, where: str):
        if hx is None:
            return None, None
        lstm = self.mode == "lstm"
        if lstm and not (isinstance(hx, tuple) and len(hx) == 2):
            raise TypeError(f"{where}: hx must be a tuple (h, c) of tensors, got "
                            f"{type(hx).__name__}")
        states = hx if lstm else (hx,)
        for t in states:
            if (not isinstance(t, Tensor) or t.is_integer or int(t.rows) != int(x.rows)
                    or t.cols != self.hidden_size):
                got = (int(t.rows), *t.dims) if isinstance(t, Tensor) else type(t).__name__
                raise ValueError(f"{where}: the state must be a float tensor of shape (batch, "
                                 f"{self.hidden_size}) with the input's batch ({int(x.rows)}), "
                                 f"got {got}")
        return states[0], (states[1] if lstm else None)

    def _tensor(self, tape, name: str):
        param = self._parameters.get(name)
        if param is None:
            return None
        return tape.parameter(param, f"{self._path}.{name}" if self._path else name)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    r""":math:`h' = \tanh(x W_{ih}^T + b_{ih} + h W_{hh}^T + b_{hh})` (``nonlinearity="relu"``:
    ReLU), PyTorch's ``nn.RNNCell``. Shapes: :class:`RNNCellBase`."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", generator: np.random.Generator | None = None):
        self.nonlinearity = Choice("tanh", "relu").check("RNNCell: nonlinearity", nonlinearity)
        super().__init__(f"rnn_{self.nonlinearity}", input_size, hidden_size, bias, generator)


class LSTMCell(RNNCellBase):
    """One LSTM step (gates i, f, g, o), PyTorch's ``nn.LSTMCell``: ``forward(input, (h, c))``
    returns ``(h', c')``. Shapes: :class:`RNNCellBase`."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 generator: np.random.Generator | None = None):
        super().__init__("lstm", input_size, hidden_size, bias, generator)


class GRUCell(RNNCellBase):
    """One GRU step (gates r, z, n), PyTorch's ``nn.GRUCell``. Shapes: :class:`RNNCellBase`."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 generator: np.random.Generator | None = None):
        super().__init__("gru", input_size, hidden_size, bias, generator)
