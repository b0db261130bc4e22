"""ONNX export of feed-forward models, built from the traced tape (so a custom ``forward`` works).

Each recorded op on the path from the input to the output becomes ONNX nodes: ``Linear``
(DENSE) a ``Gemm`` with ``transB=1`` on the PyTorch-layout weight, ``+`` and ``*`` between
tensors ``Add``/``Mul``, dropout nothing (inference is the identity), each activation its ONNX op
with nnjit's exact formula (GELU is the erf form). Python ops (``nnjit.Op``) and graph layers
have no ONNX form and raise :class:`NotImplementedError` naming the layer.

Opset 17 with IR version 8 (onnx 1.12, onnxruntime 1.12 and later, and the other runtimes of that
generation). Every op used exists there; a newer opset would only add a native ``Gelu``
(opset 20), whose decomposition ``0.5 x (1 + erf(x / sqrt 2))`` is the same formula.

float64 models: ONNX stores op attributes as float32 and onnxruntime has no float64 kernel for
``Elu``, ``Selu``, ``Softplus`` or ``Erf``, so those activations and LeakyReLU are written out
with elementwise ops and float64 constants; GELU evaluates erf in float32 (relative error about
1e-7), the only float64 op that is not exact to float64 rounding.
"""

from __future__ import annotations

import math
import os

import numpy as np

from nnjit.export.optional import require
from nnjit.export.trace import input_width, trace_model
from nnjit.nn.module import Module
from nnjit.nn.providers import provide
from nnjit.nn.trace import Trace
from nnjit.nn.walk import walk_modules
from nnjit.ops.opcodes import GRAPH_OPCODES, SPECS, Opcode

ONNX_OPSET = 17
ONNX_IR_VERSION = 8  # the IR version of onnx 1.12, which introduced opset 17
INPUT_NAME, OUTPUT_NAME, BATCH_DIM = "input", "output", "batch"

SELU_ALPHA = 1.6732632423543772  # as nnjit's kernels and PyTorch
SELU_SCALE = 1.0507009873554805

SUPPORTED = ("Linear, ReLU, LeakyReLU, ELU, SELU, Tanh, Sigmoid, Softplus, GELU, Dropout "
             "(the identity), and + and * between tensors of the same shape")


def save_onnx(model: Module, path, input_shape=None) -> None:
    """Write ``model`` as an ONNX file: input ``"input"`` of shape ``(batch, n_features)``
    (dynamic batch), output ``"output"`` (the raw outputs, as ``Trainer.predict_outputs``).

    The dtype is the parameters' (float32, or float64 for a model compiled in float64); the input
    width comes from ``input_shape`` or the first ``Linear`` layer (see
    :func:`nnjit.export.trace.input_width`). The file is checked with
    ``onnx.checker.check_model(full_check=True)`` and written atomically.

    Raises:
        NotImplementedError: a graph layer, a Python op or another op without an ONNX form is
            on the path to the output (the message names the layer and the op).
    """
    onnx = require("onnx", "save_onnx")
    where = "save_onnx"
    _reject_graph_layers(model, where)
    dtype = _model_dtype(model, where)
    trace = trace_model(model, input_width(model, input_shape, where), dtype, where)
    proto = _build(onnx, trace, model, dtype)
    onnx.checker.check_model(proto, full_check=True)
    from nnjit.io.atomic import atomic_replace

    with atomic_replace(os.fspath(path)) as fh:
        fh.write(proto.SerializeToString())


def _reject_graph_layers(model: Module, where: str) -> None:
    from nnjit.nn.gnn.base import MessagePassing

    for path, module in walk_modules(model):
        if isinstance(module, MessagePassing):
            raise NotImplementedError(
                f"{where}: layer '{path or type(model).__name__}' ({type(module).__name__}) is a "
                f"graph layer; ONNX export supports feed-forward models only: {SUPPORTED}")


def _model_dtype(model: Module, where: str) -> np.dtype:
    dtypes = {np.dtype(p.data.dtype) for p in model.parameters()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in (np.float32, np.float64):
        found = ", ".join(sorted(str(d) for d in dtypes)) or "no parameters"
        raise ValueError(f"{where}: the parameters must all be float32 or all float64, "
                         f"found {found}")
    return next(iter(dtypes))


def _needed_nodes(trace: Trace) -> list:
    """The recorded ops that the output depends on, in recorded order."""
    producer = {node.out: node for node in trace.tape.nodes}
    needed, stack = set(), [trace.output.slot]
    while stack:
        node = producer.get(stack.pop())
        if node is not None and id(node) not in needed:
            needed.add(id(node))
            stack.extend(s for s in node.inputs if s >= 0)
    return [node for node in trace.tape.nodes if id(node) in needed]


class _GraphBuilder:
    """Collects ONNX nodes, initializers and unique value names for one export."""

    def __init__(self, onnx, trace: Trace, dtype: np.dtype):
        self.onnx, self.helper = onnx, onnx.helper
        self.trace, self.dtype = trace, dtype
        self.double = dtype == np.float64
        self.nodes, self.initializers = [], []
        self.names = {trace.input.slot: INPUT_NAME}  # slot -> ONNX value name
        self.used_names = {INPUT_NAME, OUTPUT_NAME}
        self.constants: dict[float, str] = {}
        self.params = {slot: name for name, slot in trace.tape.param_slots.items()}
        self.param_data = {}

    def unique(self, base: str) -> str:
        name, k = base, 1
        while name in self.used_names:
            k += 1
            name = f"{base}_{k}"
        self.used_names.add(name)
        return name

    def value(self, slot: int) -> str:
        """The ONNX name of a slot's value: a parameter becomes an initializer on first use."""
        if slot not in self.names and slot in self.params:
            name = self.params[slot]
            self.used_names.add(name)
            data = np.ascontiguousarray(self.param_data[name], dtype=self.dtype)
            self.initializers.append(self.onnx.numpy_helper.from_array(data, name))
            self.names[slot] = name
        return self.names[slot]

    def constant(self, value: float) -> str:
        """A scalar initializer in the model dtype (shared by every use of the same value)."""
        if value not in self.constants:
            name = self.unique(f"const_{value:.17g}".replace("-", "neg").replace(".", "_"))
            array = np.array(value, dtype=self.dtype)
            self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
            self.constants[value] = name
        return self.constants[value]

    def node(self, op: str, inputs: list[str], base: str, **attrs) -> str:
        out = self.unique(base)
        self.nodes.append(self.helper.make_node(op, inputs, [out], name=out, **attrs))
        return out


def _build(onnx, trace: Trace, model: Module, dtype: np.dtype):
    b = _GraphBuilder(onnx, trace, dtype)
    b.param_data = {name: p.data for name, p in trace.walk.tensors}
    tape = trace.tape
    for node in _needed_nodes(trace):
        op, owner = node.opcode, node.owner
        base = f"{owner}.{op.name.lower()}" if owner else op.name.lower()
        if op == Opcode.PYTHON_OP:
            raise NotImplementedError(
                f"save_onnx: layer {trace.layer(owner)} runs the Python op "
                f"{type(node.python_op).__name__}, which has no ONNX form; ONNX export supports "
                f"{SUPPORTED}")
        if op in GRAPH_OPCODES or op not in _HANDLED:
            raise NotImplementedError(
                f"save_onnx: layer {trace.layer(owner)} records the op {op.name}, which has no "
                f"ONNX export; ONNX export supports {SUPPORTED}")
        if op == Opcode.DROPOUT:  # the identity at inference: the output is the input's value
            b.names[node.out] = b.value(node.inputs[0])
            continue
        inputs = [b.value(s) for s in node.inputs if s >= 0]
        if op == Opcode.DENSE:
            out = b.node("Gemm", inputs, base, transB=1)
        elif op in (Opcode.ADD, Opcode.MUL):
            specs = [tape.slots[s] for s in node.inputs]
            if specs[0].batch != specs[1].batch:
                raise NotImplementedError(
                    f"save_onnx: layer {trace.layer(owner)} combines a batch tensor with a "
                    f"fixed-size one in {op.name}; it has no batch-independent ONNX form")
            out = b.node("Add" if op == Opcode.ADD else "Mul", inputs, base)
        else:
            hyper = [tape.hyper[node.aux[k]] for k in range(len(SPECS[op].hyper))]
            out = _activation(b, op, inputs[0], hyper, base)
        b.names[node.out] = out
    return _finish(onnx, b, model)


def _activation(b: _GraphBuilder, op: Opcode, x: str, hyper: list[float], base: str) -> str:
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


def _where_positive(b: _GraphBuilder, x: str, negative: str, base: str) -> str:
    positive = b.node("Greater", [x, b.constant(0.0)], base + ".positive")
    return b.node("Where", [positive, x, negative], base)


def _elu(b: _GraphBuilder, x: str, alpha: float, base: str) -> str:
    """x if x > 0 else alpha (exp(x) - 1), with exp of min(x, 0) so it never overflows."""
    clipped = b.node("Min", [x, b.constant(0.0)], base + ".min")
    expm1 = b.node("Sub", [b.node("Exp", [clipped], base + ".exp"), b.constant(1.0)],
                   base + ".expm1")
    return _where_positive(b, x, b.node("Mul", [expm1, b.constant(alpha)], base + ".neg"), base)


def _finish(onnx, b: _GraphBuilder, model: Module):
    helper, trace = onnx.helper, b.trace
    out = b.value(trace.output.slot)
    if not trace.output.spec.batch:
        raise ValueError(f"save_onnx: {type(model).__name__}.forward returns a tensor that does "
                         "not depend on the input batch")
    produced = {o for n in b.nodes for o in n.output}
    if out in produced:  # name the last op's output "output" directly
        for n in b.nodes:
            n.output[:] = [OUTPUT_NAME if o == out else o for o in n.output]
            n.input[:] = [OUTPUT_NAME if i == out else i for i in n.input]
    else:  # the output is the input itself (or a parameter): copy it
        b.nodes.append(helper.make_node("Identity", [out], [OUTPUT_NAME], name=OUTPUT_NAME))
    elem = helper.np_dtype_to_tensor_dtype(b.dtype)
    graph = helper.make_graph(
        b.nodes, type(model).__name__,
        [helper.make_tensor_value_info(INPUT_NAME, elem, [BATCH_DIM, trace.input.cols])],
        [helper.make_tensor_value_info(OUTPUT_NAME, elem, [BATCH_DIM, trace.output.cols])],
        initializer=b.initializers)
    from nnjit._version import __version__

    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)],
                              producer_name="nnjit", producer_version=__version__,
                              doc_string=f"nnjit {type(model).__name__}")
    proto.ir_version = ONNX_IR_VERSION
    return proto


_HANDLED = frozenset({Opcode.DENSE, Opcode.ADD, Opcode.MUL, Opcode.DROPOUT, Opcode.RELU,
                      Opcode.LEAKY_RELU, Opcode.ELU, Opcode.SELU, Opcode.TANH, Opcode.SIGMOID,
                      Opcode.SOFTPLUS, Opcode.GELU})


provide("save_onnx", save_onnx)  # Module.save_onnx
