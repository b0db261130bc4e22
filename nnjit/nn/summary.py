"""``Module.summary()``: a table of a model's layers, output shapes and parameter counts.

The output shapes come from a trace (the model's ``forward`` on symbolic tensors, as a trainer
records it, without laying anything out or compiling): each module's ``forward`` is wrapped for
the trace to note the shape of what it returns.
"""

from __future__ import annotations

import numpy as np

from nnjit.checks import is_int
from nnjit.nn.providers import provider
from nnjit.nn.walk import walk_modules
from nnjit.tape.tape import Tensor

_COLUMNS = ("Layer (path)", "Type", "Output shape", "Params")


def summary_table(model, input_shape=None, graph=None) -> str:
    """The text of :meth:`nnjit.nn.Module.summary` (see there): one row per module, below the
    model, by dotted path; a module's count includes its sub-modules' parameters."""
    modules = walk_modules(model)
    shapes, note, input_desc = _traced_shapes(model, modules, input_shape, graph)
    rows = [(name, "Parameter", str(tuple(p.shape)), f"{p.size:,}")  # the model's own
            for name, p in model._parameters.items()]
    for path, module in modules[1:]:  # (the model itself is the totals)
        count = sum(p.size for p in module.parameters())  # its layers' too, shared ones once
        rows.append((path, type(module).__name__,
                     shapes.get(id(module), "-") if shapes is not None else "-", f"{count:,}"))
    total = model.num_parameters()
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(_COLUMNS)]

    def line(cells):
        return "  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    width = sum(widths) + 2 * (len(widths) - 1)
    out = [f"Model: {type(model).__name__}", line(_COLUMNS), "-" * width]
    out += [line(r) for r in rows]
    # every parameter trains (nnjit has no frozen ones), so both totals are the same
    out += ["=" * width, f"Total params: {total:,}", f"Trainable params: {total:,}"]
    if input_desc:
        out.append(f"Input: {input_desc}")
    if note:
        out.append(note)
    return "\n".join(out)


def _input_width(modules, input_shape) -> int | None:
    if input_shape is not None:
        shape = (input_shape,) if isinstance(input_shape, (int, np.integer)) else tuple(input_shape)
        last = shape[-1] if shape else None
        if not is_int(last) or last < 1:
            raise ValueError(f"summary: input_shape must be a width >= 1 or a shape ending with "
                             f"one, got {input_shape!r}")
        return int(shape[-1])
    for _, module in modules:
        for attr in ("in_features", "in_channels"):
            width = getattr(module, attr, None)
            if isinstance(width, (int, np.integer)) and width > 0:
                return int(width)
    return None


def _traced_shapes(model, modules, input_shape, graph):
    """``({id(module): "(rows, cols)"}, note, input description)``; shapes None if no trace."""
    from nnjit.data.full_batch import FullBatch
    from nnjit.data.graph import Graph

    width = _input_width(modules, input_shape)
    is_graph_model = any(m.takes_edges for _, m in modules)
    if graph is not None and not isinstance(graph, (Graph, FullBatch)):
        raise TypeError(f"summary: graph must be a Graph or FullBatch, got {type(graph).__name__}")
    if is_graph_model and graph is None:
        return None, "Output shapes: pass graph=... (the Graph to trace on) to see them", None
    if graph is not None:
        graph = graph.graph if isinstance(graph, FullBatch) else graph
        width = graph.num_features
    if width is None:
        return None, "Output shapes: pass input_shape=... (the input width) to see them", None
    if not model.parameters():
        return None, None, None

    trainer = provider("inference_trainer", f"{type(model).__name__}.summary")(model)
    shapes: dict[int, str] = {}
    wrapped = []
    for _, module in modules:
        wrapped.append(module)
        module.__dict__["forward"] = _noting(module, shapes, batch_rows=graph is None)
    try:
        trainer.trace(width, graph)  # (only traces: nothing laid out)
    finally:
        for module in wrapped:
            del module.__dict__["forward"]
    desc = (f"a graph of {graph.num_nodes} nodes with {width} features" if graph is not None
            else f"(None, {width})")
    return shapes, None, desc


def _noting(module, shapes: dict, batch_rows: bool):
    """``module.forward`` that notes the shape of its output in ``shapes``."""
    forward = type(module).forward.__get__(module)

    def noted(*args):
        out = forward(*args)
        if isinstance(out, Tensor):
            rows = "None" if batch_rows and out.spec.batch else str(int(out.rows))
            shapes[id(module)] = f"({rows}, {out.cols})"
        return out

    return noted
