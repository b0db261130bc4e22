"""The trace the exporters read: :func:`nnjit.nn.trace.trace` of a feed-forward model on one
float input, without a trainer.

Nothing is compiled and no trainer is touched, so it works on a model that was never fitted;
this module adds what export needs around the one tracer: the input width (:func:`input_width`)
and errors that say what export supports.
"""

from __future__ import annotations

import numpy as np

from nnjit.checks import is_int
from nnjit.nn.linear import Linear
from nnjit.nn.module import Module
from nnjit.nn.trace import ForwardArityError, Trace, trace
from nnjit.nn.walk import walk_modules

#: Rows of the traced batch. Only shapes are recorded; an uncommon value keeps a parameter's row
#: count from passing for the batch size by coincidence.
TRACE_BATCH = 7


def input_width(model: Module, input_shape, where: str) -> int:
    """The number of input features: from ``input_shape`` (``n``, ``(n,)`` or ``(batch, n)``; the
    batch entry may be None and is ignored, the exported batch is dynamic), else the width the
    model's trainer compiled it for, else the ``in_features`` of the model's first ``Linear`` in
    registration order."""
    if input_shape is None:
        trainer = model.__dict__.get("_trainer")
        program = getattr(trainer, "program", None)
        if program is not None and getattr(trainer, "_graph", None) is None:
            _refuse_inputs(model, program.input_specs, where)
            return int(program.n_features)
        first = next((m for _, m in walk_modules(model) if isinstance(m, Linear)), None)
        if first is None:
            raise ValueError(f"{where}: {type(model).__name__} has no Linear layer to take the "
                             "input width from; pass input_shape=(None, n_features)")
        return first.in_features
    shape = (input_shape,) if isinstance(input_shape, (int, np.integer)) else input_shape
    try:
        shape = tuple(shape)
    except TypeError:
        shape = None
    ok = shape is not None and len(shape) in (1, 2) and all(
        d is None or (is_int(d) and d > 0)
        for d in shape) and shape[-1] is not None
    if not ok:
        raise ValueError(f"{where}: input_shape must be (batch, n_features) with batch None or a "
                         f"positive int, or (n_features,), got {input_shape!r}")
    return int(shape[-1])


def trace_model(model: Module, n_features: int, dtype, where: str) -> Trace:
    """Record ``model``'s forward pass on a ``(batch, n_features)`` input."""
    if not isinstance(model, Module):
        raise TypeError(f"{where}: expected an nnjit Module, got {type(model).__name__}")
    model._check_init()
    try:
        return trace(model, n_features, dtype=dtype, max_batch=TRACE_BATCH, where=where)
    except ForwardArityError as exc:
        raise NotImplementedError(f"{exc}; export supports models with one float input") from None
    except ValueError as exc:
        raise ValueError(f"{where}: tracing {type(model).__name__} on inputs of {n_features} "
                         f"features failed ({exc}); if that is not the model's input width, pass "
                         "input_shape=(None, n_features)") from exc


def _refuse_inputs(model: Module, specs, where: str) -> None:
    """Export writes one float ``(batch, n_features)`` input: refuse a model laid out for several
    inputs or an integer one, saying why."""
    if len(specs) == 1 and not specs[0].integer:
        return
    shown = ", ".join(s.describe() for s in specs)
    raise NotImplementedError(f"{where}: {type(model).__name__} takes {shown}; export supports "
                              "models with one float input")
