"""ONNX forms of the graph family's ops (GCNConv, SAGEConv, GATConv): message passing over an
``edge_index`` input.

The exported graph takes ``x`` ``(num_nodes, F)`` and ``edge_index`` int64 ``(2, num_edges)``
(row 0 the sources, row 1 the targets, :class:`nnjit.data.graph.Graph`'s layout; nnjit graphs
carry no edge weights, so there is no ``edge_weight`` input). Everything nnjit precomputes per
graph is computed in the ONNX graph, so one file serves any graph: the edge set with one self
loop per node (``Equal``/``Compress`` drop the given loops, ``Range`` appends ``0..N-1``), the
in-degrees (a scatter adding ones), GCN's symmetric normalisation and SAGE's mean weights.
A message is ``Gather`` of the source rows; a sum over each node's incoming edges is
``ScatterElements`` along axis 0 with ``reduction="add"`` into zeros, a max (SAGE's
``aggr="max"``, the attention softmax's shift) ``reduction="max"`` into -inf (opset 18), a node
without incoming edges then getting 0 as in nnjit. Not ``ScatterND``: onnxruntime runs its
reductions on several threads without guarding repeated indices, so the sums of nodes with many
incoming edges come out wrong and different from run to run (its issues 18048 and 23396).
"""

from __future__ import annotations

import numpy as np

from nnjit.graph.graph_data import EDGE_WEIGHTS_GCN, GRAPH_LOOPS
from nnjit.ops.opcodes import Opcode

#: The ONNX inputs of a graph model: node features and the edges (2, num_edges).
GRAPH_X, GRAPH_EDGE_INDEX = "x", "edge_index"

#: Ops whose ONNX form scatters with reduction="max" (opset 18).
NEEDS_MAX_SCATTER = frozenset({Opcode.SCATTER_MAX, Opcode.SEGMENT_SOFTMAX})


def _num_nodes(b) -> str:
    """int64 (1,): the rows of x."""
    if "num_nodes" not in b.cache:
        b.cache["num_nodes"] = b.node("Shape", [GRAPH_X], "graph.num_nodes", start=0, end=1)
    return b.cache["num_nodes"]


def _edges(b, csr: int) -> tuple[str, str, str]:
    """(src, dst, dst as a column) of edge set ``csr``: the edges, or without their self loops
    and with one per node (GRAPH_LOOPS), in edge_index's order then the loops."""
    key = ("edges", csr)
    if key not in b.cache:
        zero, one = (b.array(np.array(v), f"graph.row{v}", integer=True) for v in (0, 1))
        src = b.node("Gather", [GRAPH_EDGE_INDEX, zero], "graph.src", axis=0)
        dst = b.node("Gather", [GRAPH_EDGE_INDEX, one], "graph.dst", axis=0)
        if csr == GRAPH_LOOPS:
            keep = b.node("Not", [b.node("Equal", [src, dst], "graph.is_loop")], "graph.keep")
            n = b.node("Squeeze", [_num_nodes(b), b.ints([0])], "graph.n")
            loops = b.node("Range", [zero, n, one], "graph.loops")
            src, dst = (b.node("Concat", [b.node("Compress", [v, keep], f"graph.{name}_kept",
                                                 axis=0), loops], f"graph.{name}_loops", axis=0)
                        for v, name in ((src, "src"), (dst, "dst")))
        column = b.node("Unsqueeze", [dst, b.ints([1])], "graph.dst_column")
        b.cache[key] = (src, dst, column)
    return b.cache[key]


def _filled(b, width: int, value: float, base: str) -> str:
    """(num_nodes, width) of ``value``."""
    shape = b.node("Concat", [_num_nodes(b), b.ints([width])], base + ".shape", axis=0)
    fill = b.helper.make_tensor("value", b.elem, [1], [value])
    return b.node("ConstantOfShape", [shape], base + ".init", value=fill)


def _scatter(b, csr: int, updates: str, width: int, reduction: str, base: str) -> str:
    """Per node, the sum or max of ``updates`` (E, width) over its incoming edges of ``csr``."""
    start = 0.0 if reduction == "add" else -np.inf
    shape = b.node("Shape", [updates], base + ".updates_shape")
    targets = b.node("Expand", [_edges(b, csr)[2], shape], base + ".targets")
    return b.node("ScatterElements", [_filled(b, width, start, base), targets, updates],
                  base, axis=0, reduction=reduction)


def _degree(b, csr: int) -> str:
    """(num_nodes, 1): the in-degree of every node in edge set ``csr``."""
    key = ("degree", csr)
    if key not in b.cache:
        column = _edges(b, csr)[2]
        ones = b.node("ConstantOfShape", [b.node("Shape", [column], "graph.edges_shape")],
                      "graph.ones", value=b.helper.make_tensor("value", b.elem, [1], [1.0]))
        b.cache[key] = _scatter(b, csr, ones, 1, "add", f"graph.degree{csr}")
    return b.cache[key]


def _gather(b, x: str, index: str, base: str) -> str:
    return b.node("Gather", [x, index], base, axis=0)


def spmm(b, node, base: str) -> None:
    slots = b.trace.tape.slots
    x, weights, bias = (node.inputs + [-1, -1])[:3]
    csr, width = node.aux[0], slots[node.out].cols
    src, _, _ = _edges(b, csr)
    messages = _gather(b, b.flat(x), src, base + ".messages")
    if weights >= 0:
        heads = slots[weights].cols
        w = b.flat(weights)
        if heads == 1:
            messages = b.node("Mul", [messages, w], base + ".weighted")
        else:  # per head: weight column h scales feature block h
            blocks = b.node("Reshape", [messages, b.ints([0, heads, width // heads])],
                            base + ".heads")
            scaled = b.node("Mul", [blocks, b.node("Unsqueeze", [w, b.ints([2])],
                                                   base + ".head_weights")], base + ".weighted")
            messages = b.node("Reshape", [scaled, b.ints([0, width])], base + ".weighted_flat")
    out = _scatter(b, csr, messages, width, "add", base + (".sum" if bias >= 0 else ""))
    if bias >= 0:
        out = b.node("Add", [out, b.fixed(bias, (width,))], base)
    b.set(node.out, out, (width,))


def edge_weights(b, node, base: str) -> None:
    csr, kind = node.aux[0], node.aux[1]
    src, dst, _ = _edges(b, csr)
    degree = b.node("Squeeze", [_degree(b, csr), b.ints([1])], base + ".degree")
    if kind == EDGE_WEIGHTS_GCN:  # deg(src)^-1/2 deg(dst)^-1/2, 0 for a node of degree 0
        inverse = b.node("Div", [b.constant(1.0), b.node("Sqrt", [degree], base + ".sqrt")],
                         base + ".inv_sqrt")
        scale = b.node("Where", [b.node("Greater", [degree, b.constant(0.0)], base + ".has"),
                                 inverse, b.constant(0.0)], base + ".scale")
        out = b.node("Mul", [_gather(b, scale, src, base + ".src"),
                             _gather(b, scale, dst, base + ".dst")], base + ".flat")
    else:  # 1 / in-degree of the target
        out = b.node("Div", [b.constant(1.0), _gather(b, degree, dst, base + ".dst")],
                     base + ".flat")
    b.set(node.out, b.node("Unsqueeze", [out, b.ints([1])], base), (1,))


def scatter_max(b, node, base: str) -> None:
    csr, width = node.aux[0], b.trace.tape.slots[node.out].cols
    messages = _gather(b, b.flat(node.inputs[0]), _edges(b, csr)[0], base + ".messages")
    top = _scatter(b, csr, messages, width, "max", base + ".max")
    has = b.node("Greater", [_degree(b, csr), b.constant(0.0)], base + ".has_edges")
    b.set(node.out, b.node("Where", [has, top, b.constant(0.0)], base), (width,))


def segment_softmax(b, node, base: str) -> None:
    csr, heads = node.aux[0], b.trace.tape.slots[node.out].cols
    _, dst, _ = _edges(b, csr)
    scores = b.flat(node.inputs[0])
    top = _scatter(b, csr, scores, heads, "max", base + ".max")
    exp = b.node("Exp", [b.node("Sub", [scores, _gather(b, top, dst, base + ".top")],
                                base + ".shifted")], base + ".exp")
    total = _scatter(b, csr, exp, heads, "add", base + ".sum")
    b.set(node.out, b.node("Div", [exp, _gather(b, total, dst, base + ".total")], base),
          (heads,))


def head_dot(b, node, base: str) -> None:
    slots = b.trace.tape.slots
    heads, width = slots[node.out].cols, slots[node.inputs[0]].cols
    x = b.shaped(node.inputs[0], (heads, width // heads))
    product = b.node("Mul", [x, b.fixed(node.inputs[1], (heads, width // heads))],
                     base + ".product")
    b.set(node.out, b.reduce("ReduceSum", product, [2], base, keepdims=False), (heads,))


def edge_gather_add(b, node, base: str) -> None:
    src, dst, _ = _edges(b, node.aux[0])
    a_src = _gather(b, b.flat(node.inputs[0]), src, base + ".src")
    a_dst = _gather(b, b.flat(node.inputs[1]), dst, base + ".dst")
    b.set(node.out, b.node("Add", [a_src, a_dst], base), (b.trace.tape.slots[node.out].cols,))


def head_mean(b, node, base: str) -> None:
    slots = b.trace.tape.slots
    width = slots[node.out].cols
    heads = slots[node.inputs[0]].cols // width
    bias = node.inputs[1] if len(node.inputs) > 1 else -1
    out = b.reduce("ReduceMean", b.shaped(node.inputs[0], (heads, width)), [1],
                   base + (".mean" if bias >= 0 else ""), keepdims=False)
    if bias >= 0:
        out = b.node("Add", [out, b.fixed(bias, (width,))], base)
    b.set(node.out, out, (width,))


GRAPH_HANDLERS = {Opcode.SPMM: spmm, Opcode.EDGE_WEIGHTS: edge_weights,
                  Opcode.SCATTER_MAX: scatter_max, Opcode.SEGMENT_SOFTMAX: segment_softmax,
                  Opcode.HEAD_DOT: head_dot, Opcode.EDGE_GATHER_ADD: edge_gather_add,
                  Opcode.HEAD_MEAN: head_mean}
