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
* **A large activation in place after a dense layer.** A ReLU, tanh or sigmoid (whose backward
  reads its output only) that is a dense layer's one reader, on a batch of at least
  :data:`IN_PLACE_MIN_BYTES`, runs in place: the dense layer writes the activation's output slot
  and the activation overwrites it, forward; backward, its gradient turns the output's gradient
  into the dense output's in the same slot (scikit-learn's MLP keeps one activation and one
  delta per layer the same way). The dense layer's backward reads only its input, weight and
  output gradient, so nothing reads the overwritten values. :func:`overwrite_in_place` then
  makes that backward write an overwrite. The dense output's slot, read by nothing any more,
  takes no arena space. Smaller activations keep their two slots: the elementwise kernels
  vectorise behind a runtime check that their input and output do not overlap, and called in
  place they run their scalar loop, up to 3x slower (docs/performance.md).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from nnjit.ops import normalization, pooling
from nnjit.tape.records import ACCUMULATE, R_FLAGS
from nnjit.tape.tape import OPCODE_OF

__all__ = ["fuse", "overwrite_in_place"]

#: Activations whose backward reads their output only (nnjit.kernels.elementwise): they may
#: overwrite their input.
_IN_PLACE = frozenset(OPCODE_OF[name] for name in ("RELU", "TANH", "SIGMOID"))
#: The smallest activation (largest batch's rows x columns x itemsize) run in place: where the
#: memory an arena saves outweighs the kernels' scalar loop (docs/performance.md, issue 23).
IN_PLACE_MIN_BYTES = 256 * 2**20


def fuse(tape, keep: set[int]) -> int:
    """Apply the rewrites to ``tape.nodes`` in place; ``keep``: slots whose values must stay
    computed (the output, target, loss and input slots). Returns the number of ops removed."""
    removed = _relu_into_batch_norm(tape, keep) + _relu_into_max_pool(tape, keep)
    _activations_in_place(tape, keep)
    return removed


def overwrite_in_place(records, nodes) -> None:
    """Make the backward of every in-place activation (its input slot is its output slot, see
    :func:`fuse`) overwrite its input gradient: the output gradient it reads is the same memory,
    already written by the output's readers, so :meth:`~nnjit.tape.tape.Tape.records` marked it
    as accumulating."""
    for i, node in enumerate(nodes):
        if (node.opcode in _IN_PLACE and node.inputs[0] == node.out
                and node.accumulate[:1] == [True]):
            node.accumulate[0] = False
            records[i, R_FLAGS] &= ~ACCUMULATE[0]


def _chains(nodes, keep: set[int], first: int, second: int):
    """``(j, k)`` for every node ``k`` of opcode ``second`` whose input 0 is the output of node
    ``j`` of opcode ``first``, read by ``k`` alone and not a slot to keep."""
    readers = Counter(slot for node in nodes for slot in node.inputs)
    producer = {node.out: j for j, node in enumerate(nodes)}
    for k, node in enumerate(nodes):
        if node.opcode != second or node.python_op is not None:
            continue
        source = node.inputs[0]
        j = producer.get(source)
        if j is not None and source not in keep and readers[source] == 1 \
                and nodes[j].opcode == first:
            yield j, k


def _relu_into_batch_norm(tape, keep: set[int]) -> int:
    removed = set()
    for j, k in _chains(tape.nodes, keep, OPCODE_OF["BATCH_NORM"], OPCODE_OF["RELU"]):
        norm, relu = tape.nodes[j], tape.nodes[k]
        norm.out = relu.out  # the batch norm writes the ReLU's output
        tape.hyper[norm.aux[0] + normalization.BN_RELU] = 1.0
        removed.add(k)
    return _drop(tape, removed)


def _relu_into_max_pool(tape, keep: set[int]) -> int:
    removed = set()
    for j, k in _chains(tape.nodes, keep, OPCODE_OF["RELU"], OPCODE_OF["MAXPOOL2D"]):
        relu, pool = tape.nodes[j], tape.nodes[k]
        pool.inputs[0] = relu.inputs[0]  # the pool reads the ReLU's input
        pool.needs_grad[0] = relu.needs_grad[0]
        tape.hyper[pool.aux[0] + pooling.G_RELU] = 1.0
        removed.add(j)
    return _drop(tape, removed)


def _activations_in_place(tape, keep: set[int]) -> None:
    dense, itemsize = OPCODE_OF["DENSE"], tape.dtype.itemsize
    for opcode in _IN_PLACE:
        for j, k in _chains(tape.nodes, keep, dense, opcode):
            layer, activation = tape.nodes[j], tape.nodes[k]
            unread = layer.out
            if tape.slots[unread].size * itemsize < IN_PLACE_MIN_BYTES:
                continue
            layer.out = activation.inputs[0] = activation.out
            # the dense output's slot is read and written by nothing now: no arena space
            tape.slots[unread] = dataclasses.replace(tape.slots[unread], rows=0, batch=False,
                                                     requires_grad=False)


def _drop(tape, removed: set[int]) -> int:
    """Remove the nodes at ``removed`` from the tape; their number."""
    if removed:
        tape.nodes[:] = [node for k, node in enumerate(tape.nodes) if k not in removed]
    return len(removed)
