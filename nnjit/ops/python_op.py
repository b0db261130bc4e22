"""PYTHON_OP: the escape hatch for :class:`nnjit.nn.Op` (ops written in Python over NumPy views).

The replay never dispatches it: at a Python op the compiled loop returns to Python
(``YIELD_FORWARD`` / ``YIELD_BACKWARD``), which runs ``op.forward()`` / ``op.backward()`` and calls
the loop again. Its dispatchers therefore handle nothing; it is recorded by
:meth:`nnjit.tape.tape.Tape.python_op`.
"""

from nnjit.ops.context import dispatcher
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec

FIRST_OPCODE = 60

SPECS = (
    OpSpec("PYTHON_OP", 0, "->(R,C)", aux={"aux0": "index of the op in the tape's python_ops"},
           reference_note="tests/nn/test_python_op.py compares Python ops with the compiled "
                          "equivalent"),
)


@dispatcher
def forward(op, i, ctx):
    return False  # (the replay yields to Python before dispatching a Python op)


@dispatcher
def backward(op, i, ctx):
    return False


FAMILY = register(OpFamily("python", SPECS, forward, backward, core=True,
                           first_opcode=FIRST_OPCODE))
