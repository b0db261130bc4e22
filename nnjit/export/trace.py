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
    """What the exported model takes: inputs of row shapes ``specs[i].dims`` (integers where
    ``specs[i].integer``), one per argument of ``forward``, or for a graph model (``graph``)
    node features of ``specs[0].dims[0]`` columns and an edge index."""

    specs: tuple[InputSpec, ...]
    graph: bool = False

    @property
    def spec(self) -> InputSpec:
        """The first (for most models the only) input."""
        return self.specs[0]


def is_graph_model(model: Module) -> bool:
    """Whether ``model`` holds a graph layer (its forward takes ``(x, edges)``)."""
    return any(m.takes_edges for _, m in walk_modules(model))


def export_input(model: Module, input_shape, where: str) -> ExportInput:
    """The inputs to trace ``model`` on: from ``input_shape`` (``n``, ``(n,)``, ``(batch, n)``,
    ``(batch, C, H, W)``, ..., or a tuple of such shapes, one per input of ``forward``; the batch
    entry may be None and is ignored, the exported batch is dynamic), else the inputs the
    model's trainer compiled it for (images, integer and several inputs included), else the
    first layer's: a ``Linear``'s ``in_features`` or a graph layer's ``in_channels`` (a first
    ``Conv2d`` or ``Embedding`` needs ``input_shape``: the image size or the number of indices
    per row is not in the layer)."""
    graph = is_graph_model(model)
    if input_shape is not None:
        several = (isinstance(input_shape, (tuple, list)) and len(input_shape) > 0
                   and all(isinstance(s, (tuple, list)) for s in input_shape))
        shapes = input_shape if several else (input_shape,)
        specs = tuple(InputSpec(_parse_shape(s, where)) for s in shapes)
        if graph and (len(specs) != 1 or len(specs[0].dims) != 1):
            raise ValueError(f"{where}: {type(model).__name__} is a graph model: input_shape is "
                             f"(num_nodes, n_features) with num_nodes None, got {input_shape!r}")
        return ExportInput(specs, graph)
    trainer = model.__dict__.get("_trainer")
    program = getattr(trainer, "program", None)
    if program is not None and not graph:
        return ExportInput(tuple(program.input_specs))
    from nnjit.nn.conv import Conv2d
    from nnjit.nn.embedding import Embedding
    from nnjit.nn.linear import Linear

    need = (f"{type(model).__name__} has no Linear layer to take the input width from; pass "
            "input_shape=(None, n_features), or (None, C, H, W) for images")
    for path, m in walk_modules(model):
        name = f"{type(m).__name__} '{path}'" if path else type(m).__name__
        if m.takes_edges:
            return ExportInput((InputSpec((m.in_channels,)),), True)
        if isinstance(m, Linear):
            return ExportInput((InputSpec((m.in_features,)),), graph)
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
    inp = inp if isinstance(inp, ExportInput) else ExportInput((InputSpec((int(inp),)),))
    model._check_init()
    specs = inp.specs
    shown = ", ".join("(None" + "".join(f", {d}" for d in s.dims) + ")" for s in specs)
    try:
        if inp.graph:
            from nnjit.graph.edges import GraphStructure

            structure = GraphStructure(TRACE_EDGES, TRACE_BATCH)
            return trace(model, specs[0].cols, dtype=dtype, graph=structure, where=where)
        try:
            return trace(model, list(specs), dtype=dtype, max_batch=TRACE_BATCH, where=where)
        except TypeError as exc:
            from nnjit.nn.embedding import Embedding

            has_embedding = any(isinstance(m, Embedding) for _, m in walk_modules(model))
            if any(s.integer for s in specs) or not has_embedding or "integer" not in str(exc):
                raise
            if len(specs) > 1:  # (which inputs hold indices: the compiled trainer knows)
                raise TypeError(f"{where}: {exc}; export traces several inputs as floats when "
                                "given input_shape: run the model once on its arrays "
                                "(model.predict((X_1, X_2, ...))) and export without "
                                "input_shape") from None
            return trace(model, [InputSpec(specs[0].dims, True)], dtype=dtype,
                         max_batch=TRACE_BATCH, where=where)
    except ForwardArityError as exc:
        raise ValueError(f"{exc}; for export, pass input_shape with one shape per input: "
                         "((None, n_1), (None, n_2), ...)") from None
    except ValueError as exc:
        raise ValueError(f"{where}: tracing {type(model).__name__} on inputs of shape {shown} "
                         f"failed ({exc}); if that is not the model's input, pass "
                         "input_shape=(None, n_features), or (None, C, H, W) for images") from exc
