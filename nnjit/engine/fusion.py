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
"""

from __future__ import annotations

from collections import Counter

from nnjit.ops import pooling
from nnjit.tape.tape import OPCODE_OF

__all__ = ["fuse"]


def fuse(tape, keep: set[int]) -> int:
    """Apply the rewrites to ``tape.nodes`` in place; ``keep``: slots whose values must stay
    computed (the output, target, loss and input slots). Returns the number of ops removed."""
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
    if removed:
        tape.nodes[:] = [node for k, node in enumerate(nodes) if k not in removed]
    return len(removed)
