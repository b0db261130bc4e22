"""The trace the exporters read: :func:`nnjit.nn.trace.trace` of a model on one input, without a
trainer.

Nothing is compiled and no trainer is touched, so it works on a model that was never fitted;
this module adds what export needs around the one tracer: the input's row shape
(:func:`export_input`: features, images or integer indices, or a graph's node features) and
errors that say what export supports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnjit.checks import is_int
from nnjit.data.inputs import InputSpec
from nnjit.nn.module import Module
from nnjit.nn.trace import ForwardArityError, Trace, trace
from nnjit.nn.walk import walk_modules

#: Rows of the traced batch (nodes of a traced graph). Only shapes are recorded; an uncommon
#: value keeps a parameter's row count from passing for the batch size by coincidence.
TRACE_BATCH = 7
#: The traced graph's edges: a ring over the TRACE_BATCH nodes plus a self loop and a duplicate
#: (only the ops recorded matter; an ONNX graph model takes any edge_index).
TRACE_EDGES = np.array([[0, 1, 2, 3, 4, 5, 6, 2, 0, 3, 3], [1, 2, 3, 4, 5, 6, 0, 2, 1, 5, 5]],
                       dtype=np.int64)

SHAPE_FORMS = ("input_shape must be (batch, n_features), (batch, C, H, W) or another "
               "(batch, *dims) with batch None or a positive int, or (n_features,)")


@dataclass(frozen=True)
class ExportInput:
    """What the exported model takes: one input of row shape ``spec.dims`` (integers when
    ``spec.integer``), or for a graph model (``graph``) node features of ``spec.dims[0]``
    columns and an edge index."""

    spec: InputSpec
    graph: bool = False


def is_graph_model(model: Module) -> bool:
    """Whether ``model`` holds a graph layer (its forward takes ``(x, edges)``)."""
    return any(m.takes_edges for _, m in walk_modules(model))


def export_input(model: Module, input_shape, where: str) -> ExportInput:
    """The input to trace ``model`` on: from ``input_shape`` (``n``, ``(n,)``, ``(batch, n)``,
    ``(batch, C, H, W)``, ...; the batch entry may be None and is ignored, the exported batch is
    dynamic), else the input the model's trainer compiled it for (images and integer inputs
    included), else the first layer's: a ``Linear``'s ``in_features`` or a graph layer's
    ``in_channels`` (a first ``Conv2d`` or ``Embedding`` needs ``input_shape``: the image size
    or the number of indices per row is not in the layer)."""
    graph = is_graph_model(model)
    if input_shape is not None:
        dims = _parse_shape(input_shape, where)
        if graph and len(dims) != 1:
            raise ValueError(f"{where}: {type(model).__name__} is a graph model: input_shape is "
                             f"(num_nodes, n_features) with num_nodes None, got {input_shape!r}")
        return ExportInput(InputSpec(dims), graph)
    trainer = model.__dict__.get("_trainer")
    program = getattr(trainer, "program", None)
    if program is not None and not graph:
        _refuse_inputs(model, program.input_specs, where)
        return ExportInput(program.input_specs[0])
    from nnjit.nn.conv import Conv2d
    from nnjit.nn.embedding import Embedding
    from nnjit.nn.linear import Linear

    need = (f"{type(model).__name__} has no Linear layer to take the input width from; pass "
            "input_shape=(None, n_features), or (None, C, H, W) for images")
    for path, m in walk_modules(model):
        name = f"{type(m).__name__} '{path}'" if path else type(m).__name__
        if m.takes_edges:
            return ExportInput(InputSpec((m.in_channels,)), True)
        if isinstance(m, Linear):
            return ExportInput(InputSpec((m.in_features,)), graph)
        if isinstance(m, Conv2d):  # (the image size is not in the layer)
            need = (f"the first layer, {name}, takes images: pass "
                    f"input_shape=(None, {m.in_channels}, H, W)")
            break
        if isinstance(m, Embedding):
            need = (f"the first layer, {name}, takes integer indices: pass "
                    "input_shape=(None, K) for K indices per row")
            break
    raise ValueError(f"{where}: {need}")


def _parse_shape(input_shape, where: str) -> tuple[int, ...]:
    """The row shape of ``input_shape``: ``n`` and ``(n,)`` are ``(n,)``; a longer tuple is
    ``(batch, *dims)``."""
    shape = (input_shape,) if isinstance(input_shape, (int, np.integer)) else input_shape
    try:
        shape = tuple(shape)
    except TypeError:
        shape = None
    if shape is not None and isinstance(input_shape, str):
        shape = None
    if shape is not None and len(shape) == 1:
        dims = shape
    elif shape is not None and len(shape) >= 2 and (shape[0] is None or (
            is_int(shape[0]) and shape[0] > 0)):
        dims = shape[1:]
    else:
        dims = None
    if dims is None or not all(is_int(d) and d > 0 for d in dims):
        raise ValueError(f"{where}: {SHAPE_FORMS}, got {input_shape!r}")
    return tuple(int(d) for d in dims)


def trace_model(model: Module, inp: ExportInput | int, dtype, where: str) -> Trace:
    """Record ``model``'s forward pass on ``inp`` (a width: one float input of that many
    features). A model whose only input feeds an ``Embedding`` is traced on integers (the
    float trace fails on its first op, an embedding refusing floats)."""
    if not isinstance(model, Module):
        raise TypeError(f"{where}: expected an nnjit Module, got {type(model).__name__}")
    inp = inp if isinstance(inp, ExportInput) else ExportInput(InputSpec((int(inp),)))
    model._check_init()
    spec = inp.spec
    shown = "(None, " + ", ".join(map(str, spec.dims)) + ")" if spec.dims else "(None,)"
    try:
        if inp.graph:
            from nnjit.graph.edges import GraphStructure

            structure = GraphStructure(TRACE_EDGES, TRACE_BATCH)
            return trace(model, spec.cols, dtype=dtype, graph=structure, where=where)
        try:
            return trace(model, [spec], dtype=dtype, max_batch=TRACE_BATCH, where=where)
        except TypeError as exc:
            from nnjit.nn.embedding import Embedding

            has_embedding = any(isinstance(m, Embedding) for _, m in walk_modules(model))
            if spec.integer or not has_embedding or "integer" not in str(exc):
                raise
            return trace(model, [InputSpec(spec.dims, True)], dtype=dtype,
                         max_batch=TRACE_BATCH, where=where)
    except ForwardArityError as exc:
        raise NotImplementedError(f"{exc}; export supports models with one input") from None
    except ValueError as exc:
        raise ValueError(f"{where}: tracing {type(model).__name__} on inputs of shape {shown} "
                         f"failed ({exc}); if that is not the model's input, pass "
                         "input_shape=(None, n_features), or (None, C, H, W) for images") from exc


def _refuse_inputs(model: Module, specs, where: str) -> None:
    """Export writes one input (float, or integer indices): refuse a model laid out for
    several, saying why."""
    if len(specs) == 1:
        return
    shown = ", ".join(s.describe() for s in specs)
    raise NotImplementedError(f"{where}: {type(model).__name__} takes {shown}; export supports "
                              "models with one float input or one integer input")
