"""The model's own random number generator: xoshiro256** seeded with splitmix64.

Every random draw in nnjit (initialisation, shuffling, dropout, neighbour sampling) goes through
these kernels with a state array the model owns, never through numba's global per-thread
``np.random``, so runs are reproducible and trainers in different threads stay independent.

**State layout.** ``STATE_WORDS = 4`` words of an ``int64`` array of shape ``(4,)``, C-contiguous.
Word ``k`` holds the bits of xoshiro256**'s ``uint64`` word ``s[k]`` (reinterpreted, not
converted: ``state.view(np.uint64)`` shows the generator's words). The all-zero state is invalid
(xoshiro maps it to itself and outputs only zeros); :func:`seed_state` never produces it and
:func:`state_problem` reports it (checkpoints are checked with it when loaded). Kernels advance the
state in place, and every rejection loop is bounded (:data:`MAX_DRAWS`), so even an invalid state
can never make a kernel spin.

Reference: Blackman and Vigna, "Scrambled linear pseudorandom number generators" (2021),
https://prng.di.unimi.it/xoshiro256starstar.c and https://prng.di.unimi.it/splitmix64.c.
"""

import operator

import numpy as np

from nnjit.kernels._jit import jit

#: Number of int64 words in a generator state (xoshiro256**: four 64-bit words).
STATE_WORDS = 4

#: The most draws a rejection loop makes. Each draw of a valid generator is rejected with
#: probability below 1/2, so needing more has probability below 2**-64: the bound never changes a
#: result in practice, and an invalid (all-zero) state cannot spin forever.
MAX_DRAWS = 64

_MASK64 = (1 << 64) - 1
_SPLITMIX_GAMMA = 0x9E3779B97F4A7C15
_SPLITMIX_M1 = 0xBF58476D1CE4E5B9
_SPLITMIX_M2 = 0x94D049BB133111EB

# NOTE: numba types `uint64 <op> int` (a literal or an int64) as int64, after which `>>` becomes
# an arithmetic shift. Every constant that meets a uint64 is therefore a np.uint64 global.
_U5 = np.uint64(5)
_U7 = np.uint64(7)
_U9 = np.uint64(9)
_U11 = np.uint64(11)
_U17 = np.uint64(17)
_U32 = np.uint64(32)
_U45 = np.uint64(45)
_U64 = np.uint64(64)
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO32 = np.uint64(1 << 32)
_TWO_M53 = 1.0 / 9007199254740992.0  # 2**-53


def _splitmix64(x: int) -> tuple[int, int]:
    """One splitmix64 step on Python ints: returns ``(new_x, output)``."""
    x = (x + _SPLITMIX_GAMMA) & _MASK64
    z = x
    z = ((z ^ (z >> 30)) * _SPLITMIX_M1) & _MASK64
    z = ((z ^ (z >> 27)) * _SPLITMIX_M2) & _MASK64
    return x, z ^ (z >> 31)


def seed_state(seed) -> np.ndarray:
    """Return a fresh generator state derived from an integer ``seed`` (same seed, same state).

    Args:
        seed: any Python or NumPy integer; it is reduced modulo 2**64 (so -1 and 2**64-1 agree).

    Returns:
        ``int64`` array of shape ``(STATE_WORDS,)`` holding four consecutive splitmix64 outputs, as
        the xoshiro authors recommend. The splitmix64 output function is a bijection and its four
        inputs differ, so at most one word is zero and the state is never all zero.

    Raises:
        TypeError: if ``seed`` is not an integer (floats and bools are rejected).
    """
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError(f"seed_state: expected an integer seed, got {seed!r}")
    try:
        x = operator.index(seed) & _MASK64
    except TypeError:
        raise TypeError(
            f"seed_state: expected an integer seed, got {type(seed).__name__} {seed!r}"
        ) from None
    words = []
    for _ in range(STATE_WORDS):
        x, z = _splitmix64(x)
        words.append(z)
    return np.array(words, dtype=np.uint64).view(np.int64)


def state_problem(state) -> str | None:
    """Why ``state`` is not a valid generator state, or None when it is one.

    A valid state is an ``int64`` ndarray of shape ``(STATE_WORDS,)`` that is not all zero.
    """
    if not isinstance(state, np.ndarray):
        return f"is a {type(state).__name__}, expected an int64 array"
    if state.dtype != np.int64:
        return f"has dtype {state.dtype}, expected int64"
    if state.shape != (STATE_WORDS,):
        return f"has shape {state.shape}, expected ({STATE_WORDS},)"
    if not state.any():
        return "is all zero, which xoshiro256** never leaves (every draw would be 0)"
    return None


@jit
def _rotl(x, k):
    """Rotate the uint64 ``x`` left by the uint64 ``k`` (0 < k < 64) bits."""
    return (x << k) | (x >> (_U64 - k))


@jit
def next_u64(state):
    """Advance ``state`` in place and return the next uint64 (xoshiro256**). state: int64 (4,)."""
    s0 = np.uint64(state[0])
    s1 = np.uint64(state[1])
    s2 = np.uint64(state[2])
    s3 = np.uint64(state[3])
    result = _rotl(s1 * _U5, _U7) * _U9
    t = s1 << _U17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, _U45)
    state[0] = np.int64(s0)
    state[1] = np.int64(s1)
    state[2] = np.int64(s2)
    state[3] = np.int64(s3)
    return result


@jit
def next_double(state):
    """Return a float64 uniform on [0, 1) from the top 53 bits of one draw. state: int64 (4,)."""
    return np.float64(next_u64(state) >> _U11) * _TWO_M53


@jit
def next_below(state, n):
    """Return an int64 uniform on [0, n) for int64 ``n >= 1``, exactly unbiased. state: int64 (4,).

    n < 2**32: Lemire's multiply-shift on the top 32 bits with rejection of the biased low range
    (usually no division). Larger n: bitmask rejection (at most 2 expected draws). Either loop
    stops after :data:`MAX_DRAWS` draws (probability below 2**-64 for a valid state) with a value
    that is still in [0, n), so an invalid state gives poor numbers but never a hang.
    """
    nn = np.uint64(n)
    if nn <= _LOW32:
        m = (next_u64(state) >> _U32) * nn
        low = m & _LOW32
        if low < nn:
            threshold = (_TWO32 - nn) % nn  # 2**32 mod n: the size of the biased range
            draws = 1
            while low < threshold and draws < MAX_DRAWS:
                m = (next_u64(state) >> _U32) * nn
                low = m & _LOW32
                draws += 1
        return np.int64(m >> _U32)  # (< n: the top 32 bits times n, shifted back)
    mask = nn - np.uint64(1)
    shift = np.uint64(1)
    while shift < _U64:
        mask |= mask >> shift
        shift += shift
    r = next_u64(state) & mask
    draws = 1
    while r >= nn and draws < MAX_DRAWS:
        r = next_u64(state) & mask
        draws += 1
    return np.int64(r if r < nn else r % nn)


@jit
def shuffle(perm, state):
    """Shuffle ``perm`` in place (Fisher–Yates, every order equally likely). perm: int64 (n,)."""
    for i in range(perm.shape[0] - 1, 0, -1):
        j = next_below(state, i + 1)
        tmp = perm[i]
        perm[i] = perm[j]
        perm[j] = tmp
