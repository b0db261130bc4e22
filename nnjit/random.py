"""Seeding: ``set_seed`` makes initialisation, shuffling and dropout reproducible.

:func:`set_seed` seeds ONE process-wide generator, shared by every thread: models built in
several threads at once draw their initial weights from it in whatever order the threads run, so
their weights are not reproducible. In threads, use :func:`seeded` (a generator for the current
thread only, for the duration of a ``with`` block), pass ``generator=`` to
:class:`~nnjit.nn.Linear`, and give each :class:`~nnjit.Trainer` its own ``seed=``.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from nnjit.checks import Int

_SEED = Int(min=0, says="a non-negative int")
_lock = threading.Lock()
_generator = np.random.default_rng()
_local = threading.local()  # .generator: the current thread's generator inside seeded()


def _check_seed(seed, where: str) -> int:
    return _SEED.check(f"{where}: seed", seed)


def set_seed(seed: int) -> None:
    """Seed nnjit's process-wide generator: same seed and same code give bit-identical weights.

    It drives parameter initialisation and the seeds of the compiled loop's own RNG (shuffling,
    dropout) of trainers created without ``seed=``. The generator is global to the process, not
    per thread: threads that build models at the same time share it and their weights depend on
    the order they run in. For threads, build inside ``with nnjit.seeded(seed):`` (see
    :func:`seeded`) and pass ``Trainer(seed=...)``.
    """
    global _generator
    seed = _check_seed(seed, "set_seed")
    with _lock:
        _generator = np.random.default_rng(seed)


@contextlib.contextmanager
def seeded(seed):
    """Within the block, THIS thread initialises parameters (and draws trainer seeds) from its
    own generator, seeded with ``seed`` (an int >= 0, or a ``numpy.random.Generator`` to use as
    is); other threads and the process-wide generator of :func:`set_seed` are untouched.
    Blocks nest; the previous generator is back after the block.

    Example:
        >>> with nnjit.seeded(0):  # the same weights in any thread, whatever runs beside it
        ...     model = nnjit.Sequential(nnjit.Linear(4, 8), nnjit.ReLU(), nnjit.Linear(8, 3))
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
        _check_seed(seed, "seeded"))
    previous = getattr(_local, "generator", None)
    _local.generator = rng
    try:
        yield rng
    finally:
        _local.generator = previous


def generator() -> np.random.Generator:
    """The generator used for parameter initialisation: this thread's inside :func:`seeded`,
    else the process-wide one."""
    local = getattr(_local, "generator", None)
    return local if local is not None else _generator


def next_seed() -> int:
    """A fresh 63-bit seed (for a trainer's compiled RNG) from :func:`generator`."""
    local = getattr(_local, "generator", None)
    if local is not None:
        return int(local.integers(0, 2**63 - 1))
    with _lock:
        return int(_generator.integers(0, 2**63 - 1))
