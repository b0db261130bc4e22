"""The op record's columns and gradient flags, shared by the tape, the op families and the
interpreter (a leaf module: it imports nothing, so every layer may read it).

Records are int32 rows ``[opcode, in0, in1, in2, out, aux0, aux1, aux2, grad_flags]``. ``in*``
and ``out`` are slot indices (-1 = unused); ``aux*`` index the float64 hyperparameter table or
carry small integers, as each op's :class:`nnjit.ops.OpSpec` documents; ``grad_flags`` says which
inputs need a gradient and whether the backward overwrites or accumulates it (see
:mod:`nnjit.tape.tape`).
"""

R_OPCODE, R_IN0, R_IN1, R_IN2, R_OUT, R_AUX0, R_AUX1, R_AUX2, R_FLAGS = range(9)
RECORD_WIDTH = 9

# grad_flags bits: input k needs a gradient / input k's gradient is accumulated (not the first
# writer).
NEEDS_GRAD = (1, 2, 4)
ACCUMULATE = (8, 16, 32)
