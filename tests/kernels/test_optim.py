"""Optimizer kernels: PyTorch parity, a hand-worked Adam step, L2 penalty, float32, allocations."""

import re

import numba
import numpy as np
import pytest

from nnjit.kernels._jit import jit
from nnjit.kernels.optim import adam_update, l2_penalty, rmsprop_update, sgd_update
from tests.helpers import count_allocations

N = 37  # odd, so vectorised loops run their scalar remainder too
STEPS = 5


def _problem(dtype, seed=0):
    rng = np.random.default_rng(seed)
    p0 = rng.normal(size=N).astype(dtype)
    grads = [rng.normal(size=N).astype(dtype) for _ in range(STEPS)]
    return p0, grads


def _run_torch(torch, make_opt, p0, grads):
    param = torch.tensor(p0.copy(), requires_grad=True)
    opt = make_opt([param])
    for g in grads:
        param.grad = torch.tensor(g.copy())
        opt.step()
    return param.detach().numpy()


def _tol(dtype):
    return dict(rtol=1e-12, atol=1e-13) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)


def _state(dtype, stale):
    """A state buffer: garbage (NaN) if ``stale``, since step 1 must initialise it anyway."""
    return np.full(N, np.nan if stale else 0.0, dtype)


# Checks of compiled artefacts (signatures, IR, NRT counters) mean nothing in the
# NUMBA_DISABLE_JIT=1 coverage run, where the kernels are plain Python.
needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="inspects compiled code")


# ---------------------------------------------------------------- torch parity

SGD_CASES = [
    dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0),
    dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.1),
    dict(momentum=0.9, dampening=0.0, nesterov=False, weight_decay=0.0),
    dict(momentum=0.9, dampening=0.3, nesterov=False, weight_decay=0.05),
    dict(momentum=0.9, dampening=0.0, nesterov=True, weight_decay=0.0),
    dict(momentum=0.8, dampening=0.0, nesterov=True, weight_decay=0.1),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("hp", SGD_CASES, ids=lambda hp: "-".join(f"{v}" for v in hp.values()))
def test_sgd_matches_torch(dtype, hp):
    torch = pytest.importorskip("torch")
    p0, grads = _problem(dtype)
    lr = 0.1
    want = _run_torch(torch, lambda ps: torch.optim.SGD(ps, lr=lr, **hp), p0, grads)
    p, velocity = p0.copy(), _state(dtype, stale=hp["momentum"] > 0)
    for step, g in enumerate(grads, start=1):
        sgd_update(p, g, velocity, lr, hp["momentum"], hp["dampening"], hp["nesterov"],
                   hp["weight_decay"], step)
    assert p.dtype == dtype
    np.testing.assert_allclose(p, want, **_tol(dtype))


ADAM_CASES = [
    dict(weight_decay=0.0, decoupled=False),
    dict(weight_decay=0.1, decoupled=False),
    dict(weight_decay=0.0, decoupled=True),
    dict(weight_decay=0.1, decoupled=True),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "hp", ADAM_CASES, ids=lambda hp: f"wd{hp['weight_decay']}-dec{hp['decoupled']}"
)
def test_adam_matches_torch(dtype, hp):
    torch = pytest.importorskip("torch")
    p0, grads = _problem(dtype, seed=1)
    lr, betas, eps, wd = 0.01, (0.8, 0.99), 1e-7, hp["weight_decay"]
    cls = torch.optim.AdamW if hp["decoupled"] else torch.optim.Adam
    want = _run_torch(
        torch, lambda ps: cls(ps, lr=lr, betas=betas, eps=eps, weight_decay=wd), p0, grads
    )
    p, m, v = p0.copy(), _state(dtype, True), _state(dtype, True)
    for step, g in enumerate(grads, start=1):
        adam_update(p, g, m, v, lr, betas[0], betas[1], eps, wd, hp["decoupled"], step)
    np.testing.assert_allclose(p, want, **_tol(dtype))


RMSPROP_CASES = [
    dict(alpha=0.99, weight_decay=0.0, momentum=0.0),
    dict(alpha=0.9, weight_decay=0.1, momentum=0.0),
    dict(alpha=0.99, weight_decay=0.0, momentum=0.9),
    dict(alpha=0.9, weight_decay=0.05, momentum=0.5),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("hp", RMSPROP_CASES, ids=lambda hp: "-".join(f"{v}" for v in hp.values()))
def test_rmsprop_matches_torch(dtype, hp):
    torch = pytest.importorskip("torch")
    p0, grads = _problem(dtype, seed=2)
    lr, eps = 0.01, 1e-8
    want = _run_torch(torch, lambda ps: torch.optim.RMSprop(ps, lr=lr, eps=eps, **hp), p0, grads)
    p, sq, buf = p0.copy(), _state(dtype, True), _state(dtype, True)
    for step, g in enumerate(grads, start=1):
        rmsprop_update(p, g, sq, buf, lr, hp["alpha"], eps, hp["weight_decay"], hp["momentum"],
                       step)
    np.testing.assert_allclose(p, want, **_tol(dtype))


def test_unused_buffers_are_not_touched():
    p, g = np.ones(N), np.full(N, 0.5)
    velocity = np.full(N, 3.0)
    sgd_update(p, g, velocity, 0.1, 0.0, 0.0, False, 0.0, 1)
    np.testing.assert_array_equal(velocity, 3.0)
    np.testing.assert_allclose(p, 0.95)
    # momentum == 0: the momentum buffer may even be empty.
    rmsprop_update(p, g, np.zeros(N), np.empty(0), 0.1, 0.99, 1e-8, 0.0, 0.0, 1)
    sgd_update(p, g, np.empty(0), 0.1, 0.0, 0.0, False, 0.0, 3)


# ---------------------------------------------------------------- hand-worked Adam step (no torch)


def test_adam_single_step_by_hand():
    # lr=0.1, betas=(0.9, 0.999), eps=1e-8, step 1, state zero.
    # Element 0: p=1, g=0.5
    #   m = 0.1*0.5 = 0.05           m_hat = 0.05/(1-0.9)     = 0.5
    #   v = 0.001*0.25 = 0.00025     v_hat = 0.00025/(1-0.999) = 0.25, sqrt = 0.5
    #   p = 1 - 0.1*0.5/(0.5 + 1e-8) = 1 - 0.05/0.50000001 = 0.900000002 (to 1e-9)
    # Element 1: p=-2, g=-1
    #   m = -0.1, v = 0.001          m_hat = -1, v_hat = 1
    #   p = -2 - 0.1*(-1)/(1 + 1e-8) = -2 + 0.099999999 = -1.900000001
    p = np.array([1.0, -2.0])
    g = np.array([0.5, -1.0])
    m, v = np.zeros(2), np.zeros(2)
    adam_update(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0.0, False, 1)
    np.testing.assert_allclose(m, [0.05, -0.1], rtol=1e-15)
    np.testing.assert_allclose(v, [0.00025, 0.001], rtol=1e-12)
    np.testing.assert_allclose(p, [0.900000002, -1.900000001], rtol=0, atol=1e-12)

    # Same start with weight_decay=0.5.
    # Adam (L2): g += 0.5*p -> [1.0, -2.0]; m = [0.1, -0.2]; v = [0.001, 0.004];
    #   m_hat = [1, -2], sqrt(v_hat) = [1, 2] -> p -= 0.1*[1, -1]/(1 + ~0) -> [0.9, -1.9]
    # AdamW: p *= 1 - 0.1*0.5 = 0.95 -> [0.95, -1.9], then the wd=0 update above:
    #   p = [0.95 - 0.099999998, -1.9 + 0.099999999] = [0.850000002, -1.800000001]
    p, m, v = np.array([1.0, -2.0]), np.zeros(2), np.zeros(2)
    adam_update(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0.5, False, 1)
    np.testing.assert_allclose(p, [0.9, -1.9], rtol=0, atol=1e-8)
    p, m, v = np.array([1.0, -2.0]), np.zeros(2), np.zeros(2)
    adam_update(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0.5, True, 1)
    np.testing.assert_allclose(p, [0.850000002, -1.800000001], rtol=0, atol=1e-12)


def test_first_step_ignores_stale_state():
    rng = np.random.default_rng(5)
    p0, g = rng.normal(size=N), rng.normal(size=N)
    results = []
    for fill in (0.0, np.nan, 1e30):
        p = p0.copy()
        adam_update(p, g, np.full(N, fill), np.full(N, fill), 0.1, 0.9, 0.999, 1e-8, 0.0, True, 1)
        sgd_update(p, g, np.full(N, fill), 0.1, 0.9, 0.1, True, 0.0, 1)
        rmsprop_update(p, g, np.full(N, fill), np.full(N, fill), 0.1, 0.9, 1e-8, 0.0, 0.9, 1)
        results.append(p)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


# ---------------------------------------------------------------- L2 penalty


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_l2_penalty_value_and_gradient(dtype):
    rng = np.random.default_rng(7)
    params = rng.normal(size=40).astype(dtype)
    grads = rng.normal(size=40).astype(dtype)
    spans = np.array([[3, 10], [20, 17]], np.int64)
    coef = 0.03
    inside = np.zeros(40, bool)
    inside[3:13] = inside[20:37] = True
    want_grads = grads.astype(float) + coef * params.astype(float) * inside
    want_value = 0.5 * coef * float((params.astype(float)[inside] ** 2).sum())

    before = grads.copy()
    value = l2_penalty(params, grads, spans, coef)
    assert isinstance(value, float)
    tol = _tol(dtype)
    np.testing.assert_allclose(value, want_value, rtol=tol["rtol"])
    np.testing.assert_allclose(grads, want_grads, **tol)
    np.testing.assert_array_equal(grads[~inside], before[~inside])

    assert l2_penalty(params, grads, np.zeros((0, 2), np.int64), coef) == 0.0
    assert l2_penalty(params, grads, np.array([[5, 0]], np.int64), coef) == 0.0
    np.testing.assert_array_equal(grads[~inside], before[~inside])


# ---------------------------------------------------------------- float32


def _all_updates(dtype, step, kernels=(sgd_update, adam_update, rmsprop_update)):
    sgd, adam, rmsprop = kernels
    rng = np.random.default_rng(11)
    p0, g = rng.normal(size=N).astype(dtype), rng.normal(size=N).astype(dtype)
    state = [rng.random(size=N).astype(dtype) for _ in range(2)]
    out = []
    p, a = p0.copy(), state[0].copy()
    sgd(p, g, a, 0.1, 0.9, 0.1, False, 0.01, step)
    out.append(p)
    p, a, b = p0.copy(), state[0].copy(), state[1].copy()
    adam(p, g, a, b, 0.01, 0.9, 0.999, 1e-8, 0.01, True, step)
    out.append(p)
    p, a, b = p0.copy(), state[0].copy(), state[1].copy()
    rmsprop(p, g, a, b, 0.01, 0.99, 1e-8, 0.01, 0.9, step)
    out.append(p)
    return out


def test_float32_stays_float32_and_matches_float64():
    for step in (1, 3):
        for p32, p64 in zip(_all_updates(np.float32, step), _all_updates(np.float64, step)):
            assert p32.dtype == np.float32
            np.testing.assert_allclose(p32, p64, rtol=2e-5, atol=2e-6)


@needs_jit
def test_float32_call_compiles_a_float32_signature():
    _all_updates(np.float32, 2)
    l2_penalty(np.ones(4, np.float32), np.ones(4, np.float32), np.array([[0, 4]]), 0.1)
    for kernel in (sgd_update, adam_update, rmsprop_update, l2_penalty):
        sigs = [s for s in kernel.nopython_signatures if s.args[0].dtype.name == "float32"]
        assert sigs
        for sig in sigs:
            arrays = [a for a in sig.args if hasattr(a, "dtype")]
            assert all(a.dtype.name in ("float32", "int64") for a in arrays), sig


@needs_jit
def test_float32_updates_do_no_float64_arithmetic():
    # A float literal or uncast hyperparameter inside the loop shows up as `fpext` (float32 ->
    # float64) in the IR and makes the update ~3.6x slower. Recompile without the cache: numba
    # cannot inspect the IR of code loaded from its cache (it warns and returns junk).
    fresh = tuple(jit(k.py_func, cache=False) for k in (sgd_update, adam_update, rmsprop_update))
    _all_updates(np.float32, 3, fresh)
    for kernel in fresh:
        (sig,) = kernel.signatures
        ir = kernel.inspect_llvm(sig)
        assert "fpext" not in ir, kernel.__name__
        # ...and the loop body is branch-free enough for LLVM to vectorise it.
        assert re.search(r"<\d+ x float>", ir), kernel.__name__


# ---------------------------------------------------------------- allocations

@jit(cache=False)
def _drive_optimizers(p, g, a, b, spans, n):
    total = 0.0
    for step in range(1, n + 1):
        sgd_update(p, g, a, 0.01, 0.9, 0.0, True, 0.01, step)
        sgd_update(p, g, a, 0.01, 0.0, 0.0, False, 0.0, step)
        adam_update(p, g, a, b, 0.01, 0.9, 0.999, 1e-8, 0.01, True, step)
        rmsprop_update(p, g, a, b, 0.01, 0.99, 1e-8, 0.0, 0.9, step)
        total += l2_penalty(p, g, spans, 1e-4)
    return total


@needs_jit
def test_optimizer_kernels_do_not_allocate():
    p = np.ones(100, np.float32)
    g, a, b = np.full_like(p, 0.1), np.zeros_like(p), np.zeros_like(p)
    args = (p, g, a, b, np.array([[0, 30], [50, 40]], np.int64))
    _drive_optimizers(*args, 1)  # compile outside the measured region
    one_call, fifty_calls = count_allocations(lambda k: _drive_optimizers(*args, k))
    # Only the boxing of the arguments allocates (once per outer call), never the kernels
    # (l2_penalty's span slices are views, not copies).
    assert one_call == fifty_calls


# ------------------------------------------------- Adagrad, Adadelta, Adamax, NAdam, RAdam

MORE_STEPS = 10  # RAdam rectifies from step 6 on (beta2 0.999): both of its branches run


def _more_problem(dtype):
    rng = np.random.default_rng(3)
    p0 = rng.normal(size=N).astype(dtype)
    grads = [rng.normal(size=N).astype(dtype) for _ in range(MORE_STEPS)]
    return p0, grads


def _adagrad(p, g, state, step, hp):
    from nnjit.kernels.optim import adagrad_update

    adagrad_update(p, g, state[0], hp["lr"], hp["lr_decay"], hp["weight_decay"],
                   hp["initial_accumulator_value"], hp["eps"], step)


def _adadelta(p, g, state, step, hp):
    from nnjit.kernels.optim import adadelta_update

    adadelta_update(p, g, state[0], state[1], hp["lr"], hp["rho"], hp["eps"],
                    hp["weight_decay"], step)


def _adamax(p, g, state, step, hp):
    from nnjit.kernels.optim import adamax_update

    adamax_update(p, g, state[0], state[1], hp["lr"], *hp["betas"], hp["eps"],
                  hp["weight_decay"], step)


def _nadam(p, g, state, step, hp):
    from nnjit.kernels.optim import nadam_update

    nadam_update(p, g, state[0], state[1], state[2], hp["lr"], *hp["betas"], hp["eps"],
                 hp["weight_decay"], hp["momentum_decay"], hp["decoupled_weight_decay"], step)


def _radam(p, g, state, step, hp):
    from nnjit.kernels.optim import radam_update

    radam_update(p, g, state[0], state[1], hp["lr"], *hp["betas"], hp["eps"],
                 hp["weight_decay"], hp["decoupled_weight_decay"], step)


MORE_CASES = {  # name: (torch class name, our kernel call, hyperparameters (torch's names))
    "adagrad": ("Adagrad", _adagrad, dict(lr=0.1, lr_decay=0.0, weight_decay=0.0,
                                          initial_accumulator_value=0.0, eps=1e-10)),
    "adagrad-decay-wd-init": ("Adagrad", _adagrad,
                              dict(lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                   initial_accumulator_value=0.3, eps=1e-8)),
    "adadelta": ("Adadelta", _adadelta, dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0)),
    "adadelta-wd": ("Adadelta", _adadelta, dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1)),
    "adamax": ("Adamax", _adamax, dict(lr=0.002, betas=(0.9, 0.999), eps=1e-8,
                                       weight_decay=0.0)),
    "adamax-wd": ("Adamax", _adamax, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6,
                                          weight_decay=0.1)),
    "nadam": ("NAdam", _nadam, dict(lr=0.002, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                                    momentum_decay=4e-3, decoupled_weight_decay=False)),
    "nadam-wd": ("NAdam", _nadam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1,
                                       momentum_decay=0.01, decoupled_weight_decay=False)),
    "nadam-decoupled": ("NAdam", _nadam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                              weight_decay=0.1, momentum_decay=4e-3,
                                              decoupled_weight_decay=True)),
    "radam": ("RAdam", _radam, dict(lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                                    decoupled_weight_decay=False)),
    "radam-wd": ("RAdam", _radam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1,
                                       decoupled_weight_decay=False)),
    "radam-decoupled": ("RAdam", _radam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                              weight_decay=0.1, decoupled_weight_decay=True)),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", list(MORE_CASES))
def test_more_optimizers_match_torch_step_by_step(case, dtype):
    """Every step's parameters equal torch's (float64 within 1e-12), weight decay and
    decoupled weight decay included, from state buffers that start as garbage (step 1
    initialises them). torch keeps NAdam's momentum product in its default dtype: set to the
    parameters' here, as nnjit keeps it in the arena's."""
    torch = pytest.importorskip("torch")
    name, ours, hp = MORE_CASES[case]
    p0, grads = _more_problem(dtype)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64 if dtype == np.float64 else torch.float32)
    try:
        param = torch.tensor(p0.copy(), requires_grad=True)
        opt = getattr(torch.optim, name)([param], **hp)
        p, state = p0.copy(), np.full((3, N), np.nan, dtype)
        for step, g in enumerate(grads, start=1):
            param.grad = torch.tensor(g.copy())
            opt.step()
            ours(p, g, state, step, hp)
            np.testing.assert_allclose(p, param.detach().numpy(), err_msg=f"step {step}",
                                       **_tol(dtype))
    finally:
        torch.set_default_dtype(previous)
    assert p.dtype == dtype
