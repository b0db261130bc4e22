"""``Op``: custom operations written in Python over NumPy views of the arena.

The inspiring engine's API::

    class MulOp(nn.Op):
        def __init__(self, tape, a, b):
            super().__init__()
            self.a, self.b = a, b
            self.out = tape.alloc_tensor(a.rows, a.cols, True)

        def forward(self):
            self.out.data[:] = self.a.data * self.b.data

        def backward(self):
            self.a.grad[:] += self.out.grad * self.b.data
            self.b.grad[:] += self.out.grad * self.a.data

    # inside Module.forward(self, tape, x):  y = MulOp(tape, h1, h2).out

The op records itself on the tape when its ``__init__`` returns: its inputs are the
:class:`Tensor` attributes other than ``out`` (or ``self.inputs`` if set). ``backward`` must
*accumulate* into input gradients; nnjit zeroes them first where the op is their first writer.
A model with Python ops trains by calling the compiled loop segment by segment, returning to
Python at each Python op: always correct, slower (see the README for the measured cost).
"""

from __future__ import annotations

import functools

from nnjit.tape.tape import Tape, Tensor, current_tape


class Op:
    """Base class of Python ops; subclass and define ``forward()`` and ``backward()``."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        user_init = cls.__dict__.get("__init__")
        if user_init is None:
            return

        @functools.wraps(user_init)
        def init(self, *args, **kw):
            depth = getattr(self, "_op_init_depth", 0)
            object.__setattr__(self, "_op_init_depth", depth + 1)
            try:
                user_init(self, *args, **kw)
            finally:
                object.__setattr__(self, "_op_init_depth", depth)
            if depth == 0:
                tape = next((a for a in args if isinstance(a, Tape)), None) or current_tape()
                self._record(tape)

        cls.__init__ = init

    def __init__(self, *args, **kwargs):
        pass

    def _record(self, tape: Tape | None) -> None:
        name = type(self).__name__
        out = getattr(self, "out", None)
        if not isinstance(out, Tensor):
            raise TypeError(
                f"{name}.__init__ must set self.out = tape.alloc_tensor(rows, cols, requires_grad)"
            )
        if tape is None:
            tape = out.tape
        inputs = getattr(self, "inputs", None)
        if inputs is None:
            inputs = [v for k, v in vars(self).items() if isinstance(v, Tensor) and k != "out"]
        tape.python_op(self, list(inputs), out)

    def forward(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def backward(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement backward()")
