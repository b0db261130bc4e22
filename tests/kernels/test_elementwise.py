"""Tests for nnjit.kernels.elementwise: references, finite differences, torch, dtypes, allocations.

Measuring NRT allocations with numba 0.68 (used by ``test_no_nrt_allocations*`` below):

- ``numba.core.runtime.rtsys.get_allocation_stats()`` returns ``(alloc, free, mi_alloc, mi_free)``
  counters, but raises ``RuntimeError: NRT stats are disabled`` unless stats are switched on,
  either with ``NUMBA_NRT_STATS=1`` in the environment before numba is imported (read into
  ``numba.config.NRT_STATS``; see the subprocess test), or at any time in-process with
  ``numba.core.runtime._nrt_python.memsys_enable_stats()`` (and ``memsys_disable_stats()``).
- Calling a kernel *from Python* is never allocation free: unboxing each NumPy argument creates
  one NRT MemInfo (alloc and mi_alloc +1 per array argument, freed on return). So measure a
  compiled driver that calls the kernels ``k`` times: the counters must move by the same amount
  for ``k = 1`` and ``k = 500`` (zero allocations per iteration), and by at most the number of
  array arguments of the driver.
"""

import math
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Callable

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import special

from nnjit.kernels import elementwise as E
from nnjit.kernels import rng
from nnjit.kernels._jit import jit
from tests.helpers import count_allocations

needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="inspects compiled code")

A, S = E.SELU_ALPHA, E.SELU_SCALE


@dataclass(frozen=True)
class Act:
    """One activation: kernels behind a uniform call, NumPy/SciPy references, torch twin."""

    name: str
    forward: Callable  # (x, y, **hp)
    backward: Callable  # (x, y, dy, dx, accumulate, **hp)
    ref: Callable  # float64 reference of y(x)
    dref: Callable  # float64 reference of dy/dx
    torch: Callable  # (F, t, **hp)
    hp: dict = field(default_factory=dict)
    kink: bool = False  # not differentiable at 0: keep finite differences away from it
    torch_atol: float = 1e-12

    def __str__(self):
        return self.name + "".join(f"-{k}={v}" for k, v in self.hp.items())


def _elu(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


ACTS = [
    Act(
        "relu",
        lambda x, y: E.relu_forward(x, y),
        lambda x, y, dy, dx, acc: E.relu_backward(y, dy, dx, acc),
        lambda x: np.maximum(x, 0),
        lambda x: (x > 0).astype(float),
        lambda F, t: F.relu(t),
        kink=True,
    ),
    *[
        Act(
            "leaky_relu",
            lambda x, y, slope: E.leaky_relu_forward(x, y, slope),
            lambda x, y, dy, dx, acc, slope: E.leaky_relu_backward(x, dy, dx, acc, slope),
            lambda x, slope: np.where(x > 0, x, slope * x),
            lambda x, slope: np.where(x > 0, 1.0, slope),
            lambda F, t, slope: F.leaky_relu(t, negative_slope=slope),
            hp={"slope": slope},
            kink=True,
        )
        for slope in (0.01, 0.2)
    ],
    *[
        Act(
            "elu",
            lambda x, y, alpha: E.elu_forward(x, y, alpha),
            lambda x, y, dy, dx, acc, alpha: E.elu_backward(x, y, dy, dx, acc, alpha),
            _elu,
            lambda x, alpha: np.where(x > 0, 1.0, alpha * np.exp(np.minimum(x, 0))),
            lambda F, t, alpha: F.elu(t, alpha=alpha),
            hp={"alpha": alpha},
            kink=True,
        )
        for alpha in (1.0, 0.3)
    ],
    Act(
        "selu",
        lambda x, y: E.selu_forward(x, y),
        lambda x, y, dy, dx, acc: E.selu_backward(x, y, dy, dx, acc),
        lambda x: S * _elu(x, A),
        lambda x: S * np.where(x > 0, 1.0, A * np.exp(np.minimum(x, 0))),
        lambda F, t: F.selu(t),
        kink=True,
    ),
    Act(
        "tanh",
        lambda x, y: E.tanh_forward(x, y),
        lambda x, y, dy, dx, acc: E.tanh_backward(y, dy, dx, acc),
        np.tanh,
        lambda x: 1 / np.cosh(np.clip(x, -300, 300)) ** 2,
        lambda F, t: F.tanh(t),
    ),
    Act(
        "sigmoid",
        lambda x, y: E.sigmoid_forward(x, y),
        lambda x, y, dy, dx, acc: E.sigmoid_backward(y, dy, dx, acc),
        special.expit,
        lambda x: special.expit(x) * special.expit(-x),
        lambda F, t: F.sigmoid(t),
    ),
    Act(
        "softplus",
        lambda x, y: E.softplus_forward(x, y),
        lambda x, y, dy, dx, acc: E.softplus_backward(x, dy, dx, acc),
        lambda x: np.logaddexp(0.0, x),
        special.expit,
        lambda F, t: F.softplus(t),
        torch_atol=1e-8,  # torch returns x (gradient 1) above its threshold 20: off by exp(-20)
    ),
    Act(
        "gelu",
        lambda x, y: E.gelu_forward(x, y),
        lambda x, y, dy, dx, acc: E.gelu_backward(x, dy, dx, acc),
        lambda x: x * special.ndtr(x),
        lambda x: special.ndtr(x) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi),
        lambda F, t: F.gelu(t),
    ),
]
ACT_IDS = [str(a) for a in ACTS]

# values where naive formulas overflow, cancel or lose relative accuracy
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 20.0, -20.0, 40.0, -40.0, 88.0, -88.0, 100.0, -100.0, 1e4, -1e4]
_SPECIAL64 = _SPECIAL + [700.0, -700.0, 750.0, -750.0, 1e300, -1e300]


def _arrays(dtype, max_abs=None):
    width = np.dtype(dtype).itemsize * 8
    limit = max_abs if max_abs is not None else float(np.finfo(dtype).max)
    special_values = [v for v in (_SPECIAL64 if width == 64 else _SPECIAL) if abs(v) <= limit]
    elements = st.one_of(
        st.floats(-min(limit, 60.0), min(limit, 60.0), width=width),
        st.floats(-limit, limit, width=width),
        st.sampled_from(special_values),
    )
    return hnp.arrays(dtype, st.integers(1, 40), elements=elements)


def _run_forward(act, x):
    y = np.full_like(x, np.nan)
    act.forward(x, y, **act.hp)
    return y


def _run_backward(act, x, dy, dx0, accumulate):
    y = _run_forward(act, x)
    dx = dx0.copy()
    act.backward(x, y, dy, dx, accumulate, **act.hp)
    return dx


# ---------------------------------------------------------------- forward vs references


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
@given(x=_arrays(np.float64))
def test_forward_float64_matches_reference(act, x):
    y = _run_forward(act, x)
    assert y.dtype == np.float64
    with np.errstate(over="ignore", invalid="ignore"):
        expected = act.ref(x, **act.hp)
    np.testing.assert_allclose(y, expected, rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
@given(x=_arrays(np.float32))
def test_forward_float32_matches_reference(act, x):
    y = _run_forward(act, x)
    assert y.dtype == np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        expected = act.ref(x.astype(np.float64), **act.hp)
    # compare with the float64 result rounded to float32 (it may overflow to inf, e.g. gelu(3e38))
    with np.errstate(over="ignore"):
        expected32 = expected.astype(np.float32)
    np.testing.assert_allclose(y, expected32, rtol=2e-5, atol=1e-10)


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
def test_nan_propagates(act):
    x = np.array([np.nan, 1.0, -1.0])
    assert np.isnan(_run_forward(act, x)[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_softplus_stable_for_large_magnitudes(dtype):
    big = np.finfo(dtype).max
    x = np.array([-big, -1e4, -100.0, 100.0, 1e4, big], dtype)
    sig = _run_forward(next(a for a in ACTS if a.name == "sigmoid"), x)
    np.testing.assert_array_equal(sig[[0, 1, 3, 4, 5]], [0, 0, 1, 1, 1])
    assert 0 < sig[2] < 1e-43  # exp(-100) = 3.7e-44, a float32 subnormal
    sp = _run_forward(next(a for a in ACTS if a.name == "softplus"), x)
    np.testing.assert_array_equal(sp[[0, 1, 3, 4, 5]], [0, 0, 100, 1e4, big])
    assert 0 < sp[2] < 1e-43


# ---------------------------------------------------------------- backward


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
@given(x=_arrays(np.float64, max_abs=30.0), seed=st.integers(0, 2**32 - 1))
def test_backward_matches_central_differences_and_analytic(act, x, seed):
    r = np.random.default_rng(seed)
    if act.kink:
        x = np.where(np.abs(x) < 1e-3, 0.5, x)
    dy = r.standard_normal(x.shape)
    prior = r.standard_normal(x.shape)

    g = _run_backward(act, x, dy, prior, accumulate=False)
    g_acc = _run_backward(act, x, dy, prior, accumulate=True)
    np.testing.assert_allclose(g_acc, prior + g, rtol=1e-14, atol=1e-14)

    np.testing.assert_allclose(g, dy * act.dref(x, **act.hp), rtol=1e-9, atol=1e-12)

    h = 1e-6 * np.maximum(1.0, np.abs(x))
    numeric = (_run_forward(act, x + h) - _run_forward(act, x - h)) / (2 * h)
    np.testing.assert_allclose(g, dy * numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
def test_backward_float32_close_to_float64(act):
    x = np.linspace(-12, 12, 241)
    dy = np.cos(x)
    g64 = _run_backward(act, x, dy, np.zeros_like(x), False)
    x32, dy32 = x.astype(np.float32), dy.astype(np.float32)
    g32 = _run_backward(act, x32, dy32, np.zeros_like(x32), False)
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g64, rtol=1e-4, atol=1e-6)


def test_derivative_conventions_at_zero():
    # PyTorch's choices where the derivative has a kink: relu 0, leaky slope, elu alpha
    expected = {
        "relu": lambda: 0.0,
        "leaky_relu": lambda slope: slope,
        "elu": lambda alpha: alpha,
        "selu": lambda: S * A,
        "tanh": lambda: 1.0,
        "sigmoid": lambda: 0.25,
        "softplus": lambda: 0.5,
        "gelu": lambda: 0.5,
    }
    for act in ACTS:
        g = _run_backward(act, np.zeros(1), np.ones(1), np.zeros(1), False)[0]
        assert g == pytest.approx(expected[act.name](**act.hp), rel=1e-15), str(act)


# ---------------------------------------------------------------- torch parity


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
def test_matches_torch_float64(act):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    r = np.random.default_rng(0)
    x = np.concatenate(
        [np.linspace(-30, 30, 601), r.standard_normal(200) * 5, [0.0, 100.0, -100.0, 700.0, -700.0]]
    )
    dy = r.standard_normal(x.shape)
    t = torch.tensor(x, requires_grad=True)
    out = act.torch(F, t, **act.hp)
    out.backward(torch.tensor(dy))
    np.testing.assert_allclose(_run_forward(act, x), out.detach().numpy(), rtol=1e-9, atol=1e-12)
    g = _run_backward(act, x, dy, np.zeros_like(x), False)
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-9, atol=act.torch_atol)


# ---------------------------------------------------------------- add, mul, copy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("accumulate", [False, True])
def test_add_mul_copy(dtype, accumulate):
    r = np.random.default_rng(1)
    a, b, dy, prior = (r.standard_normal(57).astype(dtype) for _ in range(4))
    base = prior if accumulate else np.zeros_like(prior)
    y = np.empty_like(a)
    E.add_forward(a, b, y)
    np.testing.assert_array_equal(y, a + b)
    E.mul_forward(a, b, y)
    np.testing.assert_array_equal(y, a * b)
    for kernel, args, expected in [
        (E.add_backward, (dy,), base + dy),
        (E.mul_backward, (dy, b), base + dy * b),
        (E.copy_grad, (dy,), base + dy),
    ]:
        out = prior.copy()
        kernel(*args, out, accumulate)
        assert out.dtype == dtype
        tol = 1e-6 if dtype == np.float32 else 1e-15  # FMA under 'contract': one rounding fewer
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


def test_in_place_is_allowed():
    x = np.linspace(-3, 3, 13)
    expected = np.tanh(x)
    E.tanh_forward(x, x)
    np.testing.assert_allclose(x, expected, rtol=1e-15)


# ---------------------------------------------------------------- dropout


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_mask_and_keep_fraction(p, dtype):
    n = 100_000
    x = np.random.default_rng(2).standard_normal(n).astype(dtype)
    y, mask = np.empty_like(x), np.empty_like(x)
    E.dropout_forward(x, y, mask, p, rng.seed_state(7))
    assert y.dtype == mask.dtype == dtype
    scale = dtype(1.0 / (1.0 - p))
    assert set(np.unique(mask).tolist()) == {0.0, float(scale)}
    kept = np.count_nonzero(mask) / n
    assert abs(kept - (1 - p)) < 0.01  # std is at most 0.0016
    np.testing.assert_array_equal(y, x * mask)


def test_dropout_same_seed_same_mask_and_state_advances():
    x = np.ones(1000)
    masks = []
    for seed in (5, 5, 6):
        y, mask = np.empty_like(x), np.empty_like(x)
        E.dropout_forward(x, y, mask, 0.3, rng.seed_state(seed))
        masks.append(mask)
    np.testing.assert_array_equal(masks[0], masks[1])
    assert not np.array_equal(masks[0], masks[2])
    state = rng.seed_state(5)
    first, second = np.empty_like(x), np.empty_like(x)
    E.dropout_forward(x, np.empty_like(x), first, 0.3, state)
    E.dropout_forward(x, np.empty_like(x), second, 0.3, state)
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dropout_p_zero_is_identity_and_leaves_rng_untouched(dtype):
    x = np.linspace(-2, 2, 101).astype(dtype)
    y, mask = np.empty_like(x), np.empty_like(x)
    state = rng.seed_state(3)
    E.dropout_forward(x, y, mask, 0.0, state)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(mask, np.ones_like(x))
    np.testing.assert_array_equal(state, rng.seed_state(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("accumulate", [False, True])
def test_dropout_backward(dtype, accumulate):
    r = np.random.default_rng(4)
    x, dy, prior = (r.standard_normal(500).astype(dtype) for _ in range(3))
    y, mask = np.empty_like(x), np.empty_like(x)
    E.dropout_forward(x, y, mask, 0.4, rng.seed_state(8))
    dx = prior.copy()
    E.dropout_backward(mask, dy, dx, accumulate)
    expected = dy * mask + (prior if accumulate else 0)
    # atol: the 'contract' flag fuses dx + dy * mask into one FMA (a single rounding)
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- dtypes and compiled code

KERNELS = [
    getattr(E, name)
    for name in sorted(vars(E))
    if isinstance(getattr(E, name), numba.core.dispatcher.Dispatcher)
    and getattr(E, name).py_func.__module__ == E.__name__
]


def _call_all(dtype, accumulate=True):
    """Call every kernel once with arrays of ``dtype``; returns the output arrays."""
    x = np.linspace(-3, 3, 16).astype(dtype)
    y, dy, dx, mask = (np.zeros_like(x) for _ in range(4))
    state = rng.seed_state(0)
    for act in ACTS:
        act.forward(x, y, **act.hp)
        act.backward(x, y, dy, dx, accumulate, **act.hp)
    E.add_forward(x, x, y)
    E.add_backward(dy, dx, accumulate)
    E.mul_forward(x, x, y)
    E.mul_backward(dy, x, dx, accumulate)
    E.copy_grad(dy, dx, accumulate)
    E.dropout_forward(x, y, mask, 0.5, state)
    E.dropout_backward(mask, dy, dx, accumulate)
    return y, dx, mask


@needs_jit
def test_every_kernel_is_covered():
    names = {k.__name__ for k in KERNELS}
    assert len(names) == 23
    for name in names:
        op = name.rsplit("_", 1)[0]
        if name != "copy_grad":
            assert {op + "_forward", op + "_backward"} <= names, name


@needs_jit
def test_float32_in_float32_out_and_float32_signatures():
    for out in _call_all(np.float32):
        assert out.dtype == np.float32
    for kernel in KERNELS:
        sigs = [s for s in kernel.nopython_signatures if "float32" in str(s.args)]
        assert sigs, kernel.__name__
        for sig in sigs:
            arrays = [a for a in sig.args if isinstance(a, numba.types.Array)]
            floats = {str(a.dtype) for a in arrays if isinstance(a.dtype, numba.types.Float)}
            assert floats == {"float32"}, (kernel.__name__, sig)
            assert all(a.layout == "C" and a.ndim == 1 for a in arrays)


def _llvm_ir(kernel, sig):
    # IR inspection is disabled for code loaded from the cache: recompile without it
    fresh = jit(kernel.py_func, cache=False)
    fresh.compile(sig.args)
    return fresh.inspect_llvm(sig.args)


@jit(cache=False)
def _promoting_kernel(x, y):
    for i in range(x.shape[0]):
        y[i] = math.tanh(x[i] * 1.1)  # the float64 literal drags the loop to float64


@needs_jit
def test_no_float64_promotion_in_float32_code():
    """No ``fpext`` (float -> double) survives optimisation in any float32 specialisation."""
    x = np.ones(4, np.float32)
    _promoting_kernel(x, np.empty_like(x))
    assert "fpext" in _llvm_ir(_promoting_kernel, _promoting_kernel.nopython_signatures[0])
    _call_all(np.float32)
    for kernel in KERNELS:
        sig = next(s for s in kernel.nopython_signatures if "float32" in str(s.args))
        assert "fpext" not in _llvm_ir(kernel, sig), kernel.__name__


# ---------------------------------------------------------------- NRT allocations


@jit(cache=False)
def _train_like_steps(x, y, dy, dx, mask, state, k):
    for _ in range(k):
        for accumulate in (False, True):
            E.relu_forward(x, y)
            E.relu_backward(y, dy, dx, accumulate)
            E.leaky_relu_forward(x, y, 0.01)
            E.leaky_relu_backward(x, dy, dx, accumulate, 0.01)
            E.elu_forward(x, y, 1.0)
            E.elu_backward(x, y, dy, dx, accumulate, 1.0)
            E.selu_forward(x, y)
            E.selu_backward(x, y, dy, dx, accumulate)
            E.tanh_forward(x, y)
            E.tanh_backward(y, dy, dx, accumulate)
            E.sigmoid_forward(x, y)
            E.sigmoid_backward(y, dy, dx, accumulate)
            E.softplus_forward(x, y)
            E.softplus_backward(x, dy, dx, accumulate)
            E.gelu_forward(x, y)
            E.gelu_backward(x, dy, dx, accumulate)
            E.add_forward(x, y, y)
            E.add_backward(dy, dx, accumulate)
            E.mul_forward(x, y, y)
            E.mul_backward(dy, x, dx, accumulate)
            E.copy_grad(dy, dx, accumulate)
            E.dropout_forward(x, y, mask, 0.5, state)
            E.dropout_forward(x, y, mask, 0.0, state)
            E.dropout_backward(mask, dy, dx, accumulate)


@needs_jit
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_no_nrt_allocations(dtype):
    x = np.linspace(-3, 3, 64).astype(dtype)
    y, dy, dx, mask = (np.zeros_like(x) for _ in range(4))
    state = rng.seed_state(0)
    args = (x, y, dy, dx, mask, state)
    _train_like_steps(*args, 1)  # compile outside the measured region
    counts = count_allocations(lambda k: _train_like_steps(*args, k), repeats=(1, 500))
    assert counts[0] == counts[1], "allocations grow with the number of iterations"
    assert counts[0] <= len(args), "more allocations than unboxed array arguments"


@needs_jit
def test_no_nrt_allocations_env_var_recipe():
    """The public recipe: NUMBA_NRT_STATS=1 before numba is imported, in a fresh interpreter."""
    script = textwrap.dedent(
        """
        import os
        assert os.environ["NUMBA_NRT_STATS"] == "1"
        import numpy as np
        from numba.core.runtime import rtsys
        from nnjit.kernels import elementwise as E

        x = np.linspace(-3, 3, 64).astype(np.float32)
        y, dy, dx = np.zeros_like(x), np.ones_like(x), np.zeros_like(x)
        E.gelu_forward(x, y)
        E.gelu_backward(x, dy, dx, True)  # compile / load from cache first
        before = rtsys.get_allocation_stats()
        for _ in range(100):
            E.gelu_forward(x, y)  # 2 array arguments
            E.gelu_backward(x, dy, dx, True)  # 3 array arguments
        after = rtsys.get_allocation_stats()
        print(after.alloc - before.alloc, after.free - before.free)
        """
    )
    env = {**os.environ, "NUMBA_NRT_STATS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    # exactly one MemInfo per array argument per call from Python, all freed: nothing else
    assert [int(v) for v in out] == [100 * (2 + 3), 100 * (2 + 3)]
