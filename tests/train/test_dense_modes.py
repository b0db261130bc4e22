"""A fit gives the same model whichever forward-product rules (AVX2 / AVX-512 BLAS) it runs."""

import numpy as np
import pytest

import nnjit as nn
from nnjit.engine import fields
from nnjit.kernels import dense as kd


def _fit(mode: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 1100)).astype(dtype)
    y = rng.integers(0, 3, size=200)
    nn.set_seed(3)
    # 1100 -> 128 at batch 32 is the transposed product in both modes; 128 -> 3 the loop
    # under AVX2 rules and BLAS under AVX-512 rules.
    model = nn.Sequential(nn.Linear(1100, 128), nn.ReLU(), nn.Linear(128, 3))
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss(), dtype=dtype)
    trainer._dense_mode = mode  # (every run's RunOptions.dense_mode)
    trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=3, verbose=False)
    return trainer.predict_outputs(X[:50]), model[0].weight.data.copy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_both_modes_train_the_same_model(dtype):
    assert kd.forward_strategy(32, 1100, 128, kd.MODE_AVX2, 16) == kd.FORWARD_TRANSPOSED
    assert kd.forward_strategy(32, 1100, 128, kd.MODE_AVX512, 16) == kd.FORWARD_TRANSPOSED
    assert kd.forward_strategy(32, 128, 3, kd.MODE_AVX2, 16) == kd.FORWARD_LOOP
    assert kd.forward_strategy(32, 128, 3, kd.MODE_AVX512, 16) == kd.FORWARD_BLAS
    out0, w0 = _fit(kd.MODE_AVX2, dtype)
    out1, w1 = _fit(kd.MODE_AVX512, dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out1, out0, rtol=tol, atol=tol)
    # float32: a product summed in another order can flip the sign of a near-zero Adam step
    # (an lr-sized change in a weight or two of 140,800)
    np.testing.assert_allclose(w1, w0, rtol=tol, atol=tol if dtype == np.float64 else 0.02)
    assert np.mean(np.abs(w1 - w0) > tol) < 1e-4
    assert np.isfinite(out0).all()


def test_trainer_picks_the_mode_of_the_blas_it_calls():
    from nnjit.train.threads import dense_forward_mode

    trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 3)))
    assert trainer._dense_mode == dense_forward_mode()
    trainer.fit(np.zeros((4, 4), np.float32), np.arange(4) % 3, epochs=1, verbose=False)
    assert trainer._options.config_row()[fields.C_DENSE_MODE] == dense_forward_mode()
    assert dense_forward_mode() in (kd.MODE_AVX2, kd.MODE_AVX512)


def test_outer_product_tiles_in_a_trainer_match_finite_differences():
    """A float64 MLP whose first layer takes the outer-product forward and weight gradient under
    the AVX-512 rules (130 rows, 64 -> 128: 8192 weights): its gradients equal the AVX2 rules'
    (BLAS) to rounding and central finite differences of the loss (a sample of each parameter's
    entries: all 8,707 would take seconds)."""
    assert kd.forward_strategy(130, 64, 128, kd.MODE_AVX512, 8) == kd.FORWARD_OUTER
    assert kd.weight_gradient_by_outer(130, 64, 128, kd.MODE_AVX512, 8)
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(130, 64)), rng.normal(size=(130, 3))
    grads = {}
    for mode in (kd.MODE_AVX2, kd.MODE_AVX512):
        nn.set_seed(2)
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 3))
        trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
        trainer._dense_mode = mode
        grads[mode] = trainer.gradients(X, Y)
    for name, g in grads[kd.MODE_AVX512].items():
        np.testing.assert_allclose(g, grads[kd.MODE_AVX2][name], rtol=1e-10, atol=1e-13)
    eps = 1e-6
    for name, p in model.named_parameters():
        flat = p.data.reshape(-1)
        for k in rng.choice(flat.size, size=min(flat.size, 40), replace=False):
            old = flat[k]
            flat[k] = old + eps
            up = trainer.evaluate(X, Y)["loss"]
            flat[k] = old - eps
            down = trainer.evaluate(X, Y)["loss"]
            flat[k] = old
            np.testing.assert_allclose(grads[kd.MODE_AVX512][name].reshape(-1)[k],
                                       (up - down) / (2 * eps), rtol=1e-5, atol=1e-7)
