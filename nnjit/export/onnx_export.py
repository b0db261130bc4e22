"""ONNX export of nnjit models, built from the traced tape (so a custom ``forward`` works).

Each recorded op on the path from the input to the output becomes ONNX nodes:

- ``Linear`` (DENSE): ``Gemm`` with ``transB=1`` on the PyTorch-layout weight; ``+`` and ``*``
  between tensors: ``Add``/``Mul``; dropout: nothing (inference is the identity); each activation
  its ONNX op with nnjit's exact formula (GELU is the erf form).
- ``Conv2d`` (groups, stride, dilation, zero padding incl. ``"same"``'s odd pixel at the
  bottom/right): ``Conv``; ``MaxPool2d``: ``MaxPool`` (ceil_mode as explicit bottom/right pads);
  ``AvgPool2d``: ``AveragePool``, or two ``MatMul`` with constant window matrices where the
  divisor is not ONNX's (divisor_override, ceil_mode's partial windows); ``AdaptiveAvgPool2d``:
  ``GlobalAveragePool`` for output size 1, else the two ``MatMul`` (any windows).
- ``BatchNorm1d/2d``: evaluation form, ``BatchNormalization`` on the running statistics (the
  batch's, with ``ReduceMean``, without them); ``LayerNorm``: ``LayerNormalization``.
- ``Embedding``: ``Gather`` (integer input ``int64``); ``cat``: ``Concat``; ``x[:, a:b]``:
  ``Slice``; ``Flatten``/``view``: ``Reshape`` where the next op needs another shape.
- Graph layers (GCN, SAGE, GAT): :mod:`nnjit.export.onnx_graph` (``Gather`` and ``ScatterElements``
  over an ``edge_index`` input).
- ``RNN``, ``GRU``, ``LSTM`` and their cells: one ONNX ``RNN``/``GRU``/``LSTM`` node per layer
  direction (lengths as ``sequence_lens``): :mod:`nnjit.export.onnx_recurrent`.

Python ops (``nnjit.Op``) have no ONNX form and raise :class:`NotImplementedError` naming the
layer and the op.

Opset 17 with IR version 8 (onnx 1.12, onnxruntime 1.12 and later, and the other runtimes of
that generation); a graph model with a max aggregation or attention (``ScatterElements`` with
``reduction="max"``) is written with opset 18 (onnx 1.13), the first that has it (checked with
onnxruntime 1.32). A newer opset would only add a native ``Gelu`` (opset 20), the same formula.

Inputs: ``"input"`` for one, named as ``forward``'s arguments for several, ``"x"`` and
``"edge_index"`` for a graph model (see :func:`save_onnx`); every value's per-row shape is
tracked, so a ``Reshape`` appears only where an op needs other dims than its input has.

float64 models: ONNX stores op attributes as float32 and onnxruntime has no float64 kernel for
``Elu``, ``Selu``, ``Softplus``, ``Erf``, ``Conv``, ``AveragePool`` or ``GlobalAveragePool``, so
those ops, LeakyReLU and the normalisations (whose eps is an attribute) are written out with
elementwise ops, ``MatMul`` and float64 constants; GELU evaluates erf in float32 (relative error
about 1e-7), the only float64 op that is not exact to float64 rounding.
"""

from __future__ import annotations

import math
import os

import numpy as np

from nnjit.export.onnx_graph import GRAPH_EDGE_INDEX, GRAPH_X
from nnjit.export.optional import require
from nnjit.export.trace import ExportInput, export_input, trace_model
from nnjit.nn.module import Module
from nnjit.nn.providers import provide
from nnjit.nn.trace import Trace
from nnjit.ops.opcodes import SPECS, Opcode

ONNX_OPSET = 17
#: The opset of graph models that scatter with ``reduction="max"`` (SAGE max, GAT attention).
ONNX_GRAPH_MAX_OPSET = 18
ONNX_IR_VERSION = 8  # the IR version of onnx 1.12 and 1.13 (opsets 17 and 18)
INPUT_NAME, OUTPUT_NAME, BATCH_DIM = "input", "output", "batch"
NODES_DIM, EDGES_DIM = "num_nodes", "num_edges"

SELU_ALPHA = 1.6732632423543772  # as nnjit's kernels and PyTorch
SELU_SCALE = 1.0507009873554805

SUPPORTED = ("Linear, Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm1d/2d, "
             "LayerNorm, Embedding, RNN/GRU/LSTM and their cells, Flatten/view, cat, column "
             "slices, every activation, Dropout "
             "(the identity), + and * between tensors of the same shape, and the graph layers "
             "GCNConv, SAGEConv and GATConv")


def save_onnx(model: Module, path, input_shape=None) -> None:
    """Write ``model`` as an ONNX file: input ``"input"`` of shape ``(batch, *dims)`` (dynamic
    batch; ``(batch, n_features)``, ``(batch, C, H, W)`` for images, int64 ``(batch, K)`` for a
    model whose input feeds an ``Embedding``), output ``"output"`` of shape
    ``(batch, n_outputs)`` (the raw outputs, as ``Trainer.predict_outputs``). A model with
    several inputs (``forward(self, x_num, x_cat)``) takes one ONNX input per argument, named as
    the arguments.

    A graph model (GCNConv, SAGEConv, GATConv) takes ``"x"`` ``(num_nodes, n_features)`` and
    ``"edge_index"`` int64 ``(2, num_edges)`` (row 0 the sources, row 1 the targets, as
    :class:`nnjit.data.graph.Graph`) and gives ``"output"`` ``(num_nodes, n_outputs)``, for
    any graph: the degrees, normalisations and self loops are computed in the ONNX graph.

    The dtype is the parameters' (float32, or float64 for a model compiled in float64); the
    input's shape comes from ``input_shape`` (``(None, n_features)``, ``(None, C, H, W)``, ...),
    else from the trainer that compiled the model, else from its first layer (see
    :func:`nnjit.export.trace.export_input`). The file is checked with
    ``onnx.checker.check_model(full_check=True)`` and written atomically.

    Raises:
        NotImplementedError: a Python op or another op without an ONNX form is on the path to
            the output (the message names the layer and the op).
        ValueError: ``input_shape`` is malformed or the model does not trace on it.
    """
    onnx = require("onnx", "save_onnx")
    where = "save_onnx"
    dtype = _model_dtype(model, where)
    inp = export_input(model, input_shape, where)
    trace = trace_model(model, inp, dtype, where)
    proto = _build(onnx, trace, model, dtype, inp)
    onnx.checker.check_model(proto, full_check=True)
    from nnjit.io.atomic import atomic_replace

    with atomic_replace(os.fspath(path)) as fh:
        fh.write(proto.SerializeToString())


def _model_dtype(model: Module, where: str) -> np.dtype:
    dtypes = {np.dtype(p.data.dtype) for p in model.parameters()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in (np.float32, np.float64):
        found = ", ".join(sorted(str(d) for d in dtypes)) or "no parameters"
        raise ValueError(f"{where}: the parameters must all be float32 or all float64, "
                         f"found {found}")
    return next(iter(dtypes))


def _needed_nodes(trace: Trace) -> list:
    """The recorded ops that the output depends on, in recorded order (a recurrent scan's
    final states and the slots it reads besides its inputs included: ``extra_slots``)."""
    from nnjit.export.onnx_recurrent import extra_slots

    producer, reads = {}, {}
    for node in trace.tape.nodes:
        producer[node.out] = node
        extra_reads, extra_writes = extra_slots(trace.tape, node)
        reads[id(node)] = extra_reads
        for slot in extra_writes:
            producer[slot] = node
    needed, stack = set(), [trace.output.slot]
    while stack:
        node = producer.get(stack.pop())
        if node is not None and id(node) not in needed:
            needed.add(id(node))
            stack.extend(s for s in node.inputs if s >= 0)
            stack.extend(reads[id(node)])
    return [node for node in trace.tape.nodes if id(node) in needed]


class GraphBuilder:
    """Collects ONNX nodes, initializers and unique value names for one export, with the shape
    of every value: a batch value (one row per sample, node or edge, the leading dimension
    dynamic) has per-row ``dims``, a parameter or constant its full shape."""

    def __init__(self, onnx, trace: Trace, dtype: np.dtype, opset: int):
        self.onnx, self.helper = onnx, onnx.helper
        self.trace, self.dtype, self.opset = trace, dtype, opset
        self.double = dtype == np.float64
        self.nodes, self.initializers = [], []
        self.names: dict[int, str] = {}  # slot -> ONNX value name
        self.row_dims: dict[str, tuple] = {}  # batch value -> its per-row dims
        self.full_shape: dict[str, tuple] = {}  # parameter / constant -> its shape
        self.used_names = {INPUT_NAME, OUTPUT_NAME, GRAPH_X, GRAPH_EDGE_INDEX}
        self.constants: dict = {}
        self.reshaped: dict = {}
        self.params = {slot: name for name, slot in trace.tape.param_slots.items()}
        self.param_data = {name: p.data for name, p in trace.walk.tensors}
        self.used_names.update(self.params.values())  # (no generated name takes a parameter's)
        self.cache: dict = {}  # per-export values shared by several ops (edge sets, degrees)

    def unique(self, base: str) -> str:
        name, k = base, 1
        while name in self.used_names:
            k += 1
            name = f"{base}_{k}"
        self.used_names.add(name)
        return name

    def value(self, slot: int) -> str:
        """The ONNX name of a slot's value: a parameter becomes an initializer (its own shape,
        PyTorch's layout) on first use."""
        if slot not in self.names and slot in self.params:
            name = self.params[slot]
            data = np.ascontiguousarray(self.param_data[name], dtype=self.dtype)
            self.initializers.append(self.onnx.numpy_helper.from_array(data, name))
            self.names[slot] = name
            self.full_shape[name] = data.shape
        return self.names[slot]

    def is_fixed(self, name: str) -> bool:
        return name in self.full_shape

    def set(self, slot: int, name: str, dims) -> None:
        """``slot``'s value is the batch value ``name`` with per-row ``dims``."""
        self.names[slot] = name
        self.row_dims[name] = tuple(int(d) for d in dims)

    def dims(self, slot: int) -> tuple:
        """Per-row dims of a batch slot's value (a fixed one: its shape after the first axis)."""
        name = self.value(slot)
        return self.row_dims[name] if name in self.row_dims else self.full_shape[name][1:]

    def shaped(self, slot: int, dims) -> str:
        """``slot``'s value with per-row ``dims`` (a ``Reshape`` when it has others); a fixed
        value is reshaped to ``(rows, *dims)`` of its slot."""
        name, dims = self.value(slot), tuple(int(d) for d in dims)
        if self.is_fixed(name):
            return self.fixed(slot, (self.trace.tape.slots[slot].rows, *dims))
        if self.row_dims[name] == dims:
            return name
        key = (name, dims)
        if key not in self.reshaped:
            out = self.node("Reshape", [name, self.ints([0, *dims])], f"{name}.view")
            self.row_dims[out] = dims
            self.reshaped[key] = out
        return self.reshaped[key]

    def flat(self, slot: int) -> str:
        """``slot``'s value as (rows, cols)."""
        return self.shaped(slot, (self.trace.tape.slots[slot].cols,))

    def fixed(self, slot: int, shape) -> str:
        """A parameter's (or fixed value's) value with the full ``shape``."""
        name, shape = self.value(slot), tuple(int(d) for d in shape)
        if self.full_shape.get(name) == shape:
            return name
        key = (name, shape)
        if key not in self.reshaped:
            out = self.node("Reshape", [name, self.ints(shape)], f"{name}.reshaped")
            self.full_shape[out] = shape
            self.reshaped[key] = out
        return self.reshaped[key]

    def array(self, values, base: str, integer: bool = False) -> str:
        """An initializer holding ``values`` (int64, or the model dtype), shared by equal
        values."""
        data = np.array(values, dtype=np.int64 if integer else self.dtype, order="C")
        key = (data.dtype.str, data.shape, data.tobytes())
        if key not in self.constants:
            name = self.unique(base)
            self.initializers.append(self.onnx.numpy_helper.from_array(data, name))
            self.constants[key] = name
            self.full_shape[name] = data.shape
        return self.constants[key]

    def constant(self, value: float) -> str:
        """A scalar in the model dtype."""
        return self.array(np.array(value),
                          f"const_{value:.17g}".replace("-", "neg").replace(".", "_"))

    def ints(self, values) -> str:
        """A 1-D int64 constant (shapes, axes, indices)."""
        values = [int(v) for v in values]
        return self.array(np.array(values, np.int64),
                          "ints_" + "_".join(str(v).replace("-", "neg") for v in values),
                          integer=True)

    def node(self, op: str, inputs: list[str], base: str, **attrs) -> str:
        out = self.unique(base)
        self.nodes.append(self.helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def reduce(self, op: str, x: str, axes, base: str, keepdims: bool = True) -> str:
        """``ReduceMean``/``ReduceMax``/``ReduceSum`` over ``axes`` (an attribute before opset
        18, an input from 18; ReduceSum's since 13)."""
        if op == "ReduceSum" or self.opset >= 18:
            return self.node(op, [x, self.ints(axes)], base, keepdims=int(keepdims))
        return self.node(op, [x], base, axes=list(axes), keepdims=int(keepdims))

    @property
    def elem(self) -> int:
        return self.helper.np_dtype_to_tensor_dtype(np.dtype(self.dtype))


def refuse(trace: Trace, node, why: str) -> None:
    """Raise NotImplementedError naming the layer that recorded ``node`` and its op (a user
    op family's op by its registered name)."""
    from nnjit.tape.tape import op_name

    raise NotImplementedError(
        f"save_onnx: layer {trace.layer(node.owner)} records the op "
        f"{op_name(node.opcode).upper()}, {why}")


def input_names(model: Module, n: int) -> list[str]:
    """``"input"`` for one input; for several, the names of ``forward``'s arguments
    (``"x_num"``, ``"x_cat"``), else ``"input0"``, ``"input1"``, ..."""
    if n == 1:
        return [INPUT_NAME]
    from nnjit.nn.trace import _forward_args

    names = list(_forward_args(type(model))[0][:n])
    reserved = {OUTPUT_NAME, GRAPH_X, GRAPH_EDGE_INDEX}
    if len(set(names)) == n and not reserved & set(names):
        return names
    return [f"input{i}" for i in range(n)]


def _opset(nodes) -> int:
    from nnjit.export.onnx_graph import NEEDS_MAX_SCATTER

    return ONNX_GRAPH_MAX_OPSET if any(n.opcode in NEEDS_MAX_SCATTER for n in nodes) \
        else ONNX_OPSET


def _build(onnx, trace: Trace, model: Module, dtype: np.dtype, inp: ExportInput):
    from nnjit.export.onnx_graph import GRAPH_HANDLERS
    from nnjit.export.onnx_layers import LAYER_HANDLERS
    from nnjit.export.onnx_recurrent import RECURRENT_HANDLERS

    handlers = {**_HANDLERS, **LAYER_HANDLERS, **GRAPH_HANDLERS, **RECURRENT_HANDLERS}
    nodes = _needed_nodes(trace)
    for node in nodes:  # refuse before building anything
        op = node.opcode
        if op == Opcode.PYTHON_OP:
            raise NotImplementedError(
                f"save_onnx: layer {trace.layer(node.owner)} runs the Python op "
                f"{type(node.python_op).__name__}, which has no ONNX form; ONNX export "
                f"supports {SUPPORTED}")
        if op not in handlers:
            refuse(trace, node, f"which has no ONNX export; ONNX export supports {SUPPORTED}")
    b = GraphBuilder(onnx, trace, dtype, _opset(nodes))
    names = [GRAPH_X] if inp.graph else input_names(model, len(inp.specs))
    tensors = trace.input if isinstance(trace.input, tuple) else (trace.input,)
    for name, tensor, spec in zip(names, tensors, inp.specs):
        b.used_names.add(name)
        b.set(tensor.slot, name, spec.dims)
    for node in nodes:
        op, owner = Opcode(node.opcode), node.owner
        base = f"{owner}.{op.name.lower()}" if owner else op.name.lower()
        handlers[op](b, node, base)
    return _finish(onnx, b, model, inp)


# -- the feed-forward ops ---------------------------------------------------------------------
def _dense(b: GraphBuilder, node, base: str) -> None:
    slots = b.trace.tape.slots
    n_out, n_in = slots[node.out].cols, slots[node.inputs[0]].cols
    inputs = [b.flat(node.inputs[0]), b.fixed(node.inputs[1], (n_out, n_in))]
    if len(node.inputs) > 2 and node.inputs[2] >= 0:
        inputs.append(b.fixed(node.inputs[2], (n_out,)))
    b.set(node.out, b.node("Gemm", inputs, base, transB=1), (n_out,))


def _binary(b: GraphBuilder, node, base: str) -> None:
    tape = b.trace.tape
    a, c = node.inputs
    specs = [tape.slots[s] for s in node.inputs]
    if specs[0].batch != specs[1].batch:
        raise NotImplementedError(
            f"save_onnx: layer {b.trace.layer(node.owner)} combines a batch tensor with a "
            f"fixed-size one in {Opcode(node.opcode).name}; it has no batch-independent ONNX "
            "form")
    dims = b.dims(a)
    if b.dims(c) != dims or b.is_fixed(b.value(a)) or b.is_fixed(b.value(c)):
        dims = (specs[0].cols,)
    out = b.node("Add" if node.opcode == Opcode.ADD else "Mul",
                 [b.shaped(a, dims), b.shaped(c, dims)], base)
    b.set(node.out, out, dims)


def _dropout(b: GraphBuilder, node, base: str) -> None:
    """The identity at inference: the output is the input's value."""
    name = b.value(node.inputs[0])
    b.names[node.out] = name


def _activation_node(b: GraphBuilder, node, base: str) -> None:
    tape = b.trace.tape
    hyper = [tape.hyper[node.aux[k]] for k in range(len(SPECS[Opcode(node.opcode)].hyper))]
    x = node.inputs[0]
    dims = b.dims(x) if not b.is_fixed(b.value(x)) else (tape.slots[x].cols,)
    b.set(node.out, activation(b, Opcode(node.opcode), b.shaped(x, dims), hyper, base), dims)


def activation(b: GraphBuilder, op: Opcode, x: str, hyper: list[float], base: str) -> str:
    """The ONNX nodes of one activation (formulas as nnjit/ops/opcodes.py's references)."""
    if op == Opcode.RELU:
        return b.node("Relu", [x], base)
    if op == Opcode.TANH:
        return b.node("Tanh", [x], base)
    if op == Opcode.SIGMOID:
        return b.node("Sigmoid", [x], base)
    if op == Opcode.GELU:  # 0.5 x (1 + erf(x / sqrt 2))
        scaled = b.node("Mul", [x, b.constant(1.0 / math.sqrt(2.0))], base + ".scaled")
        if b.double:  # (no float64 Erf kernel in onnxruntime)
            low = b.node("Cast", [scaled], base + ".f32", to=b.onnx.TensorProto.FLOAT)
            erf = b.node("Cast", [b.node("Erf", [low], base + ".erf32")], base + ".erf",
                         to=b.onnx.TensorProto.DOUBLE)
        else:
            erf = b.node("Erf", [scaled], base + ".erf")
        one_plus = b.node("Add", [erf, b.constant(1.0)], base + ".one_plus")
        half_x = b.node("Mul", [x, b.constant(0.5)], base + ".half_x")
        return b.node("Mul", [half_x, one_plus], base)
    if not b.double:
        if op == Opcode.LEAKY_RELU:
            return b.node("LeakyRelu", [x], base, alpha=hyper[0])
        if op == Opcode.ELU:
            return b.node("Elu", [x], base, alpha=hyper[0])
        if op == Opcode.SELU:
            return b.node("Selu", [x], base, alpha=SELU_ALPHA, gamma=SELU_SCALE)
        if op == Opcode.SOFTPLUS:
            return b.node("Softplus", [x], base)
    # float64: elementwise forms with float64 constants.
    if op == Opcode.LEAKY_RELU:
        return _where_positive(b, x, b.node("Mul", [x, b.constant(hyper[0])], base + ".neg"),
                               base)
    if op == Opcode.ELU:
        return _elu(b, x, hyper[0], base)
    if op == Opcode.SELU:
        return b.node("Mul", [_elu(b, x, SELU_ALPHA, base + ".elu"), b.constant(SELU_SCALE)],
                      base)
    if op == Opcode.SOFTPLUS:  # max(x, 0) + log(1 + exp(-|x|)), overflow-free
        tail = b.node("Exp", [b.node("Neg", [b.node("Abs", [x], base + ".abs")], base + ".nabs")],
                      base + ".exp")
        log = b.node("Log", [b.node("Add", [tail, b.constant(1.0)], base + ".one_plus")],
                     base + ".log")
        return b.node("Add", [b.node("Relu", [x], base + ".relu"), log], base)
    raise AssertionError(f"unhandled activation {op.name}")


def _where_positive(b: GraphBuilder, x: str, negative: str, base: str) -> str:
    positive = b.node("Greater", [x, b.constant(0.0)], base + ".positive")
    return b.node("Where", [positive, x, negative], base)


def _elu(b: GraphBuilder, x: str, alpha: float, base: str) -> str:
    """x if x > 0 else alpha (exp(x) - 1), with exp of min(x, 0) so it never overflows."""
    clipped = b.node("Min", [x, b.constant(0.0)], base + ".min")
    expm1 = b.node("Sub", [b.node("Exp", [clipped], base + ".exp"), b.constant(1.0)],
                   base + ".expm1")
    return _where_positive(b, x, b.node("Mul", [expm1, b.constant(alpha)], base + ".neg"), base)


def _finish(onnx, b: GraphBuilder, model: Module, inp: ExportInput):
    helper, trace = onnx.helper, b.trace
    if not trace.output.spec.batch:
        raise ValueError(f"save_onnx: {type(model).__name__}.forward returns a tensor that does "
                         "not depend on the input batch")
    out = b.flat(trace.output.slot)
    produced = {o for n in b.nodes for o in n.output}
    if out in produced:  # name the last op's output "output" directly
        for n in b.nodes:
            n.output[:] = [OUTPUT_NAME if o == out else o for o in n.output]
            n.input[:] = [OUTPUT_NAME if i == out else i for i in n.input]
    else:  # the output is the input itself (or a parameter): copy it
        b.nodes.append(helper.make_node("Identity", [out], [OUTPUT_NAME], name=OUTPUT_NAME))
    elem = b.elem
    if inp.graph:
        inputs = [helper.make_tensor_value_info(GRAPH_X, elem, [NODES_DIM, *inp.spec.dims]),
                  helper.make_tensor_value_info(GRAPH_EDGE_INDEX, onnx.TensorProto.INT64,
                                                [2, EDGES_DIM])]
        rows = NODES_DIM
    else:
        tensors = trace.input if isinstance(trace.input, tuple) else (trace.input,)
        inputs = [helper.make_tensor_value_info(
            name, onnx.TensorProto.INT64 if tensor.is_integer else elem, [BATCH_DIM, *spec.dims])
            for name, tensor, spec in zip(input_names(model, len(tensors)), tensors, inp.specs)]
        rows = BATCH_DIM
    graph = helper.make_graph(
        b.nodes, type(model).__name__, inputs,
        [helper.make_tensor_value_info(OUTPUT_NAME, elem, [rows, trace.output.cols])],
        initializer=b.initializers)
    from nnjit._version import __version__

    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", b.opset)],
                              producer_name="nnjit", producer_version=__version__,
                              doc_string=f"nnjit {type(model).__name__}")
    proto.ir_version = ONNX_IR_VERSION
    return proto


_HANDLERS = {Opcode.DENSE: _dense, Opcode.ADD: _binary, Opcode.MUL: _binary,
             Opcode.DROPOUT: _dropout,
             **{op: _activation_node for op in (
                 Opcode.RELU, Opcode.LEAKY_RELU, Opcode.ELU, Opcode.SELU, Opcode.TANH,
                 Opcode.SIGMOID, Opcode.SOFTPLUS, Opcode.GELU)}}


provide("save_onnx", save_onnx)  # Module.save_onnx
