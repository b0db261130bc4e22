"""The compiled program of one MLP structure, and a pool that lends them out to fits.

A :class:`CompiledMLP` is a multi-layer perceptron traced once and laid out in its arena (the
core build of the compiled loop, the one every nnjit MLP uses): its weights are copied in from
scikit-learn's ``coefs_`` / ``intercepts_`` before a fit and out after it. Building one costs
milliseconds of Python; a grid search fits the same structure hundreds of times, so finished fits
give their program back to :func:`borrow`'s pool, keyed on everything that shapes the records.
One program serves one fit at a time (its arena is the fit's memory): concurrent fits (joblib's
threading backend) each borrow their own.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from nnjit.engine.program import Program
from nnjit.losses import SklearnBinaryLogLoss, SklearnLogLoss, SklearnSquaredError
from nnjit.nn.activation import ReLU, Sigmoid, Tanh
from nnjit.nn.linear import Linear
from nnjit.nn.sequential import Sequential
from nnjit.tape.arena import S_OFFSET
from nnjit.tape.tape import Tape

#: scikit-learn's hidden activation names -> nnjit modules ("identity": no module).
HIDDEN_ACTIVATIONS = {"relu": ReLU, "tanh": Tanh, "logistic": Sigmoid, "identity": None}

#: scikit-learn's ``out_activation_`` -> the loss fused with it (the network outputs logits).
OUTPUT_LOSSES = {"softmax": SklearnLogLoss, "logistic": SklearnBinaryLogLoss,
                 "identity": SklearnSquaredError}


@dataclass(frozen=True)
class Structure:
    """Everything that shapes an MLP's records: the pool's key."""

    layer_units: tuple[int, ...]  # inputs, hidden sizes, outputs (scikit-learn's layer_units)
    activation: str
    out_activation: str
    dtype: np.dtype
    batch_size: int  # the largest batch the arena holds (training and validation batches)

    @property
    def target_cols(self) -> int:
        """Class indices (one column) under softmax, else one column per output."""
        return 1 if self.out_activation == "softmax" else self.layer_units[-1]


class CompiledMLP:
    """An MLP of ``structure`` laid out in a :class:`~nnjit.engine.program.Program`.

    ``weights[i]`` / ``biases[i]`` are views of layer i's parameters in the arena, shaped as
    scikit-learn's ``coefs_[i].T`` / ``intercepts_[i]``; ``reg_spans`` the weight spans (not the
    biases) that scikit-learn's ``alpha`` penalises.
    """

    def __init__(self, structure: Structure):
        self.structure = s = structure
        modules = []
        for i, (fan_in, fan_out) in enumerate(pairwise(s.layer_units)):
            # (a fixed generator: the values are overwritten, and nnjit's global one is untouched)
            modules.append(Linear(fan_in, fan_out, generator=np.random.default_rng(0)))
            hidden = HIDDEN_ACTIVATIONS[s.activation]
            if i < len(s.layer_units) - 2 and hidden is not None:
                modules.append(hidden())
        model = Sequential(*modules)
        linears = [m for m in modules if isinstance(m, Linear)]
        tape = Tape(s.dtype, s.batch_size)
        named = list(model.named_parameters())  # each Linear's weight, then its bias
        tape.parameters(named)
        x = tape.input(s.layer_units[0], "input")
        with tape.recording():
            out = model(x)
        target = tape.input(s.target_cols, "target")
        loss = OUTPUT_LOSSES[s.out_activation]().record(tape, out, target)
        self.program = program = Program(tape, x, target, out, loss, seed=0)
        slots, values = program.slots, program.values
        self.weights, self.biases, spans = [], [], []
        for layer, (w_name, _), (b_name, _) in zip(linears, named[0::2], named[1::2]):
            w, b = tape.param_slots[w_name], tape.param_slots[b_name]
            off, n = int(slots[w, S_OFFSET]), layer.out_features * layer.in_features
            self.weights.append(values[off : off + n].reshape(layer.out_features,
                                                              layer.in_features))
            spans.append((off, n))
            off = int(slots[b, S_OFFSET])
            self.biases.append(values[off : off + layer.out_features])
        self.reg_spans = np.array(spans, dtype=np.int64).reshape(-1, 2)
        self.best = np.empty(program.n_params, dtype=s.dtype)  # the best-weights snapshot

    def load(self, coefs, intercepts) -> None:
        """Copy scikit-learn's ``coefs_`` / ``intercepts_`` into the arena."""
        for w, b, coef, intercept in zip(self.weights, self.biases, coefs, intercepts):
            w[...] = coef.T
            b[...] = intercept

    def store(self, coefs, intercepts) -> None:
        """Copy the arena's weights into scikit-learn's ``coefs_`` / ``intercepts_`` (in place)."""
        for w, b, coef, intercept in zip(self.weights, self.biases, coefs, intercepts):
            coef[...] = w.T
            intercept[...] = b


_POOL: OrderedDict[Structure, list[CompiledMLP]] = OrderedDict()  # least recently used first
_POOL_LOCK = threading.Lock()
#: Idle programs kept per structure (a threading-backend search runs a few fits at once), and
#: structures kept (a search over layer sizes makes one per size).
POOL_DEPTH, POOL_STRUCTURES = 4, 32


@contextlib.contextmanager
def borrow(structure: Structure):
    """A :class:`CompiledMLP` of ``structure`` for the length of a ``with`` block: an idle one
    from the pool, else a new one; given back at the end (the pool keeps at most
    :data:`POOL_DEPTH` per structure, for the :data:`POOL_STRUCTURES` last used)."""
    with _POOL_LOCK:
        idle = _POOL.get(structure)
        net = idle.pop() if idle else None
    if net is None:
        net = CompiledMLP(structure)
    try:
        yield net
    finally:
        with _POOL_LOCK:
            idle = _POOL.setdefault(structure, [])
            _POOL.move_to_end(structure)
            if len(idle) < POOL_DEPTH:
                idle.append(net)
            while len(_POOL) > POOL_STRUCTURES:
                _POOL.popitem(last=False)
