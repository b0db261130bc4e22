"""Rewrites of a traced tape that compute the same values and gradients in fewer passes.

Run once per layout, on the tape's nodes, before the program decides which backward writes
overwrite a gradient and which accumulate (:meth:`nnjit.tape.tape.Tape.records`), so the flags
follow the rewritten order.

* **A ReLU folded into the max pool after it.** ``max_pool2d(relu(x))`` equals
  ``relu(max_pool2d(x))`` (a ReLU is monotonic), and the pool then clamps a quarter of the values
  (a 2x2 pool) instead of a ReLU pass over all of them forward and backward: the pool's record
  reads ``x`` and its geometry's RELU entry is set (:func:`nnjit.kernels.pooling.relu_of_max`:
  a window whose max is not positive gives 0 and routes no gradient, as the ReLU's gradient
  would be 0 there). Done only where the pool is the ReLU's one reader and the ReLU's output is
  not one the program hands out (the model's output).
* **A ReLU folded into the batch norm before it.** Where a ReLU is a batch norm's one reader,
  the batch norm writes the ReLU's output itself (its geometry's RELU entry set,
  :func:`nnjit.kernels.normalization.batch_norm_train_forward`) and its backward counts the
  output gradient only where that output is positive: the ReLU's two passes go. Done before the
  pool rewrite, so a batch norm, ReLU and max pool keep the ReLU in the batch norm.
"""

from __future__ import annotations

from collections import Counter

from nnjit.ops import normalization, pooling
from nnjit.tape.tape import OPCODE_OF

__all__ = ["fuse"]


def fuse(tape, keep: set[int]) -> int:
    """Apply the rewrites to ``tape.nodes`` in place; ``keep``: slots whose values must stay
    computed (the output, target, loss and input slots). Returns the number of ops removed."""
    return _relu_into_batch_norm(tape, keep) + _relu_into_max_pool(tape, keep)


def _relu_into_batch_norm(tape, keep: set[int]) -> int:
    relu, batch_norm = OPCODE_OF["RELU"], OPCODE_OF["BATCH_NORM"]
    nodes = tape.nodes
    readers = Counter(slot for node in nodes for slot in node.inputs)
    producer = {node.out: k for k, node in enumerate(nodes)}
    removed = set()
    for k, node in enumerate(nodes):
        if node.opcode != relu:
            continue
        source = node.inputs[0]
        j = producer.get(source)
        if j is None or source in keep or readers[source] != 1:
            continue
        before = nodes[j]
        if before.opcode != batch_norm:
            continue
        before.out = node.out
        tape.hyper[before.aux[0] + normalization.BN_RELU] = 1.0
        removed.add(k)
    return _drop(tape, removed)


def _relu_into_max_pool(tape, keep: set[int]) -> int:
    relu, max_pool = OPCODE_OF["RELU"], OPCODE_OF["MAXPOOL2D"]
    nodes = tape.nodes
    readers = Counter(slot for node in nodes for slot in node.inputs)
    producer = {node.out: k for k, node in enumerate(nodes)}
    removed = set()
    for node in nodes:
        if node.opcode != max_pool or node.python_op is not None:
            continue
        source = node.inputs[0]
        k = producer.get(source)
        if k is None or k in removed or source in keep or readers[source] != 1:
            continue
        before = nodes[k]
        if before.opcode != relu:
            continue
        node.inputs[0] = before.inputs[0]
        node.needs_grad[0] = before.needs_grad[0]
        tape.hyper[node.aux[0] + pooling.G_RELU] = 1.0
        removed.add(k)
    return _drop(tape, removed)


def _drop(tape, removed: set[int]) -> int:
    """Remove the nodes at ``removed`` from the tape; their number."""
    if removed:
        tape.nodes[:] = [node for k, node in enumerate(tape.nodes) if k not in removed]
    return len(removed)
