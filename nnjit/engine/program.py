"""A traced model laid out in its arena, plus the Python driver around the compiled loop."""

from __future__ import annotations

import copy
import functools
import weakref

import numpy as np

from nnjit.data.inputs import InputSpec
from nnjit.dtypes import integer_dtype
from nnjit.engine import compile_notice, dispatch, fields
from nnjit.engine import interpreter as it
from nnjit.engine import status as st
from nnjit.engine.fusion import fuse, overwrite_in_place
from nnjit.engine.loop_arrays import LoopArrays, StepArrays
from nnjit.engine.memory import ArenaTooLarge, physical_memory
from nnjit.engine.run_options import RunOptions
from nnjit.graph.graph_data import G_INPUT_LOADED, G_NEED_LOOPS, G_WEIGHTS_READY, no_graph
from nnjit.kernels.dense import TRANSPOSED_MAX_ROWS, outer_scratch_size
from nnjit.kernels.optim import STATE_ROWS
from nnjit.kernels.rng import seed_state
from nnjit.ops.family import registry
from nnjit.ops.opcodes import CLASSIFICATION_LOSSES, GRAPH_LOOPS, Opcode
from nnjit.tape.arena import S_COLS, S_FLAGS, S_OFFSET, S_ROWS, SLOT_BATCH, layout
from nnjit.tape.tape import SlotSpec, Tape, Tensor

_NO_BATCH_LOG = np.zeros((0, len(fields.BATCH_COLUMNS)), dtype=np.float64)

# Program writes its layout vector as one list in this order.
_LAYOUT_ORDER = (fields.L_INPUT, fields.L_TARGET, fields.L_OUTPUT, fields.L_LOSS_OP,
                 fields.L_N_PARAMS, fields.L_SCRATCH, fields.L_MAX_BATCH, fields.L_N_INPUTS,
                 fields.L_N_TRAINABLE)
if _LAYOUT_ORDER != tuple(range(fields.LAYOUT_HEAD)):
    raise ImportError("nnjit.engine.program: the layout vector no longer matches the L_* fields")

# the arena, whose dtype names the build, is execute's argument ``values``
compile_notice.watch(it.execute, "the training loop", LoopArrays._fields.index("values"))


def _input_entries(inputs) -> list[int]:
    """The layout vector's input table: ``(slot, first column, columns)`` per input, the inputs'
    columns side by side in X in argument order."""
    entries, first = [], 0
    for x in inputs:
        entries += [x.slot, first, x.cols]
        first += x.cols
    return entries


# id(dispatch table) -> a reference to it, for the tables whose training loop was compiled (or
# loaded) under the cross-process lock: later runs skip the argument typing that check costs
_locked_tables: dict[int, weakref.ref] = {}


class Program:
    """Records, slot table and arenas of one traced model.

    The model's parameters become views into ``values`` so training updates them in place and
    ``model.state_dict()`` always shows the current weights. ``input`` is the traced input
    tensor, or a sequence of them for a model with several inputs (``forward(self, x_num,
    x_cat)``): the compiled loader copies each one's columns of the packed X into its slot.
    """

    def __init__(
        self, tape: Tape, input: Tensor | tuple[Tensor, ...], target: Tensor, output: Tensor,
        loss: Tensor, seed: int = 0
    ):
        inputs = (input,) if isinstance(input, Tensor) else tuple(input)
        self.tape = tape
        fuse(tape, {x.slot for x in inputs} | {target.slot, output.slot, loss.slot})
        nodes = self.nodes = tape.nodes
        self.dtype = tape.dtype
        self.max_batch = tape.max_batch
        self.python_ops = tape.python_ops
        self.records = tape.records()  # also marks which backward writes overwrite
        overwrite_in_place(self.records, nodes)
        # One pass over the ops: the loss op, the op families in use, graph ops, and the scratch
        # that dense ops need (backward passes accumulating into a shared weight's gradient, and
        # the transposed forward product of batches of at most TRANSPOSED_MAX_ROWS rows and the
        # outer-product forward's packed weight, nnjit.kernels.dense).
        loss_ops = []
        itemsize = np.dtype(self.dtype).itemsize
        has_graph_ops = need_loops = False
        scratch = 1
        slots = tape.slots
        codes = set()
        for i, n in enumerate(nodes):
            opcode = n.opcode
            codes.add(opcode)
            if n.out == loss.slot:
                loss_ops.append(i)
            if opcode == Opcode.DENSE:
                out = slots[n.out]
                if out.rows <= TRANSPOSED_MAX_ROWS:
                    scratch = max(scratch, out.size)
                weight = slots[n.inputs[1]]  # (the packed w.T of the outer-product tiles)
                scratch = max(scratch, outer_scratch_size(weight.cols, weight.rows, itemsize))
                for slot, acc in zip(n.inputs[:2], n.accumulate[:2]):
                    if acc:
                        scratch = max(scratch, slots[slot].size)
            else:
                spec = registry.spec(opcode)
                if spec.scratch is not None:
                    scratch = max(scratch, int(spec.scratch(n, slots)))
                if spec.graph:
                    has_graph_ops = True
                    need_loops = need_loops or n.aux[0] == GRAPH_LOOPS
        if len(loss_ops) != 1 or loss_ops[0] != len(nodes) - 1:
            raise ValueError("the loss must be the last op recorded on the tape")
        self.loss_op = loss_ops[0]
        self.loss_opcode = nodes[self.loss_op].opcode
        self.input_slots = tuple(x.slot for x in inputs)
        self.input_specs = tuple(InputSpec(x.dims, x.is_integer) for x in inputs)
        self.input_slot = self.input_slots[0]  # (a graph model's node features)
        self.target_slot, self.output_slot = target.slot, output.slot
        slots.append(SlotSpec(scratch, 1, name="scratch"))
        self.slots, size, self.n_params, grad_size = layout(slots, self.dtype)
        # (more than the RAM: overcommit would accept it, then swap or be killed)
        if (size + grad_size) * itemsize > physical_memory():
            raise ArenaTooLarge(size * itemsize, grad_size * itemsize, self.max_batch, False)
        try:
            self.values = np.zeros(size, dtype=self.dtype)
            self.grads = np.zeros(grad_size, dtype=self.dtype)  # constants (laid out last): none
        except MemoryError:
            self.values = None  # (the traceback keeps this object: not its values arena)
            raise ArenaTooLarge(size * itemsize, grad_size * itemsize, self.max_batch,
                                True) from None
        self.hyper = np.array(tape.hyper + [0.0], dtype=np.float64)
        # the optimizer's span: parameters come first in the block, buffers (no gradient) after
        self.n_trainable = min([int(self.slots[k, S_OFFSET]) for k, spec in enumerate(slots)
                                if spec.param and not spec.requires_grad], default=self.n_params)
        self.layout = np.array([  # in L_* order (see _LAYOUT_ORDER)
            inputs[0].slot,  # L_INPUT
            target.slot,  # L_TARGET
            output.slot,  # L_OUTPUT
            self.loss_op,  # L_LOSS_OP
            self.n_params,  # L_N_PARAMS
            len(slots) - 1,  # L_SCRATCH
            self.max_batch,  # L_MAX_BATCH
            len(inputs),  # L_N_INPUTS
            self.n_trainable,  # L_N_TRAINABLE
            *_input_entries(inputs),  # per input: slot, first column in X, columns
        ], dtype=np.int64)  # (written here only: runs read their options from RunOptions)
        self.current_rows = self.max_batch
        self.rng = seed_state(seed)
        self.param_slots = tape.param_slots  # (frozen: the tape records nothing once laid out)
        # {name: (offset, size)} of every parameter and buffer in the parameter block (what
        # binding a model's tensors to an instance reads; shared by the instances)
        self.param_offsets = {name: (int(self.slots[k, S_OFFSET]),
                                     int(self.slots[k, S_ROWS] * self.slots[k, S_COLS]))
                              for name, k in tape.param_slots.items()}
        self.graph = tape.graph
        if has_graph_ops and tape.graph is None:
            raise ValueError("graph ops were recorded without a graph (trace the model with one)")
        self.gdata = tape.graph.gdata if tape.graph is not None else no_graph()
        if has_graph_ops:  # sampled batches build the self-loop CSR only when it is read
            self.gdata[G_WEIGHTS_READY] = 0  # a new arena: edge weights not computed yet
            self.gdata[G_NEED_LOOPS] = need_loops
        # the families the records use: the core ones are inlined in the compiled loop, the
        # others are entries of its dispatch table (nnjit.engine.dispatch)
        self.families = tuple(dict.fromkeys(registry.family_of(op) for op in sorted(codes)))
        self._tables = {}  # (run kind, data kinds) -> dispatch table, made on demand
        self._write_constants()
        tape.program = self

    def _write_constants(self) -> None:
        """Write the data the ops read (sparse feature values) into a new arena."""
        spec_of = self.tape.slots
        for slot, init in self.tape.constants.items():
            off, rows, cols = (int(v) for v in self.slots[slot, [S_OFFSET, S_ROWS, S_COLS]])
            span = self.values[off : off + rows * cols]
            if spec_of[slot].integer:  # the integers' bits, never a float conversion
                ints, kind = np.asarray(init).ravel(), integer_dtype(self.dtype)
                if ints.size and not (np.iinfo(kind).min <= ints.min()
                                      and ints.max() <= np.iinfo(kind).max):
                    raise ValueError(f"constant '{spec_of[slot].name}': integers outside the "
                                     f"{kind} range of a {self.dtype} arena")
                span.view(kind)[:] = ints
            else:
                span[:] = np.asarray(init, self.dtype).ravel()

    # -- reuse (nnjit.engine.program_cache) ------------------------------------------------------
    @property
    def reusable(self) -> bool:
        """Whether another model of the same structure may run on a copy of this layout: no
        Python ops (they hold the traced model's modules) and no graph (it holds the data)."""
        return not self.python_ops and self.graph is None

    def template(self) -> Program:
        """This layout without its arenas: what :meth:`instance` copies. It keeps the records,
        slot table and build, never the parameters or the RNG of the fit that made it."""
        template = object.__new__(type(self))
        template.__dict__.update(self.__dict__)
        template.__dict__.update(values=None, grads=None, rng=None, gdata=None,
                                 hyper=self.hyper.copy(), _tables={})
        template._arena_sizes = (self.values.size, self.grads.size)
        # Its own copy of the tape, frozen by the template: the traced tape points back to this
        # program, whose arena the cache must not keep alive.
        template.tape = copy.copy(self.tape)
        template.tape.program = template
        return template

    def instance(self, seed: int) -> Program:
        """A new program on this template's layout, with zeroed arenas and the RNG of ``seed``:
        what ``Program(...)`` on a fresh trace of the same structure would be."""
        program = object.__new__(type(self))
        program.__dict__.update(self.__dict__)
        values_size, grads_size = self._arena_sizes
        try:
            program.values = np.zeros(values_size, dtype=self.dtype)
            program.grads = np.zeros(grads_size, dtype=self.dtype)
        except MemoryError:
            program.values = None  # (the traceback keeps this object: not its values arena)
            itemsize = np.dtype(self.dtype).itemsize
            raise ArenaTooLarge(values_size * itemsize, grads_size * itemsize, self.max_batch,
                                True) from None
        # The arrays the compiled loop writes are the instance's own; it only reads the records,
        # the slot table (graph batches write it: graph programs are not reused) and the layout.
        program.hyper = self.hyper.copy()
        program.rng = _seeded_state(seed)
        # (the template's _tables are shared: a table holds only addresses of compiled code,
        # the same for every instance of one layout)
        program.gdata = _NO_GRAPH.copy()
        program.current_rows = self.max_batch
        if self.tape.constants:
            program._write_constants()
        return program

    # -- views ---------------------------------------------------------------------------------
    def view(self, slot: int, grad: bool = False) -> np.ndarray:
        """2-D view of a slot for the current batch (what Python ops read and write)."""
        fields = self.slots[slot, [S_OFFSET, S_ROWS, S_COLS, S_FLAGS]]
        off, rows, cols, flags = (int(v) for v in fields)
        if flags & SLOT_BATCH:
            rows = self.current_rows
        buf = self.grads if grad else self.values
        return buf[off : off + rows * cols].reshape(rows, cols)

    def integer_view(self, slot: int) -> np.ndarray:
        """:meth:`view` of an integer slot's values as the integers it holds (int32 in float32
        arenas, int64 in float64 arenas)."""
        return self.view(slot).view(integer_dtype(self.dtype))

    @property
    def params(self) -> np.ndarray:
        """The parameter block (all parameters, one contiguous span)."""
        return self.values[: self.n_params]

    @property
    def is_classifier(self) -> bool:
        return self.loss_opcode in CLASSIFICATION_LOSSES

    @property
    def n_features(self) -> int:
        """Columns of the packed X: every input's, side by side."""
        return sum(int(self.slots[s, S_COLS]) for s in self.input_slots)

    @property
    def target_cols(self) -> int:
        return int(self.slots[self.target_slot, S_COLS])

    @property
    def output_cols(self) -> int:
        return int(self.slots[self.output_slot, S_COLS])

    def owner_of(self, op_index: int) -> str:
        return self.nodes[op_index].owner if 0 <= op_index < len(self.nodes) else ""

    # -- running -------------------------------------------------------------------------------
    def loop_arrays(self, options: RunOptions, data, step: StepArrays, state, best, history,
                    out, batch_log=None) -> LoopArrays:
        """Everything one run hands the compiled loop, gathered here alone: this program's
        arrays, ``data`` ``(X, Y, Xv, Yv, perm)``, ``options``' config row and the dispatch
        table they pick, ``step`` (:class:`StepArrays`), the run state row, the best-weights
        snapshot, the history, PREDICT's ``out`` and the optional per-batch log."""
        # The loop only reads the data: it gets read-only views (free), so a read-only X (a
        # memmap, joblib's arrays) runs the same compiled loop as a writable one, and the
        # loader's signature, which names X's type, fits the validation arrays too.
        if options.task == fields.TASK_FIT:  # (the step indexes the state by row, unchecked)
            _check_state_rows(options.optimizer, step.opt_state)
        X, Y, Xv, Yv, perm = data
        X, Y, Xv, Yv = _read_only(X), _read_only(Y), _read_only(Xv), _read_only(Yv)
        for a, b, name in ((X, Xv, "X"), (Y, Yv, "Y")):
            if a.dtype != b.dtype or a.ndim != b.ndim or not (a.flags.c_contiguous
                                                              and b.flags.c_contiguous):
                raise TypeError(f"the compiled loop's {name} and validation {name} must be "
                                f"C-contiguous arrays of one dtype and rank, got {a.dtype} "
                                f"{a.ndim}-D and {b.dtype} {b.ndim}-D")
        return LoopArrays(options.task, self.records, self.slots, self.hyper, self.values,
                          self.grads, self.rng, self.layout, X, Y, Xv, Yv, perm,
                          options.config_row(), *step, state, best, history,
                          _NO_BATCH_LOG if batch_log is None else batch_log, out, self.gdata,
                          self._table(options, X, Y, perm))

    def _table(self, options: RunOptions, X, Y, perm) -> np.ndarray:
        """The dispatch table of a run with ``options``: this program's families, its job
        loader (the augmenting one for a fit with augmentation) and the MPI hooks for a
        data-parallel fit, and a fit's optimizer step; every entry compiled (or loaded from
        numba's cache) when first needed."""
        mpi = options.mpi is not None
        augment = options.augmentation is not None  # (RunOptions refuses both together)
        optimizer = options.optimizer if options.task == fields.TASK_FIT else None
        # (X and Y are C-contiguous read-only views here: their dtype and rank name their numba
        # types, which cost ~8 us each to compute; a fit of Iris takes ~250 us in all)
        key = (augment, mpi, optimizer, X.dtype.str, X.ndim, Y.dtype.str, Y.ndim,
               perm.dtype.str, perm.ndim, perm.flags.c_contiguous, perm.flags.writeable)
        table = self._tables.get(key)
        if table is None:
            data_types = tuple(_numba_type(a) for a in (X, Y, perm))
            table = self._tables[key] = dispatch.table(self.families, self.dtype, data_types,
                                                       augment=augment, mpi=mpi,
                                                       optimizer=optimizer)
        return table

    def prepare(self, options: RunOptions, data, step: StepArrays, state, best, history, out,
                batch_log=None) -> None:
        """Compile (or load from the cache) what :meth:`run` with these arguments needs, now: a
        caller starts its progress clock after this, not before the compile. A first compile in
        the process prints one line on stderr per compiled piece (:mod:`.compile_notice`)."""
        compile_notice.ensure_compiled(
            it.execute, self.loop_arrays(options, data, step, state, best, history, out,
                                         batch_log))

    def run(self, options: RunOptions, data, step: StepArrays, state, best, history, out,
            on_pause=None, batch_log=None, call=None, grow=None) -> int:
        """Call the compiled loop until ``options.task`` is done, running Python ops and pauses.

        Args:
            options: the run's :class:`~nnjit.engine.run_options.RunOptions`.
            data: ``(X, Y, Xv, Yv, perm)`` arrays.
            step: the optimizer's, regularizer's and schedule's :class:`StepArrays`.
            on_pause: called after every epoch chunk; returning False stops the run.
            batch_log: optional (epochs * batches, 5) float64 array for per-batch rows.
            call: ``call(execute, arrays)`` runs each compiled call (default: directly).
            grow: called after ``on_pause`` with the :class:`LoopArrays`; returns them, or
                them with a longer ``history`` / ``batch_log`` for the next epochs.

        Returns the final status (DONE, or PAUSED when ``on_pause`` stopped it).
        Raises on divergence.
        """
        self.gdata[G_INPUT_LOADED] = 0  # the caller's X may differ from the last call's
        args = self.loop_arrays(options, data, step, state, best, history, out, batch_log)
        execute = it.execute
        ready = _locked_tables.get(id(args.table))
        if ready is None or ready() is not args.table:  # a first run of this table (any fit)
            compile_notice.ensure_compiled(execute, args)  # one process compiles, under a lock
            _locked_tables[id(args.table)] = weakref.ref(args.table)
        while True:
            status, where = execute(*args) if call is None else call(execute, args)
            if status == st.YIELD_FORWARD or status == st.YIELD_BACKWARD:
                self._run_python_op(status, int(where), state)
                continue
            if status == st.PAUSED:
                if on_pause is not None and on_pause() is False:
                    return status
                if grow is not None:
                    args = grow(args)
                continue
            if status != st.DONE:
                self.current_rows = int(state[fields.ST_ROWS])  # (views show the failed batch)
                st.raise_for_status(
                    int(status), int(where), int(state[fields.ST_EPOCH]), self,
                    restored=bool(state[fields.ST_RESTORED]),
                )
            return status

    def _run_python_op(self, status: int, index: int, state: np.ndarray) -> None:
        node = self.nodes[index]
        op = node.python_op
        self.current_rows = int(state[fields.ST_ROWS])
        if status == st.YIELD_FORWARD:
            op.forward()
            state[fields.ST_CURSOR] = index + 1
        else:
            for slot, needs, acc in zip(node.inputs, node.needs_grad, node.accumulate):
                if needs and not acc:  # Python ops accumulate; the first writer starts from zero
                    self.view(slot, grad=True)[...] = 0
            op.backward()
            state[fields.ST_CURSOR] = index - 1


_NO_GRAPH = no_graph()  # (each program writes its own copy)


@functools.lru_cache(maxsize=256)
def _seed_words(seed: int) -> bytes:
    return seed_state(seed).tobytes()


def _seeded_state(seed) -> np.ndarray:
    """``seed_state(seed)``, a new array; the states of the last seeds used are kept (a grid
    search seeds its fits alike)."""
    if type(seed) is not int:
        return seed_state(seed)
    return np.frombuffer(_seed_words(seed), dtype=np.int64).copy()


def _numba_type(array: np.ndarray):
    from numba import typeof

    return typeof(array)


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a``, or a read-only view of it."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.setflags(write=False)
    return view


def _check_state_rows(kind: int, state: np.ndarray) -> None:
    """ValueError unless ``state`` holds the rows optimizer ``kind``'s compiled step uses (a
    kind without a compiled step is refused by the dispatch table)."""
    rows = STATE_ROWS.get(kind)
    if rows is not None and (state.ndim != 2 or state.shape[0] < rows):
        raise ValueError(f"fit: optimizer kind {kind}'s step uses {rows} state rows, the "
                         f"optimizer's state is {state.shape} (an Optimizer subclass's "
                         "n_buffers must cover its kind's)")
