"""The layout service: the one place a model becomes a :class:`Program` bound to its parameters.

:class:`Layout` takes a model, its loss, the input specs, the rows of a batch, the arena dtype
(and, for a graph model, the graph structure) and makes the one decision: a hit in
:mod:`nnjit.engine.program_cache` (a fresh instance of a cached layout: no trace), or trace ->
:class:`Program` -> store. It walks the model once (:func:`nnjit.nn.trace.walk_model`: the cache
key and the trace share the walk) and traces at most once, then binds the parameters into the
new arena. The Trainer (fit, inference, gradients) and nnjit.sklearn lay models out through it;
the exporters and ``Module.summary`` only trace (:func:`nnjit.nn.trace.trace`).
"""

from __future__ import annotations

import numpy as np

from nnjit.data.inputs import InputSpec
from nnjit.engine import program_cache
from nnjit.engine.memory import ArenaTooLarge
from nnjit.engine.program import Program
from nnjit.nn.trace import ModelWalk, Trace, trace, walk_model


class Layout:
    """One layout decision: ``model`` traced on ``specs`` for batches of ``rows`` rows in
    ``dtype``, with ``loss`` recorded after its output.

    :meth:`output_cols` says how wide the output is (the cache knows it, else the trace does)
    before the caller picks the targets' width; :meth:`program` then returns the bound program.
    One :class:`Layout` makes one program.

    Args:
        model: the :class:`~nnjit.nn.Module`.
        loss: the :class:`~nnjit.losses.Loss` whose op ends the records.
        specs: one :class:`~nnjit.data.inputs.InputSpec` per input of ``forward`` (a graph
            model: its node features).
        rows: the rows of a batch the arena holds.
        dtype: the arena dtype.
        graph: the :class:`~nnjit.graph.edges.GraphStructure` of a graph model (never cached),
            or None.
        where: the method the caller runs, named in errors.
    """

    def __init__(self, model, loss, specs: tuple[InputSpec, ...], rows: int, dtype, *,
                 graph=None, where: str = "fit"):
        self.model, self.loss, self.specs, self.rows = model, loss, specs, rows
        self.dtype, self.graph, self.where = np.dtype(dtype), graph, where
        self.walk: ModelWalk = walk_model(model)  # (the one walk: key, trace and binding)
        self.key = None if graph is not None else program_cache.structure_key(
            self.walk.modules, self.walk.params, self.walk.buffers, loss, specs, rows, dtype)
        self.traced: Trace | None = None
        self.param_spans: dict[str, tuple[int, int]] = {}

    def _trace(self) -> Trace:
        if self.traced is None:
            self.traced = trace(self.model, self.specs, dtype=self.dtype, max_batch=self.rows,
                                graph=self.graph, where=self.where, walk=self.walk)
        return self.traced

    def output_cols(self) -> int:
        """The model's output width: the cached layout's, else the trace's (made once)."""
        cols = program_cache.output_cols(self.key)
        return cols if cols is not None else self._trace().output.cols

    def program(self, target_cols: int, seed: int) -> Program:
        """The program with ``target_cols`` target columns and the RNG of ``seed``, its
        parameters bound (:func:`bind_parameters`; their spans in :attr:`param_spans`): a
        fresh instance of a cached layout, else a new one from the trace, then cached.

        Raises:
            MemoryError: its arenas are larger than the RAM, or could not be allocated; the
                message names ``batch_size`` and states the arenas' sizes and the limits.
        """
        try:
            program = self._program(target_cols, seed)
        except ArenaTooLarge as e:
            raise MemoryError(self._too_large(e)) from None
        self.param_spans = bind_parameters(program, self.walk)
        return program

    def _program(self, target_cols: int, seed: int) -> Program:
        program = program_cache.instance(self.key, target_cols, seed)
        if program is None:
            traced = self._trace()
            tape, out = traced.tape, traced.output
            target = tape.input(target_cols, "target")
            loss = self.loss.record(tape, out, target)
            key = self.key
            if key is None:  # (a model the structure key cannot describe: key what was traced)
                key = program_cache.traced_key(tape, traced.input, target, out, loss)
                program = program_cache.instance(key, target_cols, seed)
                if program is not None:  # tensors of this trace read the instance's arena
                    program.tape, tape.program = tape, program
            if program is None:
                program = Program(traced.tape, traced.input, target, traced.output, loss,
                                  seed=seed)
                program_cache.store(key, target_cols, program)
        return program

    def _too_large(self, e: ArenaTooLarge) -> str:
        where = self.where
        what = ("X's rows (gradients runs them as one batch)" if where == "gradients"
                else "batch_size")
        return (f"{where}: {what}: batches of {e.max_batch:,} rows need {e.sizes()} of arena "
                f"memory for {type(self.model).__name__}; {e.why}. Use a smaller "
                f"{'batch' if where == 'gradients' else what}")


def bind_parameters(program: Program, walk: ModelWalk) -> dict[str, tuple[int, int]]:
    """Copy the parameters' and buffers' current values into ``program``'s arena and make each
    ``p.data`` / ``p.grad`` a view of it; returns ``{name: (offset, size)}`` of the parameters
    that take a gradient (the spans a regularizer penalises)."""
    spans = {}
    offsets, values, grads = program.param_offsets, program.values, program.grads
    for name, p in walk.params + walk.buffers:
        off, size = offsets[name]
        end = off + size
        data = p.data
        shape = data.shape
        view = values[off:end].reshape(shape)
        view[...] = data
        p.data = view
        if p.requires_grad:  # (a Buffer has no gradient and no span the regularizer sees)
            p.grad = grads[off:end].reshape(shape)
            spans[name] = (off, size)
    return spans


def rebind(program: Program, walk: ModelWalk) -> dict[str, tuple[int, int]] | None:
    """Bind the parameters to ``program`` again when one of them left its arena since (another
    program of the same model bound them: a second Trainer, ``model.predict``, ``layer(X)`` on
    one of its layers), so every program runs on the parameters' current values, as in
    PyTorch; returns the spans, or None when all were still bound."""
    values = program.values
    for _, p in walk.tensors:
        if p.data.base is not values:
            return bind_parameters(program, walk)
    return None
