"""Loss kernels: NumPy references, finite differences, PyTorch parity, float32, allocations."""


import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import expit

from nnjit.kernels._jit import jit
from nnjit.kernels.loss import (
    bce_with_logits,
    first_nonfinite,
    mse,
    poisson,
    sigmoid_all,
    softmax_ce,
    softmax_rows,
)
from tests.helpers import count_allocations

# Checks of compiled artefacts (signatures, IR, NRT counters) mean nothing in the
# NUMBA_DISABLE_JIT=1 coverage run, where the kernels are plain Python.
needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="inspects compiled code")


# ---------------------------------------------------------------- naive NumPy references (float64)


def ref_log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def ref_softmax_ce(logits, probs):
    """Per-row loss, gradient of the row-summed loss; probs: (b, k) target distribution."""
    logp = ref_log_softmax(logits)
    return -(probs * logp).sum(axis=1), np.exp(logp) - probs


def ref_mse(pred, targets):
    d = pred - targets
    return (d * d).mean(axis=1), 2.0 * d


def ref_bce(x, t):
    """Per-row mean loss, elementwise derivative (unscaled)."""
    loss = np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))
    return loss.mean(axis=1), expit(x) - t


# ---------------------------------------------------------------- strategies


@st.composite
def logits_and_labels(draw, max_abs=80.0):
    """(logits (b, k) float64 incl. large values, integer labels (b,))."""
    b = draw(st.integers(1, 8))
    k = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([0.1, 1.0, 5.0, max_abs]))
    logits = np.clip(rng.normal(0.0, scale, size=(b, k)), -max_abs, max_abs)
    if draw(st.booleans()):
        logits[rng.integers(0, b), rng.integers(0, k)] = draw(st.sampled_from([-max_abs, max_abs]))
    labels = rng.integers(0, k, size=b)
    return np.ascontiguousarray(logits), labels


def one_hot(labels, k, dtype=np.float64):
    out = np.zeros((labels.shape[0], k), dtype)
    out[np.arange(labels.shape[0]), labels] = 1.0
    return out


def index_targets(labels, dtype=np.float64):
    return labels.astype(dtype).reshape(-1, 1).copy()


def run(kernel, *args):
    """Call a loss kernel writing the gradient into a fresh array; returns (loss, n_ok, grad)."""
    x = args[0]
    grad = np.full_like(x, np.nan)
    loss, n_ok = kernel(x, *args[1:2], grad, *args[2:])
    return loss, n_ok, grad


def central_differences(objective, x, h=1e-6):
    grad = np.empty_like(x)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        x[idx] = old + h
        up = objective(x)
        x[idx] = old - h
        down = objective(x)
        x[idx] = old
        grad[idx] = (up - down) / (2 * h)
    return grad


# ---------------------------------------------------------------- softmax cross-entropy


@given(logits_and_labels())
def test_softmax_ce_matches_reference_index_targets(case):
    logits, labels = case
    b, k = logits.shape
    loss, n_ok, grad = run(softmax_ce, logits, index_targets(labels), True, 1.0 / b, True)
    ref_loss, ref_grad = ref_softmax_ce(logits, one_hot(labels, k))
    assert isinstance(loss, float) and isinstance(n_ok, float)
    np.testing.assert_allclose(loss, ref_loss.sum(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, ref_grad / b, rtol=1e-10, atol=1e-14)
    assert n_ok == int((logits.argmax(axis=1) == labels).sum())


@given(logits_and_labels(), st.integers(0, 2**32 - 1))
def test_softmax_ce_matches_reference_probability_targets(case, seed):
    logits, _ = case
    b, k = logits.shape
    probs = np.random.default_rng(seed).dirichlet(np.ones(k), size=b)
    loss, n_ok, grad = run(softmax_ce, logits, probs, False, 0.25, True)
    ref_loss, ref_grad = ref_softmax_ce(logits, probs)
    np.testing.assert_allclose(loss, ref_loss.sum(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, ref_grad * 0.25, rtol=1e-10, atol=1e-14)
    assert n_ok == int((logits.argmax(axis=1) == probs.argmax(axis=1)).sum())


@given(logits_and_labels())
def test_softmax_ce_index_and_one_hot_targets_agree(case):
    logits, labels = case
    b, k = logits.shape
    by_index = run(softmax_ce, logits, index_targets(labels), True, 1.0 / b, True)
    by_one_hot = run(softmax_ce, logits, one_hot(labels, k), False, 1.0 / b, True)
    np.testing.assert_allclose(by_index[0], by_one_hot[0], rtol=1e-15)
    assert by_index[1] == by_one_hot[1]
    np.testing.assert_allclose(by_index[2], by_one_hot[2], rtol=1e-15, atol=0)


@given(logits_and_labels(max_abs=20.0))
def test_softmax_ce_gradient_matches_finite_differences(case):
    logits, labels = case
    b, k = logits.shape
    targets = index_targets(labels)
    scratch = np.empty_like(logits)

    def objective(x):
        return softmax_ce(x, targets, scratch, True, 1.0, False)[0] / b

    _, _, grad = run(softmax_ce, logits, targets, True, 1.0 / b, True)
    np.testing.assert_allclose(grad, central_differences(objective, logits), atol=1e-7)


def test_softmax_ce_is_stable_for_huge_logits():
    for dtype in (np.float32, np.float64):
        logits = np.array([[1000.0, -1000.0, 0.0], [-1e4, -1e4, -1e4]], dtype)
        targets = np.array([[1.0], [2.0]], dtype)
        loss, n_ok, grad = run(softmax_ce, logits, targets, True, 0.5, True)
        assert np.isfinite(loss) and np.all(np.isfinite(grad))
        np.testing.assert_allclose(loss, np.log(3.0) + 2000.0, rtol=1e-6)
        np.testing.assert_allclose(grad[0], [0.5, -0.5, 0.0], atol=1e-7)
        np.testing.assert_allclose(grad[1], [1 / 6, 1 / 6, -1 / 3], rtol=1e-6)
        assert n_ok == 0  # row 1 ties: argmax is the first index, like np.argmax


def test_softmax_ce_counts_correct_rows():
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 1.0, 5.0], [1.0, 1.0, 0.0]])
    labels = np.array([0, 1, 0, 1])  # right, right, wrong, tie -> first index (wrong)
    _, n_ok, _ = run(softmax_ce, logits, index_targets(labels), True, 1.0, True)
    assert n_ok == 2
    _, n_ok, _ = run(softmax_ce, logits, one_hot(labels, 3), False, 1.0, True)
    assert n_ok == 2


def test_poisson_is_torchs_nll_and_scikit_learns_deviance():
    """``full=False``: PyTorch's PoissonNLLLoss(log_input=True) terms, exp(x) - t x; ``full``:
    scikit-learn's poisson_loss (half the deviance) of exp(x); gradient exp(x) - t."""
    from sklearn.neural_network._base import poisson_loss

    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 1.0, size=(7, 2))
    t = rng.poisson(2.0, size=(7, 2)).astype(np.float64)
    loss, _, grad = run(poisson, x, t, 1.0 / 7, True)
    np.testing.assert_allclose(loss, (np.exp(x) - t * x).sum() / 2, rtol=1e-13)
    np.testing.assert_allclose(grad, (np.exp(x) - t) / 7, rtol=1e-13)
    full, _, _ = run(poisson, x, t, 1.0 / 7, True, True)
    np.testing.assert_allclose(full * 2 / 7, poisson_loss(t, np.exp(x)), rtol=1e-13)


@pytest.mark.parametrize("kernel", ["softmax_ce", "mse", "bce_with_logits", "poisson"])
def test_weight_column_weights_each_rows_loss_gradient_and_count(kernel):
    """``wcol``: the targets' last column weighs each row (scikit-learn's sample_weight): the
    sums are the weighted sums of the unweighted rows', each gradient row is scaled by its
    weight."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 3))
    w = np.array([0.5, 2.0, 0.0, 1.0, 3.0, 1.5])
    if kernel == "softmax_ce":
        targets, args = index_targets(rng.integers(0, 3, size=6)), (True, 0.2, True, True)
    else:
        targets = rng.random(size=(6, 3)) > 0.5 if kernel == "bce_with_logits" else rng.random(
            size=(6, 3))
        targets = targets.astype(np.float64) * (4.0 if kernel == "poisson" else 1.0)
        args = (0.2, True) if kernel == "mse" else (0.2, True, True)
    fn = {"softmax_ce": softmax_ce, "mse": mse, "bce_with_logits": bce_with_logits,
          "poisson": poisson}[kernel]
    weighted = np.column_stack([targets, w])
    loss, n_ok, grad = run(fn, x, weighted, *args, weighted.shape[1] - 1)
    rows = [run(fn, x[i : i + 1], targets[i : i + 1], *args) for i in range(6)]
    np.testing.assert_allclose(loss, sum(wi * r[0] for wi, r in zip(w, rows)), rtol=1e-13)
    assert n_ok == pytest.approx(sum(wi * r[1] for wi, r in zip(w, rows)))
    np.testing.assert_allclose(grad, w[:, None] * np.vstack([r[2] for r in rows]), rtol=1e-13)


def test_loss_kernels_leave_gradient_untouched_when_not_writing():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3))
    t = rng.random(size=(5, 3))
    labels = index_targets(rng.integers(0, 3, size=5))
    cases = [
        (softmax_ce, (x, labels), (True, 0.2)),
        (softmax_ce, (x, t), (False, 0.2)),
        (mse, (x, t), (0.1,)),
        (bce_with_logits, (x, t), (0.1,)),
    ]
    for kernel, inputs, rest in cases:
        sentinel = np.full_like(x, 7.0)
        evaluated = kernel(*inputs, sentinel, *rest, False)
        trained = kernel(*inputs, np.empty_like(x), *rest, True)
        np.testing.assert_array_equal(sentinel, 7.0)
        np.testing.assert_allclose(evaluated, trained, rtol=1e-14)


# ---------------------------------------------------------------- MSE and BCE


@given(logits_and_labels(), st.integers(0, 2**32 - 1))
def test_mse_matches_reference(case, seed):
    pred, _ = case
    b, k = pred.shape
    targets = np.random.default_rng(seed).normal(0.0, 3.0, size=(b, k))
    loss, n_ok, grad = run(mse, pred, targets, 1.0 / (b * k), True)
    ref_loss, ref_grad = ref_mse(pred, targets)
    np.testing.assert_allclose(loss, ref_loss.sum(), rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad / (b * k), rtol=1e-12, atol=1e-15)
    assert n_ok == 0


@given(logits_and_labels(), st.integers(0, 2**32 - 1), st.booleans())
def test_bce_matches_reference(case, seed, hard_labels):
    logits, _ = case
    b, k = logits.shape
    rng = np.random.default_rng(seed)
    targets = (rng.random((b, k)) < 0.5).astype(float) if hard_labels else rng.random((b, k))
    loss, n_ok, grad = run(bce_with_logits, logits, targets, 1.0 / (b * k), True)
    ref_loss, ref_grad = ref_bce(logits, targets)
    np.testing.assert_allclose(loss, ref_loss.sum(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, ref_grad / (b * k), rtol=1e-10, atol=1e-15)
    assert n_ok == int(np.all((logits > 0) == (targets > 0.5), axis=1).sum())


@given(logits_and_labels(max_abs=20.0), st.integers(0, 2**32 - 1))
def test_mse_and_bce_gradients_match_finite_differences(case, seed):
    x, _ = case
    b, k = x.shape
    targets = np.random.default_rng(seed).random((b, k))
    scratch = np.empty_like(x)
    for kernel in (mse, bce_with_logits):

        def objective(z):
            return kernel(z, targets, scratch, 1.0, False)[0] / b

        _, _, grad = run(kernel, x, targets, 1.0 / (b * k), True)
        np.testing.assert_allclose(grad, central_differences(objective, x), atol=1e-6)


def test_bce_counts_rows_with_every_label_right():
    logits = np.array([[1.0, -1.0], [1.0, 1.0], [-2.0, 3.0]])
    targets = np.array([[1.0, 0.0], [1.0, 0.2], [0.4, 0.9]])
    _, n_ok, _ = run(bce_with_logits, logits, targets, 1.0, True)
    assert n_ok == 2
    _, n_ok, _ = run(bce_with_logits, logits[:, :1].copy(), targets[:, :1].copy(), 1.0, True)
    assert n_ok == 3  # k == 1: plain accuracy


def test_bce_is_stable_for_huge_logits():
    for dtype in (np.float32, np.float64):
        x = np.array([[1e4, -1e4, 0.0]], dtype)
        t = np.array([[0.0, 0.0, 1.0]], dtype)
        loss, _, grad = run(bce_with_logits, x, t, 1.0, True)
        np.testing.assert_allclose(loss, (1e4 + np.log(2.0)) / 3, rtol=1e-6)
        np.testing.assert_allclose(grad, [[1.0, 0.0, -0.5]], atol=1e-7)


# ---------------------------------------------------------------- probabilities and NaN search


@given(logits_and_labels())
def test_softmax_rows_and_sigmoid_all(case):
    x, _ = case
    out = np.empty_like(x)
    softmax_rows(x, out)
    np.testing.assert_allclose(out, np.exp(ref_log_softmax(x)), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-12)
    sigmoid_all(x, out)
    np.testing.assert_allclose(out, expit(x), rtol=1e-12, atol=1e-300)
    in_place = x.copy()
    sigmoid_all(in_place, in_place)
    np.testing.assert_array_equal(in_place, out)
    softmax_rows(in_place, in_place)
    assert np.all(np.isfinite(in_place))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_first_nonfinite_finds_nan_and_inf(dtype):
    # Guards the fast-math flag set: with nnan/ninf LLVM folds the check away and this returns -1.
    x = np.zeros(33, dtype)
    assert first_nonfinite(x) == -1
    assert first_nonfinite(x[:0]) == -1
    x[17] = np.nan
    assert first_nonfinite(x) == 17
    x[5] = -np.inf
    assert first_nonfinite(x) == 5
    x[:] = 0
    x[32] = np.inf
    assert first_nonfinite(x) == 32
    assert first_nonfinite(np.array([np.nan], dtype)) == 0


# ---------------------------------------------------------------- PyTorch parity (float64)


@given(logits_and_labels(), st.integers(0, 2**32 - 1))
def test_losses_match_torch(case, seed):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    logits, labels = case
    b, k = logits.shape
    rng = np.random.default_rng(seed)

    def torch_loss_and_grad(fn, x, *targets):
        xt = torch.tensor(x, requires_grad=True)
        loss = fn(xt, *targets)
        loss.backward()
        return loss.item(), xt.grad.numpy()

    cases = [
        (softmax_ce, index_targets(labels), (True,), 1.0 / b, b,
         F.cross_entropy, torch.tensor(labels)),
    ]
    probs = rng.dirichlet(np.ones(k), size=b)
    cases.append((softmax_ce, probs, (False,), 1.0 / b, b, F.cross_entropy, torch.tensor(probs)))
    real = rng.normal(size=(b, k))
    cases.append((mse, real, (), 1.0 / (b * k), b, F.mse_loss, torch.tensor(real)))
    soft = rng.random((b, k))
    cases.append((bce_with_logits, soft, (), 1.0 / (b * k), b,
                  F.binary_cross_entropy_with_logits, torch.tensor(soft)))

    for kernel, targets, flags, inv_scale, divisor, torch_fn, torch_targets in cases:
        loss, _, grad = run(kernel, logits, targets, *flags, inv_scale, True)
        want_loss, want_grad = torch_loss_and_grad(torch_fn, logits, torch_targets)
        np.testing.assert_allclose(loss / divisor, want_loss, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-9, atol=1e-15)


# ---------------------------------------------------------------- float32


def _float32_cases(rng, b=6, k=5):
    x = rng.normal(0.0, 4.0, size=(b, k))
    labels = rng.integers(0, k, size=b)
    probs = rng.dirichlet(np.ones(k), size=b)
    return [
        (softmax_ce, x, index_targets(labels), (True, 1.0 / b)),
        (softmax_ce, x, probs, (False, 1.0 / b)),
        (mse, x, rng.normal(size=(b, k)), (1.0 / (b * k),)),
        (bce_with_logits, x, rng.random((b, k)), (1.0 / (b * k),)),
    ]


def test_float32_stays_float32_and_matches_float64():
    rng = np.random.default_rng(3)
    for kernel, x, targets, rest in _float32_cases(rng):
        x32, t32 = x.astype(np.float32), targets.astype(np.float32)
        loss32, ok32, grad32 = run(kernel, x32, t32, *rest, True)
        loss64, ok64, grad64 = run(kernel, x, targets, *rest, True)
        assert grad32.dtype == np.float32
        np.testing.assert_allclose(loss32, loss64, rtol=1e-5)
        np.testing.assert_allclose(grad32, grad64, rtol=1e-4, atol=1e-6)
        assert ok32 == ok64
    out = np.empty((2, 3), np.float32)
    x = np.array([[0.5, -1.0, 2.0], [100.0, 0.0, -100.0]], np.float32)
    softmax_rows(x, out)
    # atol: float32 rounds exp(-100) ~ 3.7e-44 to a denormal and exp(-200) to 0.
    np.testing.assert_allclose(out, np.exp(ref_log_softmax(x.astype(float))), rtol=1e-6, atol=1e-38)
    sigmoid_all(x, out)
    np.testing.assert_allclose(out, expit(x.astype(float)), rtol=1e-6, atol=1e-38)


@needs_jit
def test_float32_call_compiles_a_float32_signature():
    rng = np.random.default_rng(4)
    for kernel, x, targets, rest in _float32_cases(rng):
        run(kernel, x.astype(np.float32), targets.astype(np.float32), *rest, True)
        sigs = [s for s in kernel.nopython_signatures if s.args[0].dtype.name == "float32"]
        assert sigs
        for sig in sigs:
            arrays = [a for a in sig.args if hasattr(a, "dtype")]
            assert {a.dtype.name for a in arrays} == {"float32"}, sig
            assert sig.return_type.types[0].name == "float64"  # the loss sum


# ---------------------------------------------------------------- allocations

@jit(cache=False)
def _drive_losses(x, idx, t, g, flat, n):
    total = 0.0
    for _ in range(n):
        total += softmax_ce(x, idx, g, True, 0.1, True)[0]
        total += softmax_ce(x, t, g, False, 0.1, True)[0]
        total += mse(x, t, g, 0.1, True)[0]
        total += bce_with_logits(x, t, g, 0.1, True)[0]
        softmax_rows(x, g)
        sigmoid_all(x, g)
        total += first_nonfinite(flat)
    return total


@needs_jit
def test_loss_kernels_do_not_allocate():
    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    t = np.full_like(x, 0.25)
    idx = np.zeros((8, 1), np.float32)
    g = np.empty_like(x)
    args = (x, idx, t, g, x.ravel())
    _drive_losses(*args, 1)  # compile outside the measured region
    one_call, fifty_calls = count_allocations(lambda k: _drive_losses(*args, k))
    # Only the boxing of the arguments allocates (once per outer call), never the kernels.
    assert one_call == fifty_calls
