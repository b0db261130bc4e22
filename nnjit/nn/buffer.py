"""``Buffer``: a module's state array that is not trained (PyTorch's buffers: batch norm's running
statistics).

A trainer lays buffers out in the parameter block after the parameters, so best-weight snapshots,
``.nne`` files and checkpoints cover them, but they take no gradient and no optimizer step:
only the ops that own them write them (in compiled code). Like a :class:`Parameter`, ``data`` is
the module's own array until a trainer lays the model out, then a view into the arena.
"""

from __future__ import annotations

import numpy as np

from nnjit.dtypes import DEFAULT_DTYPE


class Buffer:
    """A non-trainable float array registered with :meth:`nnjit.nn.Module.register_buffer`.

    Reads as an array (``np.asarray(bn.running_mean)``); ``data`` is the array itself (writing
    ``buffer.data[...]`` writes through to the arena once the model is laid out).
    """

    __slots__ = ("data", "persistent")
    requires_grad = False  # (the tape lays it out without a gradient)

    def __init__(self, data, persistent: bool = True):
        data = np.asarray(data)
        self.data = np.array(data, dtype=data.dtype if data.dtype.kind == "f" else DEFAULT_DTYPE,
                             copy=True)
        self.persistent = bool(persistent)

    @property
    def grad(self) -> None:
        """Always None: a buffer has no gradient."""
        return None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.data, dtype=dtype) if copy is not True else np.array(
            self.data, dtype=dtype, copy=True)

    def __repr__(self) -> str:
        return f"Buffer(shape={self.data.shape}, dtype={self.data.dtype})"
