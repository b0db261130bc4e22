"""The compiled program of one MLP structure, laid out through the layout service.

A :class:`CompiledMLP` is a multi-layer perceptron laid out in its arena by
:class:`~nnjit.train.layout_service.Layout` (the core build of the compiled loop, the one every
nnjit MLP uses): its weights are copied in from scikit-learn's ``coefs_`` / ``intercepts_``
before a fit and out after it. A grid search fits the same structure hundreds of times: every
fit after the first is a hit in the one program cache (:mod:`nnjit.engine.program_cache`), a
fresh arena on the cached layout with no trace, and, from the structure's plan (where its
layers lie in the arena), with no modules built, walked or bound either. Each fit has its own
(its arena is the fit's memory), so concurrent fits (joblib's threading backend) never share one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from nnjit.data.inputs import InputSpec
from nnjit.engine import program_cache
from nnjit.engine.memory import ArenaTooLarge
from nnjit.losses import (
    SklearnBinaryLogLoss,
    SklearnLogLoss,
    SklearnPoissonLoss,
    SklearnSquaredError,
)
from nnjit.nn.activation import ReLU, Sigmoid, Tanh
from nnjit.nn.linear import Linear
from nnjit.nn.sequential import Sequential
from nnjit.nn.sparse_linear import SparseLinear
from nnjit.train.layout_service import Layout

#: scikit-learn's hidden activation names -> nnjit modules ("identity": no module).
HIDDEN_ACTIVATIONS = {"relu": ReLU, "tanh": Tanh, "logistic": Sigmoid, "identity": None}

#: scikit-learn's ``out_activation_`` -> the loss fused with it (the network outputs logits).
OUTPUT_LOSSES = {"softmax": SklearnLogLoss, "logistic": SklearnBinaryLogLoss,
                 "identity": SklearnSquaredError, "exp": SklearnPoissonLoss}


@dataclass(frozen=True)
class Structure:
    """Everything that shapes an MLP's records."""

    layer_units: tuple[int, ...]  # inputs, hidden sizes, outputs (scikit-learn's layer_units)
    activation: str
    out_activation: str
    dtype: np.dtype
    batch_size: int  # the largest batch the arena holds (training and validation batches)
    weighted: bool = False  # the targets end with a sample_weight column
    sparse: bool = False  # X is a CSR matrix: the first layer is a SparseLinear on its rows

    @property
    def target_cols(self) -> int:
        """Class indices (one column) under softmax, else one column per output; then the
        weight column when ``weighted``."""
        return (1 if self.out_activation == "softmax" else self.layer_units[-1]) + self.weighted


class CompiledMLP:
    """An MLP of ``structure`` laid out in a :class:`~nnjit.engine.program.Program`.

    ``weights[i]`` / ``biases[i]`` are views of layer i's parameters in the arena, shaped as
    scikit-learn's ``coefs_[i]`` / ``intercepts_[i]`` (a Linear's weight is stored transposed,
    ``coefs_[i].T``: its view is a transposed one; a SparseLinear's as ``coefs_[0]``);
    ``reg_spans`` the weight spans (not the biases) that scikit-learn's ``alpha`` penalises.

    A ``sparse`` structure's program reads X as row numbers of a CSR matrix the fit hands it
    (:meth:`use_rows`): X is ``(N, 1)`` (:func:`nnjit.graph.csr_rows.row_ids`).
    """

    def __init__(self, structure: Structure):
        self.structure = s = structure
        plan = _plans.get(s)
        program = _instance(plan, s.target_cols) if plan is not None else None
        if program is None:
            program, plan = _laid_out(s)
        # (views of the arena in coefs_' layout: a Linear's weight transposed)
        values = program.values
        self.program = program
        self._transposed = [t for _, _, t in plan.weights]
        self.weights = [values[off : off + shape[0] * shape[1]].reshape(shape).T if t
                        else values[off : off + shape[0] * shape[1]].reshape(shape)
                        for off, shape, t in plan.weights]
        self.biases = [values[off : off + size] for off, size in plan.biases]
        self.reg_spans = plan.reg_spans
        self._bias_offsets = [off for off, _ in plan.biases]
        self.best = np.empty(program.n_params, dtype=s.dtype)  # the best-weights snapshot

    def packed_order(self) -> np.ndarray:
        """The arena position of each entry of scikit-learn's packed parameter vector (every
        ``coefs_[i]`` raveled, then every ``intercepts_[i]``): ``values[order]`` is the vector
        and ``grads[order]`` its gradient."""
        parts = []
        for (offset, _), w, transposed in zip(self.reg_spans.tolist(), self.weights,
                                              self._transposed):
            fan_in, fan_out = w.shape
            if not transposed:  # (a SparseLinear's weight: coefs_' own layout)
                parts.append(offset + np.arange(fan_in * fan_out))
            else:  # coefs_[i][a, b] is the arena's Linear weight [b, a]
                parts.append((offset + np.arange(fan_out * fan_in).reshape(fan_out, fan_in).T
                              ).ravel())
        for offset, b in zip(self._bias_offsets, self.biases):
            parts.append(offset + np.arange(b.size))
        return np.concatenate(parts).astype(np.int64)

    def load(self, coefs, intercepts) -> None:
        """Copy scikit-learn's ``coefs_`` / ``intercepts_`` into the arena."""
        for w, b, coef, intercept in zip(self.weights, self.biases, coefs, intercepts):
            w[...] = coef
            b[...] = intercept

    def store(self, coefs, intercepts) -> None:
        """Copy the arena's weights into scikit-learn's ``coefs_`` / ``intercepts_`` (in place)."""
        for w, b, coef, intercept in zip(self.weights, self.biases, coefs, intercepts):
            coef[...] = w
            intercept[...] = b

    def use_rows(self, gdata: np.ndarray) -> None:
        """Give a ``sparse`` structure's program the CSR rows its X numbers
        (:func:`nnjit.graph.csr_rows.pack_rows`)."""
        self.program.gdata = gdata


class _Plan(NamedTuple):
    """Where a structure's layers lie in its program's arena, found by its first layout."""

    key: object  # the layout's program_cache Key (None: the layout cannot be cached)
    weights: tuple  # (offset, the arena's shape, transposed) per layer
    biases: tuple  # (offset, size) per layer
    reg_spans: np.ndarray  # the weight spans alpha penalises (read only by the compiled loop)


# A grid search fits a few structures hundreds of times; each fit after a structure's first
# takes a fresh instance of its cached layout with no modules built, walked or bound (their
# values are zeros, as a fresh instance's arena: scikit-learn's weights are copied in after).
_plans: dict[Structure, _Plan] = {}
_plans_lock = threading.Lock()
MAX_PLANS = 64  # (as the program cache's entries)


def _laid_out(s: Structure):
    """The program of structure ``s`` laid out through the layout service (modules built,
    walked, keyed, bound), and its :class:`_Plan`, which is kept for the next fit."""
    modules = []
    # (no initial values are drawn: scikit-learn's are copied in; nnjit's global generator
    # is untouched)
    for i, (fan_in, fan_out) in enumerate(pairwise(s.layer_units)):
        modules.append(SparseLinear(fan_in, fan_out, init_values=False) if s.sparse and i == 0
                       else Linear(fan_in, fan_out, init_values=False))
        hidden = HIDDEN_ACTIVATIONS[s.activation]
        if i < len(s.layer_units) - 2 and hidden is not None:
            modules.append(hidden())
    loss = OUTPUT_LOSSES[s.out_activation](weighted=s.weighted)
    spec = InputSpec((1,), integer=True) if s.sparse else InputSpec((s.layer_units[0],))
    layout = Layout(Sequential(*modules), loss, (spec,), s.batch_size, s.dtype)
    program = layout.program(s.target_cols, seed=0)
    linears = [(path, m) for path, m in layout.walk.modules
               if isinstance(m, (Linear, SparseLinear))]
    spans = layout.param_spans
    weights = tuple((spans[f"{path}.weight"][0], m.weight.data.shape, isinstance(m, Linear))
                    for path, m in linears)
    biases = tuple(spans[f"{path}.bias"] for path, _ in linears)
    reg_spans = np.array([spans[f"{path}.weight"] for path, _ in linears],
                         dtype=np.int64).reshape(-1, 2)
    plan = _Plan(layout.key, weights, biases, reg_spans)
    if layout.key is not None and program.reusable:
        with _plans_lock:  # (fits run in threads: joblib's threading backend)
            if len(_plans) >= MAX_PLANS:
                _plans.pop(next(iter(_plans)))
            _plans[s] = plan
    return program, plan


def _instance(plan: _Plan, target_cols: int):
    """A fresh instance of the plan's cached layout, or None (the layout left the program
    cache, or its arena cannot be had: the full path says so in its own words)."""
    if program_cache.output_cols(plan.key) is None:  # (gone: no miss counted twice)
        return None
    try:
        return program_cache.instance(plan.key, target_cols, 0)
    except ArenaTooLarge:
        return None
