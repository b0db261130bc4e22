"""Tests for nnjit.kernels.rng: known answers, determinism, ranges, uniformity, no allocation."""

import itertools
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nnjit.kernels import rng
from nnjit.kernels._jit import jit
from tests.helpers import count_allocations

needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="inspects compiled code")

_M64 = (1 << 64) - 1


class _XoshiroReference:
    """Pure-Python xoshiro256** transcribed from prng.di.unimi.it; ``s`` holds the four words."""

    def __init__(self, words):
        self.s = [int(w) for w in words]

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & _M64

    def next(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & _M64, 7) * 9) & _M64
        t = (s[1] << 17) & _M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result


@jit(cache=False)
def _doubles(state, out):
    for i in range(out.shape[0]):
        out[i] = rng.next_double(state)


@jit(cache=False)
def _belows(state, n, out):
    for i in range(out.shape[0]):
        out[i] = rng.next_below(state, n)


@jit(cache=False)
def _count_shuffles_of_3(state, reps, counts):
    perm = np.empty(3, np.int64)  # test helper: allocation here is fine
    for _ in range(reps):
        perm[0], perm[1], perm[2] = 0, 1, 2
        rng.shuffle(perm, state)
        counts[perm[0] * 9 + perm[1] * 3 + perm[2]] += 1


# ---------------------------------------------------------------- seeding and known answers


def test_seed_state_known_answer():
    # splitmix64 test vectors: seed 0 and seed 1234567 (first outputs published with splitmix64.c)
    assert rng.seed_state(0).view(np.uint64)[:2].tolist() == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
    ]
    assert rng.seed_state(1234567).view(np.uint64)[:3].tolist() == [
        6457827717110365317,
        3203168211198807973,
        9817491932198370423,
    ]


@given(seed=st.integers(-(2**70), 2**70))
def test_seed_state_layout_and_determinism(seed):
    state = rng.seed_state(seed)
    assert state.dtype == np.int64 and state.shape == (rng.STATE_WORDS,)
    assert state.flags.c_contiguous and state.any()
    np.testing.assert_array_equal(state, rng.seed_state(seed))
    np.testing.assert_array_equal(state, rng.seed_state(seed % 2**64))
    assert not np.array_equal(state, rng.seed_state(seed + 1))


@pytest.mark.parametrize("bad", [1.5, "3", None, True])
def test_seed_state_rejects_non_integers(bad):
    with pytest.raises(TypeError, match="integer seed"):
        rng.seed_state(bad)


def test_seed_state_accepts_numpy_integers():
    np.testing.assert_array_equal(rng.seed_state(np.int32(7)), rng.seed_state(7))


@pytest.mark.parametrize("seed", [0, 1, 2**63 + 5])
def test_next_u64_matches_reference_and_advances_state_in_place(seed):
    state = rng.seed_state(seed)
    ref = _XoshiroReference(state.view(np.uint64))
    for _ in range(200):
        assert int(rng.next_u64(state)) == ref.next()
    # the int64 array holds the generator's uint64 words bit for bit
    assert state.view(np.uint64).tolist() == ref.s


def test_same_seed_same_stream_different_seed_different_stream():
    a, b, c = rng.seed_state(42), rng.seed_state(42), rng.seed_state(43)
    xa = [int(rng.next_u64(a)) for _ in range(50)]
    xb = [int(rng.next_u64(b)) for _ in range(50)]
    xc = [int(rng.next_u64(c)) for _ in range(50)]
    assert xa == xb
    assert xa != xc and len(set(xa)) == 50


# ---------------------------------------------------------------- next_double


def test_next_double_range_and_moments():
    out = np.empty(200_000)
    _doubles(rng.seed_state(3), out)
    assert out.min() >= 0.0 and out.max() < 1.0
    assert abs(out.mean() - 0.5) < 0.005  # std of the mean is 0.00065
    assert abs(out.var() - 1 / 12) < 0.002
    assert len(np.unique(out)) > 199_000  # 53 random bits, not 32


def test_next_double_is_the_top_53_bits():
    a, b = rng.seed_state(9), rng.seed_state(9)
    for _ in range(20):
        u = int(rng.next_u64(a))
        assert rng.next_double(b) == (u >> 11) * 2.0**-53


# ---------------------------------------------------------------- next_below


@pytest.mark.parametrize("n", [1, 2, 3, 7, 1000, 2**31 + 11, 2**32 - 1, 2**32, 2**40 + 3, 2**62])
def test_next_below_range(n):
    out = np.empty(20_000, np.int64)
    _belows(rng.seed_state(n), n, out)
    assert out.min() >= 0 and out.max() < n
    if n == 1:
        assert not out.any()
    elif n >= 1000:
        # mean of a discrete uniform on [0, n): (n-1)/2, std of the mean ~ n / sqrt(12 * 20000)
        assert abs(out.mean() / (n - 1) - 0.5) < 0.01


@pytest.mark.parametrize("n", [2, 6, 10, 37])
def test_next_below_chi_square(n):
    draws = 50_000
    out = np.empty(draws, np.int64)
    _belows(rng.seed_state(100 + n), n, out)
    counts = np.bincount(out, minlength=n)
    expected = draws / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # loose bound: mean n-1, std sqrt(2(n-1)); 5 std + 10 is far in the tail (seeded: no flakes)
    assert chi2 < (n - 1) + 5 * np.sqrt(2 * (n - 1)) + 10


def test_next_below_large_n_uses_all_bits():
    # a generator that only used 32 bits would leave the low part of the result constant
    out = np.empty(5_000, np.int64)
    _belows(rng.seed_state(5), 2**40 + 3, out)
    assert len(np.unique(out & 0xFFFF)) > 4_000


# ---------------------------------------------------------------- shuffle


@given(n=st.integers(0, 300), seed=st.integers(0, 2**64 - 1))
def test_shuffle_is_a_deterministic_permutation(n, seed):
    a = np.arange(n, dtype=np.int64)
    b = a.copy()
    rng.shuffle(a, rng.seed_state(seed))
    rng.shuffle(b, rng.seed_state(seed))
    np.testing.assert_array_equal(np.sort(a), np.arange(n))
    np.testing.assert_array_equal(a, b)


def test_shuffle_different_seeds_give_different_permutations():
    perms = set()
    for seed in range(20):
        p = np.arange(50, dtype=np.int64)
        rng.shuffle(p, rng.seed_state(seed))
        perms.add(tuple(p))
    assert len(perms) == 20


def test_shuffle_advances_state():
    state = rng.seed_state(1)
    p = np.arange(50, dtype=np.int64)
    q = p.copy()
    rng.shuffle(p, state)
    rng.shuffle(q, state)
    assert not np.array_equal(p, q)


def test_shuffle_all_orders_equally_likely():
    # an off-by-one in Fisher-Yates (e.g. j in [0, i)) makes some of the 6 orders impossible
    reps = 60_000
    counts = np.zeros(27, np.int64)
    _count_shuffles_of_3(rng.seed_state(11), reps, counts)
    orders = [a * 9 + b * 3 + c for a, b, c in itertools.permutations(range(3))]
    observed = counts[orders]
    assert observed.sum() == reps
    expected = reps / 6
    chi2 = ((observed - expected) ** 2 / expected).sum()
    assert chi2 < 40  # 5 degrees of freedom


# ---------------------------------------------------------------- compilation


@needs_jit
def test_signatures_are_int64_state():
    state = rng.seed_state(0)
    rng.next_u64(state)
    rng.next_double(state)
    rng.next_below(state, 5)
    rng.shuffle(np.arange(4), state)
    assert str(rng.next_u64.nopython_signatures[0].return_type) == "uint64"
    assert str(rng.next_double.nopython_signatures[0].return_type) == "float64"
    assert str(rng.next_below.nopython_signatures[0].return_type) == "int64"


@jit(cache=False)
def _rng_steps(state, perm, k):
    acc = 0.0
    for _ in range(k):
        acc += np.float64(rng.next_u64(state) >> np.uint64(63))
        acc += rng.next_double(state)
        acc += rng.next_below(state, 17)
        acc += rng.next_below(state, 2**40 + 1)
        rng.shuffle(perm, state)
    return acc


@needs_jit
def test_no_nrt_allocations():
    """Steady-state allocation count is zero (recipe documented in test_elementwise.py)."""
    state, perm = rng.seed_state(0), np.arange(100, dtype=np.int64)
    _rng_steps(state, perm, 1)  # compile outside the measured region
    counts = count_allocations(lambda k: _rng_steps(state, perm, k), repeats=(1, 500))
    # the only allocations are the per-call MemInfos for the 2 array arguments unboxed from Python
    assert counts[0] == counts[1]
    assert counts[0] <= 2


@needs_jit
def test_kernels_are_cached_on_disk():
    """A fresh interpreter loads every rng kernel from numba's cache instead of compiling it."""
    state = rng.seed_state(0)
    rng.next_u64(state), rng.next_double(state), rng.next_below(state, 3)
    rng.shuffle(np.arange(3), state)  # make sure this process compiled (and saved) them
    script = textwrap.dedent(
        """
        import numpy as np
        from nnjit.kernels import rng
        s = rng.seed_state(0)
        rng.next_u64(s), rng.next_double(s), rng.next_below(s, 3), rng.shuffle(np.arange(3), s)
        for f in (rng.next_u64, rng.next_double, rng.next_below, rng.shuffle):
            print(f.__name__, sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    for line in out.split("\n")[:-1]:
        name, hits, misses = line.split()
        assert (int(hits), int(misses)) == (1, 0), line
