"""Big models update their parameters with the optimizers' prange build (execute_parallel)."""

import numba
import numpy as np
import pytest

import nnjit as nn
from nnjit.graph import interpreter as it
from nnjit.kernels import parallel as kp

pytestmark = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="runs compiled parallel code")


def _fit(force_serial: bool, optimizer):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(96, 600)).astype(np.float32)
    y = rng.integers(0, 4, size=96)
    nn.set_seed(5)
    model = nn.Sequential(nn.Linear(600, 512), nn.ReLU(), nn.Linear(512, 4))  # 309,764 params
    trainer = nn.Trainer(model, optimizer, nn.CrossEntropyLoss(),
                         regularizer=nn.L2Regularizer(1e-4))
    loader = nn.DataLoader(X, y, batch_size=32)
    trainer.fit(loader, epochs=1, verbose=False)  # lays the program out
    if force_serial:
        trainer.program._execute = it.execute
    history = trainer.fit(loader, epochs=3, val=(X[:20], y[:20]), verbose=False)
    return trainer, history


OPTIMIZERS = {"adam": lambda: nn.Adam(lr=1e-3), "sgd": lambda: nn.SGD(lr=0.05, momentum=0.9),
              "rmsprop": lambda: nn.RMSprop(lr=1e-3)}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_big_model_uses_the_parallel_build_with_the_same_results(name):
    trainer, history = _fit(False, OPTIMIZERS[name]())
    n = trainer.program.n_params
    assert n >= kp.PARALLEL_MIN_SIZE["optimizer"]
    expected = it.execute_parallel if kp.min_size("optimizer") <= n else it.execute
    assert trainer.program._execute is expected
    serial, serial_history = _fit(True, OPTIMIZERS[name]())
    # element-wise updates: the threads split the loop, every element gets the same arithmetic
    np.testing.assert_array_equal(trainer.program.values[:n], serial.program.values[:n])
    np.testing.assert_array_equal(history["train_loss"].to_numpy(),
                                  serial_history["train_loss"].to_numpy())


def test_small_model_stays_serial():
    trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 3)))
    trainer.fit(nn.DataLoader(np.zeros((8, 4), np.float32), np.zeros(8, np.int64)), epochs=1,
                verbose=False)
    assert trainer.program._execute is it.execute
