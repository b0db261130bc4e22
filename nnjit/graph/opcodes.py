"""THE op registry: one opcode enum grouped by family, and one :class:`OpSpec` per op.

Adding an op touches four places, three of which are in files you are already editing: a member
here with its spec, the ``<op>_forward``/``<op>_backward`` kernels in ``nnjit/kernels/``, and one
forward and one backward branch in ``nnjit/graph/interpreter.py`` (or in the family's dispatcher:
activations in ``nnjit/kernels/families.py``, graph ops in ``nnjit/graph/message_passing.py``).
The registry-driven tests in ``tests/graph/test_opcodes.py`` run every spec through the
interpreter, and a record no branch handles stops the run with ``UnknownOpcodeError``.

Records are int32 rows ``[opcode, in0, in1, in2, out, aux0, aux1, aux2, grad_flags]``. ``in*`` and
``out`` are slot indices (-1 = unused); ``aux*`` index the float64 hyperparameter table or carry
small integers, as documented per op below; ``grad_flags`` says which inputs need a gradient and
whether the backward overwrites or accumulates it (see :mod:`nnjit.graph.tape`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Callable

import numpy as np

# Record columns.
R_OPCODE, R_IN0, R_IN1, R_IN2, R_OUT, R_AUX0, R_AUX1, R_AUX2, R_FLAGS = range(9)
RECORD_WIDTH = 9

# grad_flags bits: input k needs a gradient / input k's gradient is accumulated (not the first writer).
NEEDS_GRAD = (1, 2, 4)
ACCUMULATE = (8, 16, 32)


class Opcode(IntEnum):
    """Every operation the interpreter can replay."""

    # Linear algebra. DENSE: in0 x (B, I), in1 W (O, I), in2 bias (1, O) or -1 -> out (B, O).
    DENSE = 1

    # Elementwise binary, same shapes: in0, in1 -> out.
    ADD = 10
    MUL = 11

    # Activations, elementwise unary: in0 -> out. aux0 = hyper index of the parameter, if any.
    # The interpreter sends the whole block 20-29 to the activation dispatcher
    # (kernels/families.py), whose last branch stops the run on an opcode it does not handle.
    RELU = 20
    LEAKY_RELU = 21  # aux0: negative slope
    ELU = 22  # aux0: alpha
    SELU = 23
    TANH = 24
    SIGMOID = 25
    SOFTPLUS = 26
    GELU = 27

    # Stochastic. DROPOUT: in0 x, in1 mask slot (same shape, no gradient), aux0: p.
    DROPOUT = 30

    # Losses, fused with the gradient seed: in0 prediction (B, K), in1 targets (B, T) -> out (1, 1).
    SOFTMAX_CE = 40  # aux1: 1 when targets hold class indices (T == 1), 0 for one-hot (T == K)
    MSE = 41
    BCE_WITH_LOGITS = 42

    # Escape hatch: a Python op (nnjit.Op). aux0: its index; the compiled loop yields to Python.
    PYTHON_OP = 60

    # Graph ops (message passing over a CSR grouped by target; see nnjit/graph/graph_ops.py).
    # aux0 of each: which CSR of the program's graph data (GRAPH_RAW, GRAPH_LOOPS, ...). Edge
    # slots hold one row per edge of that CSR, in its order. Only the interpreter's graph build
    # compiles these, so models without graph ops never pay their compile time.
    SPMM = 70  # in0 x (N, H*C), in1 edge weights (E, H) or -1, in2 bias (1, H*C) or -1 -> (N, H*C)
    EDGE_WEIGHTS = 71  # no input -> (E, 1) weights; aux1: EDGE_WEIGHTS_GCN or EDGE_WEIGHTS_MEAN
    SCATTER_MAX = 72  # in0 x (N, F), in1 argmax slot (N, F), no gradient -> (N, F)
    SEGMENT_SOFTMAX = 73  # in0 scores (E, H) -> (E, H), softmax over each target's edges
    HEAD_DOT = 74  # in0 x (N, H*C), in1 att (1, H*C) -> (N, H)
    EDGE_GATHER_ADD = 75  # in0 a_src (N, H), in1 a_dst (N, H) -> (E, H): a_src[src] + a_dst[dst]
    CSR_DENSE = 76  # in0 nonzeros (nnz, 1), in1 W (O, F), in2 bias or -1 -> (N, O); aux1: W.T slot
    HEAD_MEAN = 77  # in0 x (N, H*C), in1 bias (1, C) or -1 -> (N, C), mean over the H heads


GRAPH_FIRST = Opcode.SPMM
GRAPH_LAST = Opcode.HEAD_MEAN
GRAPH_OPCODES = frozenset(op for op in Opcode if GRAPH_FIRST <= op <= GRAPH_LAST)

# aux0 of graph ops: which CSR they read (the graph data's table, see nnjit/graph/graph_data.py).
GRAPH_RAW, GRAPH_LOOPS, GRAPH_FEATURES = 0, 1, 2
EDGE_WEIGHTS_GCN, EDGE_WEIGHTS_MEAN = 0, 1

LOSS_OPCODES = frozenset({Opcode.SOFTMAX_CE, Opcode.MSE, Opcode.BCE_WITH_LOGITS})
CLASSIFICATION_LOSSES = frozenset({Opcode.SOFTMAX_CE, Opcode.BCE_WITH_LOGITS})


@dataclass(frozen=True)
class OpSpec:
    """What the tests and the tape need to know about one opcode.

    Attributes:
        opcode: the enum member.
        arity: number of array inputs (excluding auxiliary slots such as the dropout mask).
        hyper: names of the float hyperparameters stored in the hyper table (aux0, aux1, ...).
        ref: NumPy reference ``ref(*inputs, **hyper) -> output`` in float64 (for losses:
            ``ref(prediction, target) -> mean loss``).
        differentiable: whether backward produces input gradients.
        sample_hyper: hyperparameter values used by the generic tests.
        input_domain: (low, high) range of generated input values (e.g. away from kinks).
    """

    opcode: Opcode
    arity: int
    ref: Callable[..., np.ndarray] | None
    hyper: tuple[str, ...] = ()
    differentiable: bool = True
    sample_hyper: dict[str, float] = field(default_factory=dict)
    input_domain: tuple[float, float] = (-3.0, 3.0)


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _softmax_ce(logits, labels):
    """Mean cross-entropy of integer ``labels`` (N,) under softmax(``logits``) (N, C)."""
    z = logits - logits.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -np.mean(log_p[np.arange(len(labels)), labels.astype(int)])


def _gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805

SPECS: dict[Opcode, OpSpec] = {
    s.opcode: s
    for s in [
        OpSpec(Opcode.DENSE, 3, lambda x, w, b: x @ w.T + b),
        OpSpec(Opcode.ADD, 2, lambda a, b: a + b),
        OpSpec(Opcode.MUL, 2, lambda a, b: a * b),
        OpSpec(Opcode.RELU, 1, lambda x: np.maximum(x, 0.0)),
        OpSpec(
            Opcode.LEAKY_RELU,
            1,
            lambda x, negative_slope: np.where(x > 0, x, negative_slope * x),
            hyper=("negative_slope",),
            sample_hyper={"negative_slope": 0.1},
        ),
        OpSpec(
            Opcode.ELU,
            1,
            lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x)),
            hyper=("alpha",),
            sample_hyper={"alpha": 0.7},
        ),
        OpSpec(
            Opcode.SELU,
            1,
            lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)),
        ),
        OpSpec(Opcode.TANH, 1, np.tanh),
        OpSpec(Opcode.SIGMOID, 1, _sigmoid),
        OpSpec(Opcode.SOFTPLUS, 1, lambda x: np.logaddexp(0.0, x)),
        OpSpec(Opcode.GELU, 1, _gelu),
        OpSpec(
            Opcode.DROPOUT,
            1,
            None,  # random: checked by its own tests (mask statistics, backward == dy * mask)
            hyper=("p",),
            sample_hyper={"p": 0.0},
        ),
        OpSpec(Opcode.SOFTMAX_CE, 2, lambda z, t: _softmax_ce(z, t)),
        OpSpec(Opcode.MSE, 2, lambda p, t: np.mean((p - t) ** 2)),
        OpSpec(
            Opcode.BCE_WITH_LOGITS,
            2,
            lambda z, t: np.mean(np.logaddexp(0.0, z) - z * t),
        ),
        OpSpec(Opcode.PYTHON_OP, 0, None, differentiable=True),
        # Graph ops need a graph: tests/graph/test_graph_ops.py checks them through the
        # interpreter against NumPy references and finite differences.
        OpSpec(Opcode.SPMM, 3, None),
        OpSpec(Opcode.EDGE_WEIGHTS, 0, None, differentiable=False),
        OpSpec(Opcode.SCATTER_MAX, 1, None),
        OpSpec(Opcode.SEGMENT_SOFTMAX, 1, None),
        OpSpec(Opcode.HEAD_DOT, 2, None),
        OpSpec(Opcode.EDGE_GATHER_ADD, 2, None),
        OpSpec(Opcode.CSR_DENSE, 3, None),
        OpSpec(Opcode.HEAD_MEAN, 2, None),
    ]
}

ACTIVATIONS = (
    Opcode.RELU,
    Opcode.LEAKY_RELU,
    Opcode.ELU,
    Opcode.SELU,
    Opcode.TANH,
    Opcode.SIGMOID,
    Opcode.SOFTPLUS,
    Opcode.GELU,
)
