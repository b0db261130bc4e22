"""Helpers shared by several test files."""

from __future__ import annotations

import numpy as np


def count_allocations(run, repeats=(1, 50)) -> list[int]:
    """NRT allocations made by ``run(k)`` for each k in ``repeats`` (call ``run`` once first).

    Enables numba's allocation statistics in-process (they are off unless NUMBA_NRT_STATS=1).
    Every call from Python boxes its array arguments, which costs a fixed number of allocations;
    steady-state code allocates nothing iff the counts are equal for every k.
    """
    from numba.core.runtime import _nrt_python, rtsys

    was_enabled = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        counts = []
        for k in repeats:
            before = rtsys.get_allocation_stats().alloc
            run(k)
            counts.append(rtsys.get_allocation_stats().alloc - before)
        return counts
    finally:
        if not was_enabled:
            _nrt_python.memsys_disable_stats()


def finite_difference_gradients(trainer, model, X, Y, eps: float = 1e-6) -> dict[str, np.ndarray]:
    """Central finite differences of ``trainer.evaluate(X, Y)['loss']`` for every parameter."""
    grads = {}
    for name, p in model.named_parameters():
        g = np.zeros(p.shape)
        flat = p.data.reshape(-1)
        for k in range(flat.size):
            old = flat[k]
            flat[k] = old + eps
            up = trainer.evaluate(X, Y)["loss"]
            flat[k] = old - eps
            down = trainer.evaluate(X, Y)["loss"]
            flat[k] = old
            g.reshape(-1)[k] = (up - down) / (2 * eps)
        grads[name] = g
    return grads
