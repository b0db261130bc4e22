"""The op registry's view by opcode: the ``Opcode`` enum and ``SPECS``, built from the built-in
op families (``nnjit/ops/``: ``dense``, ``elementwise``, ``activations``, ``dropout``, ``losses``,
``python_op``, ``graph``, ``conv``, ``pooling``, ``normalization``, ``embedding``, ``joining``,
``recurrent``, ``sparse``, ``conv_lanes``, ``conv_winograd``).

Each op lives in one place: its family module holds its :class:`~nnjit.ops.OpSpec` (name,
signature, reference, recorder, gradient inputs, aux meanings), its kernels (or imports them
from ``nnjit/kernels/``) and its branch in the family's two dispatchers. Adding a built-in op is
those three places in one or two files; this enum and the tests that iterate ``SPECS`` pick it up
(``tests/ops/test_registry.py`` checks every registered op has its spec, recorder, reference and
branches). A record whose opcode no family of the build handles stops the run with
``UnknownOpcodeError``.

Record layout and gradient flags: :mod:`nnjit.tape.records` (re-exported here).
"""

from __future__ import annotations

from enum import IntEnum

from nnjit.graph.graph_data import (
    EDGE_WEIGHTS_GCN,
    EDGE_WEIGHTS_MEAN,
    GRAPH_FEATURES,
    GRAPH_LOOPS,
    GRAPH_RAW,
)
from nnjit.ops import activations, dense, dropout, elementwise, graph, losses, python_op
from nnjit.ops import conv, conv_lanes, embedding, joining, normalization, pooling, recurrent
from nnjit.ops import conv_winograd, sparse
from nnjit.ops.spec import OpSpec
from nnjit.tape import tape as _tape
from nnjit.tape.records import (
    ACCUMULATE,
    NEEDS_GRAD,
    R_AUX0,
    R_AUX1,
    R_AUX2,
    R_FLAGS,
    R_IN0,
    R_IN1,
    R_IN2,
    R_OPCODE,
    R_OUT,
    RECORD_WIDTH,
)

__all__ = [
    "ACCUMULATE", "ACTIVATIONS", "BUILTIN_FAMILIES", "CLASSIFICATION_LOSSES",
    "EDGE_WEIGHTS_GCN", "EDGE_WEIGHTS_MEAN", "GRAPH_FEATURES", "GRAPH_FIRST", "GRAPH_LAST",
    "GRAPH_LOOPS", "GRAPH_OPCODES", "GRAPH_RAW", "LOSS_OPCODES", "NEEDS_GRAD", "Opcode", "OpSpec",
    "RECORD_WIDTH", "R_AUX0", "R_AUX1", "R_AUX2", "R_FLAGS", "R_IN0", "R_IN1", "R_IN2",
    "R_OPCODE", "R_OUT", "SPECS",
]

BUILTIN_FAMILIES = tuple(m.FAMILY for m in (dense, elementwise, activations, dropout, losses,
                                            python_op, graph, conv, pooling, normalization,
                                            embedding, joining, recurrent, sparse, conv_lanes,
                                            conv_winograd))

Opcode = IntEnum("Opcode", [(spec.name, op) for family in BUILTIN_FAMILIES
                            for op, spec in zip(family.block, family.specs)],
                 module=__name__)
Opcode.__doc__ = "Every built-in op, numbered in its family's block (see nnjit/ops/)."

# The tape names recorded built-in ops by their enum member (Node.opcode is an Opcode).
for _op in Opcode:
    _tape.OPS[int(_op)] = _tape.OPS[int(_op)]._replace(code=_op)

SPECS: dict[Opcode, OpSpec] = {Opcode(op): spec for family in BUILTIN_FAMILIES
                               for op, spec in zip(family.block, family.specs)}

ACTIVATIONS = tuple(Opcode(op) for op in activations.FAMILY.block)
LOSS_OPCODES = frozenset(Opcode(op) for op in losses.FAMILY.block)
CLASSIFICATION_LOSSES = frozenset({Opcode.SOFTMAX_CE, Opcode.BCE_WITH_LOGITS})
GRAPH_OPCODES = frozenset(Opcode(op) for op in graph.FAMILY.block)
GRAPH_FIRST = Opcode(graph.FAMILY.block.start)
GRAPH_LAST = Opcode(graph.FAMILY.block.stop - 1)
