"""Schedulers, gradient clipping and gradient accumulation inside the compiled loop."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit import schedulers


def data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    return X, (X[:, 0] - X[:, 1] > 0).astype(np.int64)


def make(dtype=np.float64, opt=None):
    nn.set_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2))
    return model, nn.Trainer(model, opt or nn.SGD(lr=0.1), nn.CrossEntropyLoss(), dtype=dtype,
                             seed=0)


def weights(model):
    return np.concatenate([p.data.ravel() for p in model.parameters()])


@pytest.mark.parametrize("scheduler", [
    schedulers.StepLR(step_size=2, gamma=0.5),
    schedulers.CosineAnnealingLR(T_max=6, eta_min=0.01),
    schedulers.LinearWarmupDecay(warmup_epochs=2),
], ids=lambda s: type(s).__name__)
def test_scheduler_lr_reaches_the_optimizer(scheduler):
    X, y = data()
    model, trainer = make()
    history = trainer.fit(nn.DataLoader(X, y, batch_size=8, shuffle=False), epochs=6,
                          n_iter_no_change=None, scheduler=scheduler, verbose=False)
    table = scheduler.lr_table(0.1, 6, 4)
    np.testing.assert_allclose(history["lr"], table.reshape(6, 4)[:, -1])

    # The same steps taken one at a time with those rates give the same weights.
    ref_model, ref = make()
    for epoch in range(6):
        for b in range(4):
            ref.optimizer.lr = float(table[epoch * 4 + b])
            rows = slice(b * 8, b * 8 + 8)
            ref.fit(nn.DataLoader(X[rows], y[rows], batch_size=8, shuffle=False), epochs=1,
                    n_iter_no_change=None, verbose=False)
    np.testing.assert_allclose(weights(model), weights(ref_model), rtol=1e-12, atol=1e-14)


def test_grad_clip_matches_torch():
    torch = pytest.importorskip("torch")
    X, y = data()
    model, trainer = make()
    tm = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    with torch.no_grad():
        for p, (_, q) in zip(tm.parameters(), model.named_parameters()):
            p.copy_(torch.from_numpy(np.array(q.data, dtype=np.float64)))
    trainer.fit(nn.DataLoader(X, y, batch_size=32, shuffle=False), epochs=3,
                n_iter_no_change=None, grad_clip_norm=0.05, verbose=False)
    opt = torch.optim.SGD(tm.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm(torch.from_numpy(X)), torch.from_numpy(y))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.05)
        assert norm > 0.05  # the clip is active in this test
        opt.step()
    expected = np.concatenate([p.detach().numpy().ravel() for p in tm.parameters()])
    np.testing.assert_allclose(weights(model), expected, rtol=1e-10, atol=1e-12)


def test_accumulation_equals_one_big_batch():
    X, y = data()
    big_model, big = make()
    big.fit(nn.DataLoader(X, y, batch_size=16, shuffle=False), epochs=3, n_iter_no_change=None,
            verbose=False)
    acc_model, acc = make()
    acc.fit(nn.DataLoader(X, y, batch_size=4, shuffle=False), epochs=3, n_iter_no_change=None,
            accumulation_steps=4, verbose=False)
    assert acc.optimizer.iterations == big.optimizer.iterations == 6
    np.testing.assert_allclose(weights(acc_model), weights(big_model), rtol=1e-12, atol=1e-14)


def test_accumulation_short_last_group_takes_a_step():
    X, y = data(n=20)
    _, trainer = make()
    trainer.fit(nn.DataLoader(X, y, batch_size=4, shuffle=False), epochs=2,
                n_iter_no_change=None, accumulation_steps=2, verbose=False)
    assert trainer.optimizer.iterations == 2 * 3  # 5 batches: groups of 2, 2, 1


def test_reduce_on_plateau_follows_the_reference_rule():
    X, y = data()
    X_val, y_val = X, 1 - y  # validation loss keeps rising: the rate must drop
    plateau = schedulers.ReduceLROnPlateau(factor=0.5, patience=1)
    _, trainer = make(opt=nn.Adam(lr=0.05))
    history = trainer.fit(nn.DataLoader(X, y, batch_size=8), epochs=8, val=(X_val, y_val),
                          n_iter_no_change=None, scheduler=plateau, verbose=False)
    reference = schedulers.ReduceLROnPlateau(factor=0.5, patience=1).reset(0.05)
    expected = [0.05]
    for v in history["val_loss"][:-1]:
        expected.append(reference.step(v))
    np.testing.assert_allclose(history["lr"], expected)
    assert history["lr"].iloc[-1] < 0.05


def test_bad_training_options():
    X, y = data()
    _, trainer = make()
    loader = nn.DataLoader(X, y)
    with pytest.raises(ValueError, match=r"grad_clip_norm must be a number > 0"):
        trainer.fit(loader, grad_clip_norm=0, verbose=False)
    with pytest.raises(ValueError, match=r"accumulation_steps must be an int >= 1"):
        trainer.fit(loader, accumulation_steps=0, verbose=False)
    with pytest.raises(TypeError, match=r"scheduler must be one of nnjit.schedulers"):
        trainer.fit(loader, scheduler="step", verbose=False)
    with pytest.raises(ValueError, match=r"mode='min'\) does not fit monitor='val_accuracy'"):
        trainer.fit(loader, val=(X, y), monitor="val_accuracy", verbose=False,
                    scheduler=schedulers.ReduceLROnPlateau())
