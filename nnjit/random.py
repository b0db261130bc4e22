"""Seeding: ``set_seed`` makes initialisation, shuffling and dropout reproducible."""

from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()
_generator = np.random.default_rng()


def set_seed(seed: int) -> None:
    """Seed nnjit's generator: same seed and same code give bit-identical weights.

    It drives parameter initialisation and the seeds of the compiled loop's own RNG (shuffling,
    dropout), which every trainer owns separately, so concurrent trainers stay independent.
    """
    global _generator
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"set_seed: seed must be a non-negative int, got {seed!r}")
    with _lock:
        _generator = np.random.default_rng(int(seed))


def generator() -> np.random.Generator:
    """The generator used for parameter initialisation."""
    return _generator


def next_seed() -> int:
    """A fresh 63-bit seed drawn from the global generator (for a trainer's compiled RNG)."""
    with _lock:
        return int(_generator.integers(0, 2**63 - 1))
