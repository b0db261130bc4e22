"""Tracing: ``forward`` runs once on symbolic :class:`Tensor` objects and the tape records ops.

The tape knows slot shapes, which slots need gradients and, for each op's inputs, whether its
backward is the *first* writer of that gradient in reverse order (it then overwrites instead of
accumulating, so no gradient buffer ever needs zeroing). :meth:`Tape.finish` lays the slots out in
one arena (parameters first, in one contiguous block) and returns a :class:`~nnjit.engine.program.Program`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from nnjit.tape.records import ACCUMULATE, NEEDS_GRAD, RECORD_WIDTH


class OpEntry(NamedTuple):
    """What the tape knows of one registered op."""

    code: int  # the opcode (the nnjit.ops.opcodes.Opcode member for built-in ops)
    name: str  # upper-case op name
    grad_inputs: tuple[int, ...]  # inputs that take gradients
    family: str  # name of its op family
    int_inputs: tuple[int, ...] = ()  # inputs that may hold integers (an embedding's indices)


# Filled by nnjit.ops.register: the op families import the tape, the tape never imports them.
OPS: dict[int, OpEntry] = {}  # opcode -> entry, for every registered op
OPCODE_OF: dict[str, int] = {}  # op name -> opcode
# The Tensor operators ("add" for +, "mul" for *) -> the recorder of their op
# (nnjit/ops/elementwise.py registers them).
OPERATORS: dict[str, Callable] = {}


def op_name(opcode: int) -> str:
    """Lower-case name of a registered op (``"dense"``), else ``"opcode N"``."""
    entry = OPS.get(int(opcode))
    return entry.name.lower() if entry is not None else f"opcode {int(opcode)}"


class BatchDim(int):
    """The batch dimension of a traced tensor.

    Behaves as the int it holds (the largest batch the arena is laid out for) but remembers that
    the real row count varies per batch, so ``tape.alloc_tensor(x.rows, ...)`` makes a batch slot.
    """

    def __repr__(self) -> str:
        return f"batch({int(self)})"


@dataclass(slots=True)
class SlotSpec:
    """Shape and role of one arena slot, before layout."""

    rows: int
    cols: int
    batch: bool = False
    param: bool = False
    requires_grad: bool = False
    name: str = ""
    edges: int = -1  # an edge slot: the CSR number whose edges are its rows (-1: not one)
    constant: bool = False  # data written once after layout, never a gradient (laid out last)
    integer: bool = False  # holds integers (the bits of int32/int64 in the float32/float64 arena)

    @property
    def size(self) -> int:
        return self.rows * self.cols


@dataclass(slots=True)
class Node:
    """One recorded op (the Python side of a record)."""

    opcode: int  # an Opcode member for built-in ops
    inputs: list[int]
    out: int
    aux: list[int] = field(default_factory=lambda: [-1, -1, -1])
    owner: str = ""
    python_op: object | None = None
    needs_grad: list[bool] = field(default_factory=list)
    accumulate: list[bool] = field(default_factory=list)


class Symbolic:
    """Anything a module's ``forward`` may receive while tracing (it has a ``tape``)."""

    __slots__ = ()


class Tensor(Symbolic):
    """A symbolic tensor: a slot on a tape.

    A slot is a (rows, cols) block, one row per sample; ``dims`` is how a row is read, e.g.
    ``(C, H, W)`` for an NCHW image (row-major, product ``cols``), so ``shape`` is ``(rows, *dims)``
    as in PyTorch. :meth:`view` / :meth:`flatten` change ``dims`` only: no op, no copy.

    While tracing only ``shape`` is meaningful. Once the tape is compiled, ``data`` and ``grad``
    are NumPy views into the arena holding the current batch (used by Python ops).
    """

    __slots__ = ("tape", "slot", "dims")

    def __init__(self, tape: Tape, slot: int, dims: tuple[int, ...] | None = None):
        self.tape = tape
        self.slot = slot
        self.dims = (tape.slots[slot].cols,) if dims is None else tuple(int(d) for d in dims)

    @property
    def spec(self) -> SlotSpec:
        return self.tape.slots[self.slot]

    @property
    def rows(self) -> int:
        s = self.tape.slots[self.slot]
        return BatchDim(s.rows) if s.batch else s.rows

    @property
    def cols(self) -> int:
        return self.tape.slots[self.slot].cols

    @property
    def shape(self) -> tuple[int, ...]:
        """``(rows, *dims)``: ``(batch, features)``, or ``(batch, C, H, W)`` for images."""
        return (self.rows, *self.dims)

    @property
    def ndim(self) -> int:
        return 1 + len(self.dims)

    @property
    def is_integer(self) -> bool:
        """Whether the slot holds integers (class or category indices), not floats."""
        return self.tape.slots[self.slot].integer

    def view(self, *shape) -> Tensor:
        """The same slot read with another per-row shape (PyTorch's ``view``): the first entry is
        the batch dimension (``-1`` or the batch size); at most one other entry may be -1.
        ``x.view(-1, 1, 28, 28)`` reads 784 features as a 1x28x28 image."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        where = f"{self.tape.current_owner or 'view'}"
        if len(shape) == 1 and self.cols == 1 and shape[0] in (-1, self.rows):
            return Tensor(self.tape, self.slot, ())  # one value per row: shape (batch,)
        if len(shape) < 2:
            raise ValueError(f"{where}: view{shape}: give the batch dimension first, e.g. "
                             f"x.view(-1, {self.cols})")
        if shape[0] not in (-1, self.rows) and int(shape[0]) != int(self.rows):
            raise ValueError(f"{where}: view{shape}: the batch dimension must stay {self.rows} "
                             "(pass -1)")
        dims = [int(d) for d in shape[1:]]
        if any(d == 0 or d < -1 for d in dims) or dims.count(-1) > 1:
            raise ValueError(f"{where}: view{tuple(shape)}: dimensions must be >= 1, with at "
                             "most one -1")
        known = 1
        for d in dims:
            known *= d if d != -1 else 1
        if -1 in dims:
            if self.cols % known:
                raise ValueError(f"{where}: view{tuple(shape)}: {self.cols} features per row "
                                 f"do not divide into {known}")
            dims[dims.index(-1)] = self.cols // known
        elif known != self.cols:
            raise ValueError(f"{where}: cannot view a row of {self.cols} features (shape "
                             f"{self.shape}) as {tuple(dims)} ({known} features)")
        return Tensor(self.tape, self.slot, tuple(dims))

    reshape = view

    def flatten(self, start_dim: int = 1) -> Tensor:
        """All per-row dimensions as one (``torch.flatten(x, 1)``); only ``start_dim=1``."""
        if start_dim != 1:
            raise ValueError(f"{self.tape.current_owner or 'flatten'}: flatten(start_dim="
                             f"{start_dim}): rows are samples, only start_dim=1 is supported")
        return Tensor(self.tape, self.slot, (self.cols,))

    @property
    def requires_grad(self) -> bool:
        return self.tape.slots[self.slot].requires_grad

    @property
    def data(self) -> np.ndarray:
        return self.tape.program_view(self.slot, grad=False)

    @property
    def grad(self) -> np.ndarray:
        return self.tape.program_view(self.slot, grad=True)

    def __add__(self, other: Tensor) -> Tensor:
        return OPERATORS["add"](self, other)

    def __mul__(self, other: Tensor) -> Tensor:
        return OPERATORS["mul"](self, other)

    def __getitem__(self, key) -> Tensor:
        """Columns of a 2-D tensor: ``x[:, j]`` (shape ``(batch,)``), ``x[:, a:b]``."""
        return OPERATORS["getitem"](self, key)

    __iter__ = None  # (a symbolic tensor has no elements to iterate over)

    def __repr__(self) -> str:
        kind = ", integer" if self.is_integer else ""
        return f"Tensor(slot={self.slot}, shape={self.shape}{kind})"


_current = threading.local()


def current_tape() -> Tape | None:
    """The tape being recorded on this thread, if any."""
    return getattr(_current, "tape", None)


class _Recording:
    """The context manager of :meth:`Tape.recording` (a class: half the calls of a generator)."""

    __slots__ = ("tape", "previous")

    def __init__(self, tape: Tape):
        self.tape = tape
        self.previous = None

    def __enter__(self) -> Tape:
        self.previous = getattr(_current, "tape", None)
        _current.tape = self.tape
        return self.tape

    def __exit__(self, *exc) -> bool:
        _current.tape = self.previous
        return False


class Tape:
    """Records ops while a model's ``forward`` runs on symbolic tensors.

    Args:
        dtype: arena dtype (float32 or float64).
        max_batch: the largest batch the arena must hold; batch slots are laid out for it.
    """

    def __init__(self, dtype=np.float32, max_batch: int = 1):
        self.dtype = np.dtype(dtype)
        self.max_batch = int(max_batch)
        self.slots: list[SlotSpec] = []
        self.nodes: list[Node] = []
        self.hyper: list[float] = []
        self.python_ops: list[object] = []
        self.param_slots: dict[str, int] = {}
        self._param_ids: dict[int, int] = {}
        self.owners: list[str] = []  # module paths being called, innermost last
        self.program = None  # set by Program once laid out
        self.graph = None  # the GraphStructure a graph model is traced on (nnjit.graph.edges)
        self.constants: dict[int, np.ndarray] = {}  # slot -> values written after layout
        self.module_outputs: dict | None = None  # id(module) -> its output, when a trace asks

    # -- context -------------------------------------------------------------------------------
    def recording(self) -> _Recording:
        """Make this the current tape of the thread (for ``forward(self, x)`` style models)."""
        return _Recording(self)

    @property
    def current_owner(self) -> str:
        """Dotted path of the module whose ``forward`` is recording (for error messages)."""
        return self.owners[-1] if self.owners else ""

    # -- slots ---------------------------------------------------------------------------------
    def _new_slot(self, spec: SlotSpec) -> Tensor:
        if self.program is not None:
            raise RuntimeError("this tape is already compiled; record a new one")
        self.slots.append(spec)
        return Tensor(self, len(self.slots) - 1)

    def parameter(self, param, name: str) -> Tensor:
        """The slot holding ``param`` (a :class:`nnjit.nn.Parameter`), created on first use."""
        key = id(param)
        slot = self._param_ids.get(key)
        if slot is None:
            if len(self._param_ids) != len(self.slots):  # some slot is not a parameter
                raise RuntimeError(
                    f"parameter '{name}' was first used during forward; register every parameter "
                    "as a Module attribute so it is laid out with the others"
                )
            rows, cols = param.data.shape if param.data.ndim == 2 else (1, param.data.size)
            grad = getattr(param, "requires_grad", True)  # (a module's Buffer: False)
            t = self._new_slot(SlotSpec(rows, cols, param=True, requires_grad=grad, name=name))
            self._param_ids[key] = t.slot
            self.param_slots[name] = t.slot
            return t
        return Tensor(self, slot)

    def parameters(self, named) -> None:
        """Lay out the ``(dotted_name, Parameter)`` pairs ``named`` in order, first on the tape
        (as :meth:`parameter` does one at a time; a trace lays out all of them up front). A
        :class:`~nnjit.nn.buffer.Buffer` (``requires_grad`` False) gets a slot in the parameter
        block without a gradient; :meth:`parameter` returns its slot as for a parameter."""
        if self.program is not None:
            raise RuntimeError("this tape is already compiled; record a new one")
        slots, ids, by_name = self.slots, self._param_ids, self.param_slots
        if len(ids) != len(slots):
            raise RuntimeError("parameters must be laid out before any other slot")
        for name, param in named:
            key = id(param)
            if key not in ids:
                data = param.data
                rows, cols = data.shape if data.ndim == 2 else (1, data.size)
                ids[key] = by_name[name] = len(slots)
                slots.append(SlotSpec(rows, cols, param=True, name=name,
                                      requires_grad=getattr(param, "requires_grad", True)))

    def input(self, cols: int, name: str = "input", dims: tuple[int, ...] | None = None,
              integer: bool = False) -> Tensor:
        """A batch-sized data slot (no gradient): ``cols`` features per row read as ``dims``
        (default ``(cols,)``); ``integer`` for index columns (embedding inputs)."""
        t = self._new_slot(SlotSpec(BatchDim(self.max_batch), int(cols), batch=True, name=name,
                                    integer=bool(integer)))
        return t if dims is None else t.view(-1, *dims)

    def constant(self, values: np.ndarray, name: str, integer: bool = False) -> Tensor:
        """A fixed-size slot holding ``values`` (rows, cols), written once after layout;
        ``integer``: ``values`` are integers (indices), stored as their bits (int32 in a float32
        arena, int64 in a float64 one), never converted to float."""
        values = np.asarray(values)
        values = values.reshape(len(values), -1) if values.ndim != 2 else values
        if integer and values.dtype.kind not in "iu":
            raise TypeError(f"constant '{name}': integer=True needs an integer array, got "
                            f"{values.dtype}")
        t = self._new_slot(SlotSpec(values.shape[0], values.shape[1], name=name, constant=True,
                                    integer=bool(integer)))
        self.constants[t.slot] = values
        return t

    def alloc_tensor(self, rows: int, cols: int, requires_grad: bool = False) -> Tensor:
        """Allocate an output slot for a Python op (the inspiring engine's API).

        ``rows`` taken from another tensor's ``rows`` keeps its batch dimension.
        """
        batch = isinstance(rows, BatchDim)
        spec = SlotSpec(int(rows), int(cols), batch=batch, requires_grad=bool(requires_grad))
        spec.name = f"{self.current_owner or 'op'}.out"
        return self._new_slot(spec)

    # -- recording -----------------------------------------------------------------------------
    def record(
        self,
        opcode: int,
        inputs: list[Tensor],
        out_rows: int,
        out_cols: int,
        hyper: tuple[float, ...] = (),
        aux: tuple[int, ...] = (),
        extra_inputs: list[Tensor] = (),
        out_requires_grad: bool | None = None,
        out_edges: int | None = None,
        block: tuple[float, ...] = (),
        out_dims: tuple[int, ...] | None = None,
        out_integer: bool = False,
    ) -> Tensor:
        """Record one op and return its output tensor.

        ``hyper`` values go to the hyper table and their indices fill aux0, aux1, ...; ``block``
        (an op's geometry: sizes, strides, paddings) goes to the hyper table as one contiguous
        run whose first index fills the next aux field; ``aux`` gives explicit aux integers
        after them. ``extra_inputs`` are non-differentiable slots (e.g. the dropout mask) placed
        after the differentiable inputs. ``out_dims``: how the output's row is read (default
        ``(out_cols,)``); ``out_integer``: the output holds integers. An integer input is refused
        unless the op's spec lists it in ``int_inputs``.
        """
        # (Runs once per op per trace: kept lean, it counts in a small fit's fixed set-up cost.)
        slots = self.slots
        entry = OPS.get(opcode)
        if entry is None:
            layer = self.current_owner or "the model"
            raise ValueError(f"{layer}: opcode {opcode!r} belongs to no registered op family "
                             "(nnjit.ops.register the family before recording its ops)")
        opcode = entry.code
        grad_inputs = entry.grad_inputs
        needs_grad = []
        in_slots = []
        for k, t in enumerate(inputs):
            if t is None:  # an optional input left out (e.g. no edge weights): slot -1
                needs_grad.append(False)
                in_slots.append(-1)
                continue
            if t.tape is not self:
                raise ValueError(f"{entry.name}: input {t} belongs to another tape")
            if slots[t.slot].integer and k not in entry.int_inputs:
                raise ValueError(f"{self.current_owner or entry.name.lower()}: "
                                 f"{entry.name.lower()} takes float inputs, input {k} holds "
                                 "integers (indices feed an Embedding)")
            needs_grad.append(k in grad_inputs and slots[t.slot].requires_grad)
            in_slots.append(t.slot)
        for t in extra_inputs:
            if t.tape is not self:
                raise ValueError(f"{entry.name}: input {t} belongs to another tape")
            needs_grad.append(False)
            in_slots.append(t.slot)
        if out_requires_grad is None:
            out_requires_grad = any(needs_grad)
        if out_edges is None:  # an op over an edge slot's rows (activation, dropout) keeps them
            out_edges = -1
            for t in inputs:
                if t is not None:
                    spec = slots[t.slot]
                    if spec.edges >= 0 and spec.rows == out_rows:
                        out_edges = spec.edges
                        break
        owner = self.owners[-1] if self.owners else ""
        op_name = entry.name.lower()
        out = self._new_slot(
            SlotSpec(int(out_rows), int(out_cols), isinstance(out_rows, BatchDim), False,
                     out_requires_grad, f"{owner or op_name}.{op_name}", out_edges,
                     integer=bool(out_integer))
        )
        if out_dims is not None:
            out = out.view(-1, *out_dims)
        aux_values = []
        for h in hyper:
            self.hyper.append(float(h))
            aux_values.append(len(self.hyper) - 1)
        if block:
            aux_values.append(len(self.hyper))
            self.hyper.extend(float(v) for v in block)
        for a in aux:
            aux_values.append(int(a))
        while len(aux_values) < 3:
            aux_values.append(-1)
        self.nodes.append(Node(opcode, in_slots, out.slot, aux_values, owner, None, needs_grad, []))
        return out

    def binary(self, opcode: int, a: Tensor, b: Tensor) -> Tensor:
        """Elementwise op on two tensors of the same shape."""
        if a.shape != b.shape:
            name = op_name(opcode)
            raise ValueError(
                f"{self.current_owner or name.upper()}: {name} needs equal shapes, "
                f"got {a.shape} and {b.shape}"
            )
        return self.record(opcode, [a, b], a.rows, a.cols, out_dims=a.dims)

    def unary(self, opcode: int, x: Tensor, *hyper: float) -> Tensor:
        """Elementwise activation (the output keeps ``x``'s shape)."""
        return self.record(opcode, [x], x.rows, x.cols, hyper=hyper, out_dims=x.dims)

    def dense(self, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """``x @ weight.T + bias``."""
        inputs = [x, weight] + ([bias] if bias is not None else [])
        return self.record(OPCODE_OF["DENSE"], inputs, x.rows, weight.rows)

    def _new_slot_like(self, x: Tensor, name: str) -> Tensor:
        """A slot of x's shape (batch rows if x has them), without gradient."""
        return self._new_slot(SlotSpec(x.rows, x.cols, batch=x.spec.batch, name=name,
                                       edges=x.spec.edges))

    def dropout(self, x: Tensor, p: float) -> Tensor:
        """Inverted dropout with a mask slot drawn from the model's RNG in training mode."""
        mask = self._new_slot_like(x, "dropout.mask")
        return self.record(OPCODE_OF["DROPOUT"], [x], x.rows, x.cols, hyper=(p,),
                           extra_inputs=[mask], out_dims=x.dims)

    def loss(self, opcode: int, prediction: Tensor, target: Tensor, aux: tuple = ()) -> Tensor:
        """Record the loss op (it seeds the gradient of ``prediction``)."""
        entry = OPS.get(opcode)
        if entry is None or entry.family != "losses":
            raise ValueError(f"{op_name(opcode)} is not a loss")
        return self.record(opcode, [prediction, target], 1, 1, aux=(-1,) + tuple(aux))

    def python_op(self, op, inputs: list[Tensor], out: Tensor) -> None:
        """Record a Python op: ``op.forward()`` / ``op.backward()`` run between compiled segments."""
        self.python_ops.append(op)
        node = Node(
            opcode=OPS[OPCODE_OF["PYTHON_OP"]].code,
            inputs=[t.slot for t in inputs],
            out=out.slot,
            aux=[len(self.python_ops) - 1, -1, -1],
            owner=self.current_owner or type(op).__name__,
            python_op=op,
        )
        node.needs_grad = [t.requires_grad for t in inputs]
        self.nodes.append(node)

    # -- finishing -----------------------------------------------------------------------------
    def records(self) -> np.ndarray:
        """Decide the gradient writers and return the int32 record table
        ``[opcode, in0, in1, in2, out, aux0, aux1, aux2, grad_flags]``, one row per op.

        Walking the ops in reverse (backward) order, the first op to write a slot's gradient
        overwrites it; later ones accumulate (``node.accumulate``). Parameters follow the same
        rule, so neither activation nor parameter gradients ever need zeroing. (One pass does
        both: this runs on every trace.)
        """
        written: set[int] = set()
        rows = []  # flat, last op first
        for node in reversed(self.nodes):
            accumulate = []
            flags = 0
            needs_grad = node.needs_grad
            for k, slot in enumerate(node.inputs):
                needs = k < len(needs_grad) and needs_grad[k]
                acc = needs and slot in written
                accumulate.append(acc)
                if needs:
                    written.add(slot)
                    if k < 3:
                        flags |= NEEDS_GRAD[k] | (ACCUMULATE[k] if acc else 0)
            node.accumulate = accumulate
            ins = node.inputs
            n_in = len(ins)
            aux = node.aux
            rows += (flags, aux[2], aux[1], aux[0], node.out, ins[2] if n_in > 2 else -1,
                     ins[1] if n_in > 1 else -1, ins[0] if n_in > 0 else -1, int(node.opcode))
        rows.reverse()  # first op first, each row in column order
        return np.array(rows, dtype=np.int32).reshape(len(self.nodes), RECORD_WIDTH)

    def program_view(self, slot: int, grad: bool) -> np.ndarray:
        if self.program is None:
            raise RuntimeError(
                "tensor data exists only after the model is compiled (Trainer.fit / predict)"
            )
        return self.program.view(slot, grad=grad)
