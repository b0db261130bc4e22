"""The one tracer: :func:`trace` runs a model's ``forward`` once on symbolic inputs.

Everything that needs a model's records goes through it: the layout service
(:mod:`nnjit.train.layout_service`: fits, inference, gradients, nnjit.sklearn), the exporters and
``Module.summary``. It is the only code that names each module by its dotted path (the owner of
the ops it records), checks ``forward``'s arity against the inputs and records ``forward``.
:func:`walk_model` is its one traversal of the model; the layout service keys the program cache
on that walk before it decides whether to trace at all, and hands it on so nothing walks twice.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nnjit.data.inputs import InputSpec
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.nn.walk import walk_modules
from nnjit.tape.tape import Tape, Tensor

if TYPE_CHECKING:
    from nnjit.graph.edges import GraphStructure


@dataclass
class ModelWalk:
    """What one traversal of a model finds: ``modules`` as ``[(dotted path, module)]`` and the
    tensors a trace lays out, ``[(dotted name, tensor)]``, each tensor once: ``params`` then
    ``buffers`` (the parameter block's order; the optimizer's span is the parameters)."""

    modules: list
    params: list
    buffers: list

    @property
    def tensors(self) -> list:
        """Parameters then buffers: the parameter block in layout order."""
        return self.params + self.buffers


def walk_model(model) -> ModelWalk:
    """Walk ``model`` once: name every module by its dotted path (``module._path``, which the ops
    it records take as owner) and list its parameters and buffers as ``named_parameters()`` /
    ``named_buffers()`` would, a shared one once under its first name. The modules come in
    :func:`~nnjit.nn.walk.walk_modules`' order, the one traversal every part of nnjit uses."""
    modules = walk_modules(model)
    params, buffers, seen = [], [], set()
    for path, module in modules:
        state = module.__dict__
        state["_path"] = path
        prefix = f"{path}." if path else ""
        for name, p in module._parameters.items():
            if id(p) not in seen:
                seen.add(id(p))
                params.append((prefix + name, p))
        own_buffers = state.get("_buffers")
        if own_buffers:
            for name, b in own_buffers.items():
                if b is not None and id(b) not in seen:
                    seen.add(id(b))
                    buffers.append((prefix + name, b))
    return ModelWalk(modules, params, buffers)


@dataclass
class Trace:
    """A recorded forward pass: the tape, its input tensor (a tuple of them for several inputs),
    the output tensor and the walk that laid the parameters out. ``module_outputs`` maps
    ``id(module)`` to what each module's call returned, when the trace was asked to note it."""

    tape: Tape
    input: Tensor | tuple[Tensor, ...]
    output: Tensor
    walk: ModelWalk
    module_outputs: dict | None = None

    def layer(self, owner: str) -> str:
        """``'path' (ClassName)`` for the module that recorded an op (for error messages)."""
        # (the model itself records its ops under its class name)
        module = {path or type(m).__name__: m for path, m in self.walk.modules}.get(owner)
        return f"'{owner}' ({type(module).__name__})" if module is not None else f"'{owner}'"


class ForwardArityError(ValueError):
    """The data has another number of inputs than ``forward`` takes."""


def trace(model, inputs, *, dtype=DEFAULT_DTYPE, max_batch: int = 1,
          graph: GraphStructure | None = None, where: str = "trace",
          walk: ModelWalk | None = None, note_outputs: bool = False) -> Trace:
    """Record ``model``'s ``forward`` on symbolic inputs, laying nothing out.

    Args:
        model: the :class:`~nnjit.nn.Module` (its ``__init__`` checked by the caller).
        inputs: a width (one float input of that many features) or a sequence of
            :class:`~nnjit.data.inputs.InputSpec`, one per input of ``forward``; for a graph
            model, its node features' width.
        dtype: the arena dtype the records are made for.
        max_batch: rows of a batch (a graph model: its structure's rows).
        graph: the :class:`~nnjit.graph.edges.GraphStructure` a graph model is traced on, or
            None for array inputs.
        where: the method the caller runs, named in errors.
        walk: the model's :func:`walk_model`, when the caller walked it already.
        note_outputs: keep each module's output tensor in :attr:`Trace.module_outputs`.

    Raises:
        ForwardArityError: ``forward`` takes another number of inputs.
        ValueError: a graph model traced on arrays (naming its graph layer).
        TypeError: ``forward`` returned something else than a tensor of this trace.
    """
    specs = ((InputSpec((int(inputs),)),) if not isinstance(inputs, (tuple, list))
             else tuple(inputs))
    walk = walk_model(model) if walk is None else walk
    tape = Tape(dtype, graph.max_rows if graph is not None else max_batch)
    tape.parameters(walk.tensors)
    if note_outputs:
        tape.module_outputs = {}
    if graph is not None:
        from nnjit.graph.edges import graph_inputs

        x, features, edges = graph_inputs(tape, graph, specs[0].cols)
        if x is None:  # sparse features: the batch input is an empty placeholder
            x = tape.input(0, "input")
        with tape.recording():
            out = model(features, edges)
    else:
        _refuse_graph_model(model, walk, where)  # (before forward's arity, which misleads)
        check_forward_arity(model, len(specs), where)
        xs = tuple(tape.input(spec.cols, "input" if len(specs) == 1 else f"input{i}",
                              dims=spec.dims if len(spec.dims) > 1 else None,
                              integer=spec.integer) for i, spec in enumerate(specs))
        with tape.recording():
            out = model(*xs)
        x = xs[0] if len(xs) == 1 else xs
    if not isinstance(out, Tensor) or out.tape is not tape:
        raise TypeError(f"{where}: {type(model).__name__}.forward must return the output tensor "
                        f"of its last layer, got {type(out).__name__}")
    return Trace(tape, x, out, walk, tape.module_outputs)


def _refuse_graph_model(model, walk: ModelWalk, where: str) -> None:
    """A graph model traced on a plain array fails deep in its forward: say what to pass."""
    for path, module in walk.modules:
        if module.takes_edges:
            layer = f"{type(module).__name__} '{path}'" if path else type(module).__name__
            raise ValueError(f"{where}: {type(model).__name__} is a graph model (layer {layer}); "
                             "pass the Graph (or a FullBatch of it), not an array")


def check_forward_arity(model, n_inputs: int, where: str) -> None:
    """Data with ``n_inputs`` arrays must match the positional arguments of ``forward``."""
    cls = type(model)
    names, required, varargs = _FORWARD_ARGS.get(cls) or _forward_args(cls)
    if varargs or required <= n_inputs <= len(names):
        return
    takes = required if required == len(names) else f"{required} to {len(names)}"
    given = "one array" if n_inputs == 1 else f"{n_inputs} arrays"
    raise ForwardArityError(
        f"{where}: {cls.__name__}.forward({', '.join(names)}) takes {takes} input"
        f"{'' if takes == 1 else 's'}, the data has {given} (pass a tuple of arrays, one per "
        "input, in forward's order)")


_FORWARD_ARGS: dict[type, tuple] = {}  # (a trace checks it once; inspect costs ~20 us)
_TAKES_TAPE: dict[type, bool] = {}


def takes_tape(cls: type) -> bool:
    """True for the seed engine's ``forward(self, tape, x)`` signature."""
    if cls not in _TAKES_TAPE:
        params = list(inspect.signature(cls.forward).parameters)
        _TAKES_TAPE[cls] = len(params) >= 2 and params[1] == "tape"
    return _TAKES_TAPE[cls]


def _forward_args(cls: type) -> tuple:
    """``(positional names, how many are required, takes *args)`` of ``cls.forward``, after
    ``self`` (and the seed engine's ``tape``)."""
    params = list(inspect.signature(cls.forward).parameters.values())[1:]  # (self)
    if takes_tape(cls):
        params = params[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    args = _FORWARD_ARGS[cls] = (
        tuple(p.name for p in positional), sum(p.default is p.empty for p in positional),
        any(p.kind is p.VAR_POSITIONAL for p in params))
    return args
