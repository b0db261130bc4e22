"""ONNX forms of the recurrent family's ops (:mod:`nnjit.ops.recurrent`): each layer direction
becomes one ONNX ``RNN``, ``GRU`` or ``LSTM`` node (``direction`` forward or reverse).

nnjit records a direction as RNN_INPUT (``x W_ih^T + b_ih`` for every step) then RNN_SCAN; the
ONNX node takes ``x`` and ``W_ih`` itself, so RNN_INPUT writes nothing and the scan's handler
reads its producer's inputs. The weights are written in ONNX's gate order (LSTM ``i, o, f, c``
from PyTorch's ``i, f, g, o``; GRU ``z, r, h`` from ``r, z, n``, with
``linear_before_reset=1``, PyTorch's ``n = tanh(W_in x + b_in + r (W_hn h + b_hn))``) as
``W (1, G, I)``, ``R (1, G, H)``, ``B (1, 2G)``. The batch is first in nnjit and second in
ONNX's default layout: ``Transpose`` around the node. Lengths become ``sequence_lens`` (int32):
ONNX's semantics are PyTorch's packed sequences (outputs past a length 0, ``Y_h`` the state at
the last valid step). An initial state (RNN_STATE: a block of ``h_0``, ``c_0`` side by side)
becomes ``initial_h`` / ``initial_c``; RNN_STEP_CAT is a ``Concat`` per step. An LSTM with
``proj_size`` is refused, naming the layer: ONNX's LSTM has no projection; so is a
``stateful=True`` layer (an ONNX graph carries no state from one run to the next).

onnxruntime (1.32) runs these nodes in float32 only ("does not support double yet"): a float64
model's file is valid ONNX with float64 weights, for runtimes that have the kernels.

The scan's final states are slots no record names as its output: :func:`extra_slots` tells the
exporter which slots a scan reads and writes besides its record's.
"""

from __future__ import annotations

import numpy as np

from nnjit.ops import recurrent as rec
from nnjit.ops.opcodes import Opcode

#: PyTorch's gate blocks in ONNX's order, per kind
_GATE_ORDER = {"lstm": (0, 3, 1, 2), "gru": (1, 0, 2), "rnn_tanh": (0,), "rnn_relu": (0,)}
_KIND_NAMES = {code: name for name, code in rec.KINDS.items()}


def _block(tape, node) -> list[float]:
    start = node.aux[0]
    return tape.hyper[start:start + rec.SC_CARRY_COL + 1]


def extra_slots(tape, node) -> tuple[list[int], list[int]]:
    """``(slots read, slots written)`` by ``node`` besides its record's inputs and output."""
    if node.opcode != Opcode.RNN_SCAN:
        return [], []
    blk = [int(v) for v in _block(tape, node)]
    reads = [s for s in (blk[rec.SC_STATE], blk[rec.SC_LENGTHS], blk[rec.SC_PROJ]) if s >= 0]
    writes = [s for s in (blk[rec.SC_H_N], blk[rec.SC_C_N]) if s >= 0]
    return reads, writes


def _refuse(b, node, why: str) -> None:
    raise NotImplementedError(f"save_onnx: layer {b.trace.layer(node.owner)} records a "
                              f"recurrent scan {why}: it has no ONNX RNN/GRU/LSTM form")


def rnn_input(b, node, base: str) -> None:
    """Nothing: the scan's ONNX node takes the input and W_ih itself."""


def _reordered(b, slot, kind: str, hidden: int, shape) -> np.ndarray:
    """A parameter's values with its gate blocks in ONNX's order, as ``shape``."""
    order = list(_GATE_ORDER[kind])
    data = np.asarray(b.param_data[b.params[slot]], dtype=b.dtype)
    return data.reshape(len(order), hidden, -1)[order].reshape(shape)


def rnn_scan(b, node, base: str) -> None:
    tape = b.trace.tape
    producer = next((n for n in tape.nodes if n.out == node.inputs[0]), None)
    if producer is None or producer.opcode != Opcode.RNN_INPUT:
        _refuse(b, node, "whose input projection is not an RNN_INPUT op")
    blk = [int(v) for v in _block(tape, node)]
    if blk[rec.SC_PROJ] >= 0:
        _refuse(b, node, "with a projection (LSTM proj_size > 0: ONNX's LSTM has no weight_hr)")
    if blk[rec.SC_CARRY_H] >= 0:
        _refuse(b, node, "that is stateful=True (its state carries across batches: an ONNX "
                         "graph keeps none)")
    kind, steps, hidden = _KIND_NAMES[blk[rec.SC_KIND]], blk[rec.SC_STEPS], blk[rec.SC_HIDDEN]
    x_slot, w_ih, b_ih = producer.inputs[0], producer.inputs[1], producer.inputs[2]
    features = tape.slots[w_ih].cols
    g = tape.slots[node.inputs[1]].rows
    for slot in (w_ih, node.inputs[1]):
        if slot not in b.params:
            _refuse(b, node, "whose weights are not parameters")
    x = b.node("Transpose", [b.shaped(x_slot, (steps, features))], base + ".time_major",
               perm=[1, 0, 2])
    w = b.array(_reordered(b, w_ih, kind, hidden, (1, g, features)), base + ".W")
    r = b.array(_reordered(b, node.inputs[1], kind, hidden, (1, g, hidden)), base + ".R")
    biases = [_reordered(b, s, kind, hidden, (1, g)) if s >= 0 and s in b.params
              else np.zeros((1, g), b.dtype) for s in (b_ih, node.inputs[2])]
    inputs = [x, w, r, b.array(np.concatenate(biases, axis=1), base + ".B")]
    lengths = blk[rec.SC_LENGTHS]
    if lengths >= 0:
        flat = b.node("Reshape", [b.value(lengths), b.ints([-1])], base + ".lengths")
        inputs.append(b.node("Cast", [flat], base + ".sequence_lens",
                             to=b.onnx.TensorProto.INT32))
    else:
        inputs.append("")
    state = blk[rec.SC_STATE]
    if state >= 0:
        s = b.flat(state)
        for k in range(2 if kind == "lstm" else 1):
            part = b.node("Slice", [s, b.ints([k * hidden]), b.ints([(k + 1) * hidden]),
                                    b.ints([1])], base + (".h0", ".c0")[k])
            inputs.append(b.node("Unsqueeze", [part, b.ints([0])], base + (".h0", ".c0")[k]))
    attrs = {"hidden_size": hidden, "direction": "reverse" if blk[rec.SC_REVERSE] else "forward"}
    if kind.startswith("rnn"):
        attrs["activations"] = ["Relu" if kind == "rnn_relu" else "Tanh"]
    if kind == "gru":
        attrs["linear_before_reset"] = 1
    op = {"lstm": "LSTM", "gru": "GRU"}.get(kind, "RNN")
    outs = [b.unique(base + suffix) for suffix in (".Y", ".Y_h", ".Y_c")[:3 if op == "LSTM"
                                                                         else 2]]
    while inputs and inputs[-1] == "":
        inputs.pop()
    b.nodes.append(b.helper.make_node(op, inputs, outs, name=outs[0], **attrs))
    y = b.node("Transpose", [outs[0]], base + ".batch_major", perm=[2, 0, 1, 3])
    b.set(node.out, b.node("Reshape", [y, b.ints([0, steps, hidden])], base + ".output"),
          (steps, hidden))
    for slot, out in zip((blk[rec.SC_H_N], blk[rec.SC_C_N]), outs[1:]):
        if slot >= 0:
            b.set(slot, b.node("Squeeze", [out, b.ints([0])], out + ".rows"), (hidden,))


def rnn_state(b, node, base: str) -> None:
    col, hidden = node.aux[0], node.aux[1]
    parts = []
    for k, slot in enumerate(node.inputs[:2]):
        if slot >= 0:
            parts.append(b.node("Slice", [b.flat(slot), b.ints([col]), b.ints([col + hidden]),
                                          b.ints([1])], base + (".h0", ".c0")[k]))
        else:  # an absent c_0: zeros of h_0's block
            parts.append(b.node("Mul", [parts[0], b.constant(0.0)], base + ".zeros"))
    b.set(node.out, b.node("Concat", parts, base, axis=1), (2 * hidden,))


def rnn_step_cat(b, node, base: str) -> None:
    steps = node.aux[0]
    slots = b.trace.tape.slots
    parts = [b.shaped(s, (steps, slots[s].cols // steps)) for s in node.inputs[:2]]
    width = slots[node.out].cols // steps
    b.set(node.out, b.node("Concat", parts, base, axis=2), (steps, width))


RECURRENT_HANDLERS = {Opcode.RNN_INPUT: rnn_input, Opcode.RNN_SCAN: rnn_scan,
                      Opcode.RNN_STATE: rnn_state, Opcode.RNN_STEP_CAT: rnn_step_cat}
