"""``Parameter``: a trainable array owned by a module."""

from __future__ import annotations

import numpy as np

from nnjit.dtypes import DEFAULT_DTYPE


class Parameter:
    """A trainable array.

    Before compilation ``data`` is the module's own array; once a trainer lays the model out,
    ``data`` becomes a view into the arena (training updates it in place) and ``grad`` a view into
    the gradient arena. Assigning to ``param.data[...]`` writes through to the arena.
    """

    __slots__ = ("data", "grad")
    requires_grad = True  # (a Buffer says False: the tape lays it out without a gradient)

    def __init__(self, data, *, copy: bool = True):
        """``data``: the initial values (a copy is kept; a non-float array becomes
        float32). ``copy=False`` keeps a float array itself (a caller that made it for the
        parameter: no second buffer of a large matrix)."""
        kind = np.asarray(data).dtype
        self.data = np.array(data, dtype=DEFAULT_DTYPE if kind.kind != "f" else kind,
                             copy=True if copy else None)
        self.grad = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def size(self) -> int:
        return self.data.size

    def __repr__(self) -> str:
        return f"Parameter(shape={self.data.shape}, dtype={self.data.dtype})"
