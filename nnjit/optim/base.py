"""Optimizer base class: hyperparameters and the state the compiled step needs.

Optimizers only describe themselves; the update is one pure kernel in
:mod:`nnjit.kernels.optim`, applied to the flat parameter block in compiled code.
"""

from __future__ import annotations

import numpy as np

from nnjit.checks import check_real


class Optimizer:
    """Base class. Subclasses set ``kind`` (interpreter code) and ``n_buffers`` (state rows)."""

    kind: int
    n_buffers: int = 0
    #: one step per epoch over every training row (LBFGS), driven between compiled evaluations
    full_batch: bool = False

    def __init__(self, lr: float | None, learning_rate: float | None, default: float):
        if lr is not None and learning_rate is not None and lr != learning_rate:
            raise ValueError(f"{type(self).__name__}: pass lr or learning_rate, not both")
        lr = default if lr is None and learning_rate is None else (lr if lr is not None
                                                                   else learning_rate)
        _check(self, "lr" if learning_rate is None else "learning_rate", lr, low=0.0,
               low_inclusive=False)
        self.lr = float(lr)
        self.state: np.ndarray | None = None  # (n_buffers, n_params) once built
        self.iterations = 0

    @property
    def learning_rate(self) -> float:
        return self.lr

    def hyper_vector(self) -> np.ndarray:
        """float64 hyperparameters in the order the compiled step reads them."""
        raise NotImplementedError

    def state_shape(self, n_params: int, dtype) -> tuple[int, int]:
        """The state's shape for ``n_params`` trainable parameters in ``dtype``."""
        return max(self.n_buffers, 1), n_params

    def cast_state(self, state: np.ndarray, dtype) -> np.ndarray:
        """A state read from a checkpoint as this optimizer's state in ``dtype`` (a copy)."""
        return np.array(state, dtype=dtype)

    def state_problem(self, state: np.ndarray) -> str | None:
        """Why ``state`` (of the right shape, from an untrusted file) cannot be this optimizer's,
        or None; optimizers whose state holds indices or counters check them here."""
        return None

    def build(self, n_params: int, dtype) -> np.ndarray:
        """(Re)allocate the state buffers for ``n_params`` parameters; keeps them if they fit."""
        shape = self.state_shape(n_params, dtype)
        if self.state is None or self.state.shape != shape or self.state.dtype != dtype:
            self.state = np.zeros(shape, dtype=dtype)
            self.iterations = 0
        return self.state

    def get_config(self) -> dict:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _check(opt, name, value, low=None, high=None, low_inclusive=True, high_inclusive=True):
    cls = type(opt).__name__
    value = check_real(value, f"{cls}: {name}")
    ok = np.isfinite(value)
    if low is not None:
        ok = ok and (value >= low if low_inclusive else value > low)
    if high is not None:
        ok = ok and (value <= high if high_inclusive else value < high)
    if not ok:
        lo = "" if low is None else ("[" if low_inclusive else "(") + f"{low}"
        hi = "inf)" if high is None else f"{high}" + ("]" if high_inclusive else ")")
        raise ValueError(f"{cls}: invalid {name} {value!r}, expected a value in {lo}, {hi}")
    return value
