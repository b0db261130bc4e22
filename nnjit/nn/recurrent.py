"""``RNN``, ``LSTM`` and ``GRU``: recurrent layers with PyTorch's arguments, parameter names and
shapes, gate order and initialisation, so a PyTorch ``state_dict`` loads 1:1.

Each layer and direction records the recurrent family's ops (:mod:`nnjit.ops.recurrent`): the
input projection of every step as one product, then the steps (and their backpropagation
through time) in one compiled scan.
"""

from __future__ import annotations

import math

import numpy as np

from nnjit.checks import Bool, Choice, Int, Real
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.nn import functional as F
from nnjit.nn.module import Module
from nnjit.nn.parameter import Parameter
from nnjit.ops.recurrent import rnn_input, rnn_scan, rnn_state, rnn_step_cat
from nnjit.random import generator as default_generator
from nnjit.tape.tape import Tensor

_GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}
_SIZE = Int(min=1, says="a positive int")


class RNNBase(Module):
    """The layers' shared machinery (PyTorch's ``RNNBase``): parameters, checks and stacking.

    ``forward(input, hx=None, lengths=None)``:

    * ``input`` (batch, T, input_size): nnjit's tensors always have the batch first (a tensor's
      rows are samples), so this holds whatever ``batch_first`` says; ``batch_first`` is kept
      for PyTorch compatibility (export, ``repr``).
    * ``hx``: the initial states (batch, num_layers * D, hidden_size), D = 2 when bidirectional
      (PyTorch's ``(num_layers * D, batch, hidden_size)`` with the batch first); for an LSTM a
      tuple ``(h_0, c_0)``; None: zeros.
    * ``stateful=True`` (with ``batch_size=R``): no ``hx``; each training batch starts from the
      final states of the batch before it, row by row (detached: no gradient flows back into
      the earlier batch; Keras' ``stateful``), kept in the layer's buffers ``carried_h`` (and
      ``carried_c``) (R, num_layers * D * width), not saved by ``state_dict``. Rows past R
      start from zeros; evaluation and predict batches read the carried states without
      writing them. :meth:`reset_states` zeroes them.
    * ``lengths``: an integer tensor (batch,) of sequence lengths 1..T (an integer model input):
      step t of sequence b is padding for ``t >= lengths[b]``, as ``pack_padded_sequence``
      gives PyTorch users: its output is 0, the state goes past it unchanged and it takes no
      gradient, so ``h_n`` is each sequence's state at its last valid step. A length outside
      1..T stops the fit with an error naming the layer.

    Returns ``(output, h_n)`` (an LSTM ``(output, (h_n, c_n))``): ``output`` (batch, T,
    D * hidden_size) the last layer's outputs, both directions side by side; ``h_n`` (and
    ``c_n``) (batch, num_layers * D, hidden_size) the final states, layer by layer, the forward
    direction then the reverse.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0,
                 generator: np.random.Generator | None = None, stateful: bool = False,
                 batch_size: int | None = None):
        super().__init__()
        cls = type(self).__name__
        self.mode = mode
        self.input_size = _SIZE.check(f"{cls}: input_size", input_size)
        self.hidden_size = _SIZE.check(f"{cls}: hidden_size", hidden_size)
        self.num_layers = _SIZE.check(f"{cls}: num_layers", num_layers)
        self.bias = Bool().check(f"{cls}: bias", bias)
        self.batch_first = Bool().check(f"{cls}: batch_first", batch_first)
        self.dropout = Real(min=0, max=1).check(f"{cls}: dropout", dropout)
        self.bidirectional = Bool().check(f"{cls}: bidirectional", bidirectional)
        self.proj_size = Int(min=0).check(f"{cls}: proj_size", proj_size)
        if self.proj_size and mode != "lstm":
            raise ValueError(f"{cls}: proj_size={proj_size}: only an LSTM has projections")
        if self.proj_size >= self.hidden_size:
            raise ValueError(f"{cls}: proj_size={proj_size} must be smaller than hidden_size="
                             f"{self.hidden_size}")
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise TypeError(f"{cls}: generator must be a numpy.random.Generator or None, got "
                            f"{type(generator).__name__}")
        rng = default_generator() if generator is None else generator
        # PyTorch's reset_parameters: every parameter U(-1/sqrt(H), 1/sqrt(H)), drawn in
        # registration order (weight_ih, weight_hh, bias_ih, bias_hh per layer and direction)
        bound = 1.0 / math.sqrt(self.hidden_size)
        gates = _GATES[mode] * self.hidden_size
        for name, shape in self._parameter_shapes(gates):
            setattr(self, name, Parameter(rng.uniform(-bound, bound, shape).astype(DEFAULT_DTYPE)))
        self.stateful = Bool().check(f"{cls}: stateful", stateful)
        self.batch_size = None
        if self.stateful:
            if batch_size is None:
                raise ValueError(f"{cls}: stateful=True needs batch_size=, the rows of every "
                                 "batch (row i's final state is row i's initial state in the "
                                 "next batch)")
            self.batch_size = _SIZE.check(f"{cls}: batch_size", batch_size)
            count = self.num_layers * self.num_directions
            # (not in state_dict: a PyTorch state dict still loads 1:1)
            self.register_buffer("carried_h", np.zeros((self.batch_size,
                                                        count * self.state_size)), False)
            if mode == "lstm":
                self.register_buffer("carried_c", np.zeros((self.batch_size,
                                                            count * self.hidden_size)), False)

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def state_size(self) -> int:
        """Width of h (and of each direction's output): ``proj_size`` or ``hidden_size``."""
        return self.proj_size or self.hidden_size

    def _parameter_shapes(self, gates: int):
        out = self.state_size
        for layer in range(self.num_layers):
            width = self.input_size if layer == 0 else out * self.num_directions
            for direction in range(self.num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                yield f"weight_ih{suffix}", (gates, width)
                yield f"weight_hh{suffix}", (gates, out)
                if self.bias:
                    yield f"bias_ih{suffix}", (gates,)
                    yield f"bias_hh{suffix}", (gates,)
                if self.proj_size:
                    yield f"weight_hr{suffix}", (self.proj_size, self.hidden_size)

    def flatten_parameters(self) -> None:
        """A no-op (PyTorch's packs cuDNN weights; nnjit's parameters are already one block)."""

    def reset_states(self) -> None:
        """Zero the carried states of a ``stateful=True`` layer (Keras' ``reset_states``): the
        next batch starts from zeros (at every epoch: a callback's ``on_epoch_begin`` calls
        it, docs/sequences.md)."""
        if not self.stateful:
            raise ValueError(f"{type(self).__name__} '{self._path or type(self).__name__}': "
                             "reset_states() is for stateful=True layers")
        for name in ("carried_h", "carried_c"):
            buffer = self._buffers.get(name)
            if buffer is not None:
                buffer.data[...] = 0.0

    # -- forward ---------------------------------------------------------------------------------
    def forward(self, input: Tensor, hx=None, lengths: Tensor | None = None):
        where = f"{type(self).__name__} '{self._path or type(self).__name__}'"
        self._check_input(input, where)
        tape = input.tape
        h0, c0 = self._check_states(hx, input, where)
        carried = None
        if self.stateful:
            if hx is not None:
                raise ValueError(f"{where}: a stateful=True layer starts from its carried "
                                 "states: pass no hx (reset_states() zeroes them)")
            h0, c0 = (self._buffer(tape, name) for name in ("carried_h", "carried_c"))
            carried = input.rows
        if lengths is not None:
            self._check_lengths(lengths, input, where)
        finals_h, finals_c = [], []
        x = input
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                w_ih, w_hh, b_ih, b_hh, w_hr = (
                    self._tensor(tape, f"{w}{suffix}") for w in
                    ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"))
                index = layer * self.num_directions + direction
                state = (rnn_state(h0, c0, index=index, hidden=self.state_size,
                                   cell=self.hidden_size, rows=carried)
                         if h0 is not None else None)
                y, h_n, c_n = rnn_scan(rnn_input(x, w_ih, b_ih), w_hh, b_hh, kind=self.mode,
                                       reverse=direction == 1, state=state, lengths=lengths,
                                       w_hr=w_hr, carry=None if carried is None
                                       else (h0, c0, index))
                outputs.append(y)
                finals_h.append(h_n)
                finals_c.append(c_n)
            x = outputs[0] if len(outputs) == 1 else rnn_step_cat(*outputs)
            if self.dropout and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout)
        h_n = _stack(finals_h, self.state_size)
        if self.mode != "lstm":
            return x, h_n
        return x, (h_n, _stack(finals_c, self.hidden_size))

    def _buffer(self, tape, name: str):
        buffer = self._buffers.get(name)
        if buffer is None:
            return None
        return tape.parameter(buffer, f"{self._path}.{name}" if self._path else name)

    def _tensor(self, tape, name: str):
        param = self._parameters.get(name)
        if param is None:
            return None
        return tape.parameter(param, f"{self._path}.{name}" if self._path else name)

    def _check_input(self, x, where: str) -> int:
        if (not isinstance(x, Tensor) or x.is_integer or len(x.dims) != 2
                or x.dims[1] != self.input_size):
            got = _shape(x) if isinstance(x, Tensor) else type(x).__name__
            hint = (" (integer token ids go through an Embedding first)"
                    if isinstance(x, Tensor) and x.is_integer else "")
            raise ValueError(f"{where}: expected a float input of shape (batch, steps, "
                             f"{self.input_size}), got {got}{hint}")
        return int(x.dims[0])

    def _check_states(self, hx, x, where: str):
        if hx is None:
            return None, None
        lstm = self.mode == "lstm"
        if lstm and not (isinstance(hx, tuple) and len(hx) == 2):
            raise TypeError(f"{where}: hx must be a tuple (h_0, c_0) of tensors, got "
                            f"{type(hx).__name__}")
        count = self.num_layers * self.num_directions
        states = hx if lstm else (hx,)
        for name, t in zip(("h_0", "c_0") if lstm else ("hx",), states):
            want = (count, self.hidden_size if name == "c_0" else self.state_size)
            if (not isinstance(t, Tensor) or t.is_integer or int(t.rows) != int(x.rows)
                    or t.cols != want[0] * want[1]):
                got = _shape(t) if isinstance(t, Tensor) else type(t).__name__
                raise ValueError(f"{where}: {name} must be a float tensor of shape (batch, "
                                 f"{want[0]}, {want[1]}) with the input's batch ({int(x.rows)}), "
                                 f"got {got}")
        return states[0], (states[1] if lstm else None)

    def _check_lengths(self, lengths, x, where: str) -> None:
        if (not isinstance(lengths, Tensor) or not lengths.is_integer or lengths.cols != 1
                or int(lengths.rows) != int(x.rows)):
            got = (_shape(lengths) if isinstance(lengths, Tensor)
                   else type(lengths).__name__)
            raise ValueError(f"{where}: lengths must be an integer tensor of shape (batch,) "
                             f"(an integer model input of one length per sequence), got {got}")

    def extra_repr(self) -> str:
        parts = [f"{self.input_size}, {self.hidden_size}"]
        defaults = {"num_layers": 1, "bias": True, "batch_first": False, "dropout": 0.0,
                    "bidirectional": False, "proj_size": 0, "stateful": False,
                    "batch_size": None}
        parts += [f"{k}={getattr(self, k)}" for k, v in defaults.items() if getattr(self, k) != v]
        return ", ".join(parts)


def _shape(t: Tensor) -> tuple[int, ...]:
    """A traced tensor's shape with its batch as a plain int."""
    return (int(t.rows), *t.dims)


def _stack(finals: list, hidden: int):
    """The final states of every layer and direction, (batch, count, hidden)."""
    out = finals[0]
    for t in finals[1:]:
        out = rnn_step_cat(out, t)
    return out.view(-1, len(finals), hidden)


class RNN(RNNBase):
    r"""An Elman RNN: :math:`h_t = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh})`
    (``nonlinearity="relu"``: ReLU), PyTorch's ``nn.RNN``.

    Args:
        input_size, hidden_size, num_layers, nonlinearity ("tanh" or "relu"), bias, batch_first,
        dropout (between layers, training only), bidirectional: as PyTorch's.
        generator: a ``numpy.random.Generator`` for the initial values.

    Shapes: :class:`RNNBase`. Parameters ``weight_ih_l{k}`` (H, input), ``weight_hh_l{k}``
    (H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (H,), ``_reverse`` for the reverse direction.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False,
                 generator: np.random.Generator | None = None, stateful: bool = False,
                 batch_size: int | None = None):
        self.nonlinearity = Choice("tanh", "relu").check("RNN: nonlinearity", nonlinearity)
        super().__init__(f"rnn_{self.nonlinearity}", input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, generator=generator,
                         stateful=stateful, batch_size=batch_size)

    def extra_repr(self) -> str:
        extra = ", nonlinearity='relu'" if self.nonlinearity == "relu" else ""
        return super().extra_repr() + extra


class LSTM(RNNBase):
    r"""Long short-term memory, PyTorch's ``nn.LSTM`` (gates i, f, g, o):

    .. math::
        i, f, o = \sigma(\cdot),\; g = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh}),
        \quad c_t = f c_{t-1} + i g,\quad h_t = o \tanh(c_t)

    Hochreiter & Schmidhuber, "Long Short-Term Memory" (1997).

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional: as
        PyTorch's. proj_size: P > 0 projects each step's h through ``weight_hr_l{k}`` (P, H):
        :math:`h_t = W_{hr} (o \tanh(c_t))`, so h, the outputs and ``weight_hh_l{k}`` are P
        wide (PyTorch's semantics; c stays H wide).
        generator: a ``numpy.random.Generator`` for the initial values.

    Shapes: :class:`RNNBase`; returns ``(output, (h_n, c_n))``. Parameters ``weight_ih_l{k}``
    (4H, input), ``weight_hh_l{k}`` (4H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (4H,). With
    ``proj_size`` P: ``weight_hh_l{k}`` (4H, P), ``weight_hr_l{k}`` (P, H), h_0 / h_n (batch,
    num_layers * D, P), outputs (batch, T, D * P), layers above the first take D * P inputs.

    Example:
        >>> import nnjit as nn
        >>> lstm = nn.LSTM(8, 16, batch_first=True)
        >>> sorted(lstm.state_dict())[:2]
        ['bias_hh_l0', 'bias_ih_l0']
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, generator: np.random.Generator | None = None,
                 stateful: bool = False, batch_size: int | None = None):
        super().__init__("lstm", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, generator=generator,
                         stateful=stateful, batch_size=batch_size)


class GRU(RNNBase):
    r"""Gated recurrent unit, PyTorch's ``nn.GRU`` (gates r, z, n):

    .. math::
        r, z = \sigma(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh}),\quad
        n = \tanh(W_{in} x_t + b_{in} + r (W_{hn} h_{t-1} + b_{hn})),\quad
        h_t = (1 - z) n + z h_{t-1}

    Cho et al., "Learning Phrase Representations using RNN Encoder-Decoder" (2014).

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional: as
        PyTorch's. generator: a ``numpy.random.Generator`` for the initial values.

    Shapes: :class:`RNNBase`. Parameters ``weight_ih_l{k}`` (3H, input), ``weight_hh_l{k}``
    (3H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (3H,).
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 generator: np.random.Generator | None = None, stateful: bool = False,
                 batch_size: int | None = None):
        super().__init__("gru", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, generator=generator, stateful=stateful,
                         batch_size=batch_size)

