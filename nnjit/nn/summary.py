"""``Module.summary()``: a table of a model's layers, output shapes and parameter counts.

The output shapes come from :func:`nnjit.nn.trace.trace` (the model's ``forward`` on symbolic
tensors, as a trainer records it, without laying anything out or compiling), asked to note what
each module's call returns.
"""

from __future__ import annotations

import numpy as np

from nnjit.checks import is_int
from nnjit.nn.trace import ModelWalk, trace, walk_model
from nnjit.tape.tape import Tensor

_COLUMNS = ("Layer (path)", "Type", "Output shape", "Params")


def summary_table(model, input_shape=None, graph=None, dtypes=None) -> str:
    """The text of :meth:`nnjit.nn.Module.summary` (see there): one row per module, below the
    model, by dotted path; a module's count includes its sub-modules' parameters."""
    walk = walk_model(model)
    modules = walk.modules
    shapes, note, input_desc = _traced_shapes(model, walk, input_shape, graph, dtypes)
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


def _row_dims(shape, input_shape) -> tuple[int, ...]:
    """The row shape of one input: ``n`` or ``(n,)`` is ``(n,)``; ``(batch, *dims)`` is
    ``dims`` (the batch entry, None or an int, is ignored)."""
    shape = (shape,) if is_int(shape) else tuple(shape)
    dims = shape if len(shape) == 1 else shape[1:]
    if not dims or not all(is_int(d) and d >= 1 for d in dims):
        raise ValueError(f"summary: input_shape must be a width >= 1, a shape (None, *dims) "
                         f"of sizes >= 1, or a tuple of such shapes (one per input), got "
                         f"{input_shape!r}")
    return tuple(int(d) for d in dims)


def _input_specs(model, modules, input_shape, dtypes):
    """The inputs to trace on (a tuple of InputSpec), or None when nothing says the width."""
    from nnjit.data.inputs import InputSpec

    if input_shape is None:
        trainer = model.__dict__.get("_trainer")
        program = getattr(trainer, "program", None)
        if program is not None and program.graph is None and dtypes is None:
            return program.input_specs  # (what the model was laid out for)
        widths = [int(w) for _, m in modules for attr in ("in_features", "in_channels")
                  if isinstance(w := getattr(m, attr, None), (int, np.integer)) and w > 0]
        if not widths:
            return None
        shapes = [(widths[0],)]
    elif isinstance(input_shape, (tuple, list)) and input_shape and all(
            isinstance(s, (tuple, list)) for s in input_shape):
        shapes = [_row_dims(s, input_shape) for s in input_shape]  # one shape per input
    else:
        shapes = [_row_dims(input_shape, input_shape)]
    if dtypes is None:
        kinds = [False] * len(shapes)
    else:
        dtypes = list(dtypes)
        if len(dtypes) != len(shapes):
            raise ValueError(f"summary: dtypes has {len(dtypes)} entries for {len(shapes)} "
                             "inputs")
        kinds = [np.dtype(d).kind in "iu" for d in dtypes]
    return tuple(InputSpec(d, k) for d, k in zip(shapes, kinds))


def _traced_shapes(model, walk: ModelWalk, input_shape, graph, dtypes=None):
    """``({id(module): "(rows, cols)"}, note, input description)``; shapes None if no trace."""
    from nnjit.data.adapt import GraphInput
    from nnjit.data.full_batch import FullBatch
    from nnjit.data.graph import Graph

    modules = walk.modules
    is_graph_model = any(m.takes_edges for _, m in modules)
    if graph is not None and not isinstance(graph, (Graph, FullBatch)):
        raise TypeError(f"summary: graph must be a Graph or FullBatch, got {type(graph).__name__}")
    if is_graph_model and graph is None:
        return None, "Output shapes: pass graph=... (the Graph to trace on) to see them", None
    if graph is not None:
        graph = graph.graph if isinstance(graph, FullBatch) else graph
        specs = graph.num_features
    else:
        specs = _input_specs(model, modules, input_shape, dtypes)
    if specs is None:
        return None, "Output shapes: pass input_shape=... (the input width) to see them", None
    if not model.parameters():
        return None, None, None

    structure = GraphInput().use(FullBatch(graph)) if graph is not None else None
    traced = trace(model, specs, max_batch=1, graph=structure, where="summary", walk=walk,
                   note_outputs=True)  # (nothing laid out, nothing compiled)
    shapes: dict[int, str] = {}
    for key, out in traced.module_outputs.items():
        shape = _shape_text(out, graph is None)
        if shape is not None:
            shapes[key] = shape
    desc = (f"a graph of {graph.num_nodes} nodes with {specs} features" if graph is not None
            else _describe(specs))
    return shapes, None, desc


def _shape_text(out, batch_free: bool) -> str | None:
    """A module's output shape: ``(None, 8)`` for a tensor, the shapes of a tuple (an RNN's
    ``(output, h_n)``, an LSTM's ``(output, (h_n, c_n))``) in the same nesting; None for
    anything else."""
    if isinstance(out, Tensor):
        rows = "None" if batch_free and out.spec.batch else str(int(out.rows))
        return "(" + ", ".join([rows, *map(str, out.dims)]) + ")"
    if isinstance(out, (tuple, list)) and out:
        parts = [_shape_text(o, batch_free) for o in out]
        if all(p is not None for p in parts):
            return "[" + ", ".join(parts) + "]"
    return None


def _describe(specs) -> str:
    """``(None, 4)``, or each input's shape and kind: ``(None, 3) float, (None, 2) int``."""
    if len(specs) == 1 and not specs[0].integer:
        return "(" + ", ".join(["None", *map(str, specs[0].dims)]) + ")"
    return ", ".join(s.describe() for s in specs)

