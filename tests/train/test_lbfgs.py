"""LBFGS: torch.optim.LBFGS's steps from Trainer.fit (float64, within 1e-12 of torch after every
step), its early ends, the fit around it (history, validation, early stopping, callbacks), its
checkpointed state (an exact resume) and the arguments it refuses."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

import nnjit as nn
from nnjit.train.callbacks import Callback

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

REL = 1e-12


def data(n=40, n_features=5, n_classes=3, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, n_features)), rng.integers(0, n_classes, size=n)


def make_pair(widths, seed=0):
    """The same float64 MLP (tanh between Linear layers) in nnjit and torch."""
    rng = np.random.default_rng(seed)
    ours, theirs = [], []
    for i, (n_in, n_out) in enumerate(pairwise(widths)):
        w, b = rng.normal(size=(n_out, n_in)) / np.sqrt(n_in), rng.normal(size=n_out) * 0.3
        lin, tlin = nn.Linear(n_in, n_out), torch.nn.Linear(n_in, n_out, dtype=torch.float64)
        lin.weight.data, lin.bias.data = w.copy(), b.copy()
        with torch.no_grad():
            tlin.weight.copy_(torch.from_numpy(w))
            tlin.bias.copy_(torch.from_numpy(b))
        ours.append(lin)
        theirs.append(tlin)
        if i < len(widths) - 2:
            ours.append(nn.Tanh())
            theirs.append(torch.nn.Tanh())
    return nn.Sequential(*ours), torch.nn.Sequential(*theirs)


def worst_relative_error(model, tmodel) -> float:
    """The largest parameter difference, relative to each tensor's largest entry."""
    return max(float(np.max(np.abs(p.data - q.detach().numpy())) / np.max(np.abs(q.detach().numpy())))
               for (_, p), (_, q) in zip(model.named_parameters(), tmodel.named_parameters()))


def torch_closure(tmodel, topt, X, y, l2=0.0):
    tX, ty, loss = torch.from_numpy(X), torch.from_numpy(y), torch.nn.CrossEntropyLoss()

    def closure():
        topt.zero_grad()
        value = loss(tmodel(tX), ty)
        if l2:  # L2Regularizer(l2): 0.5 * l2 * ||p||^2 over every parameter
            value = value + 0.5 * l2 * sum((p**2).sum() for p in tmodel.parameters())
        value.backward()
        return value

    return closure


# Each case: (widths, LBFGS arguments, L2 coefficient, steps). The MLP with one iteration per
# step keeps torch's rounding from being amplified over many iterations of a non-convex loss
# (its ring still fills and wraps over the steps); the softmax regression with an L2 penalty is
# strongly convex, so 20 iterations per step stay within 1e-12 of torch.
CASES = {
    "mlp_one_iter_ring_wraps": ((5, 8, 3), dict(max_iter=1, history_size=2), 0.0, 8),
    "mlp_one_iter_wolfe": ((5, 8, 3), dict(max_iter=1, history_size=3,
                                           line_search_fn="strong_wolfe"), 0.0, 8),
    "convex_fixed_steps_small_ring": ((5, 3), dict(history_size=3, lr=0.5), 0.05, 4),
    "convex_fixed_steps": ((5, 3), dict(), 0.05, 4),
    "convex_wolfe_small_ring": ((5, 3), dict(history_size=2, line_search_fn="strong_wolfe"),
                                0.05, 4),
    "convex_wolfe": ((5, 3), dict(line_search_fn="strong_wolfe", max_iter=25, max_eval=40),
                     0.05, 4),
    "tolerance_grad_ends_early": ((5, 3), dict(tolerance_grad=1e-3, max_iter=50), 0.05, 3),
    "tolerance_change_ends_early": ((5, 3), dict(tolerance_change=1e-4, max_iter=50,
                                                 line_search_fn="strong_wolfe"), 0.05, 3),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_step_matches_torch(case):
    widths, kwargs, l2, steps = CASES[case]
    X, y = data()
    model, tmodel = make_pair(widths)
    reg = nn.L2Regularizer(l2) if l2 else None
    trainer = nn.Trainer(model, nn.LBFGS(**kwargs), nn.CrossEntropyLoss(), reg, dtype=np.float64)
    topt = torch.optim.LBFGS(tmodel.parameters(), **kwargs)
    closure = torch_closure(tmodel, topt, X, y, l2)

    def tstate():
        return topt.state[topt._params[0]]

    for step in range(steps):
        history = trainer.fit(X, y, epochs=step + 1, initial_epoch=step, n_iter_no_change=None,
                              verbose=False)
        expected = topt.step(closure).item()
        assert worst_relative_error(model, tmodel) <= REL, f"step {step + 1}"
        assert history["train_loss"].iloc[-1] == pytest.approx(expected, rel=REL, abs=0)
        assert (trainer.optimizer.n_iter, trainer.optimizer.func_evals) == (
            tstate()["n_iter"], tstate()["func_evals"]), f"step {step + 1}"
    assert trainer.optimizer.iterations == steps
    if "ends_early" in case:  # the tolerance, not max_iter, ended the steps
        assert tstate()["n_iter"] < steps * kwargs["max_iter"]


def test_whole_fit_trains_and_reports_like_other_fits():
    X, y = data(n=60)
    model, _ = make_pair((5, 8, 3))
    trainer = nn.Trainer(model, nn.LBFGS(line_search_fn="strong_wolfe"), dtype=np.float64)
    seen = []
    history = trainer.fit(X[:40], y[:40], epochs=5, val=(X[40:], y[40:]), verbose=False,
                          callbacks=[lambda frame: seen.append(len(frame))])
    assert list(history.columns) == ["epoch", "train_loss", "train_accuracy", "val_loss",
                                     "val_accuracy", "lr", "seconds"]
    assert history["epoch"].tolist() == [1, 2, 3, 4, 5] and seen == [1, 2, 3, 4, 5]
    assert history["train_loss"].is_monotonic_decreasing
    evaluated = trainer.evaluate(X[40:], y[40:])
    best = history.attrs["best_epoch"]
    assert history["val_loss"].iloc[best - 1] == pytest.approx(evaluated["loss"], rel=1e-12)
    # the train loss of an epoch is the loss at its start: epoch 2's is epoch 1's end
    model2, _ = make_pair((5, 8, 3))
    fresh = nn.Trainer(model2, nn.LBFGS(line_search_fn="strong_wolfe"), dtype=np.float64)
    assert fresh.evaluate(X[:40], y[:40])["loss"] == pytest.approx(history["train_loss"][0],
                                                                   rel=1e-12)


def test_early_stopping_stops_and_restores_the_best_weights():
    X, y = data(n=60)
    model, _ = make_pair((5, 8, 3))
    trainer = nn.Trainer(model, nn.LBFGS(), dtype=np.float64)
    # tol larger than any gain: every epoch after the first counts as no improvement
    history = trainer.fit(X[:40], y[:40], epochs=20, val=(X[40:], y[40:]), tol=100.0,
                          n_iter_no_change=2, verbose=False)
    assert len(history) == 4 and history.attrs["stop_reason"].startswith("early stopping")
    best = history.attrs["best_epoch"]
    assert history.attrs["restored_best"]
    assert trainer.evaluate(X[40:], y[40:])["loss"] == pytest.approx(
        history["val_loss"].iloc[best - 1], rel=1e-12)


def test_a_callback_stop_ends_after_that_step():
    X, y = data()
    model, _ = make_pair((5, 3))

    class StopAtTwo(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            return epoch < 2

    trainer = nn.Trainer(model, nn.LBFGS(), dtype=np.float64)
    history = trainer.fit(X, y, epochs=10, callbacks=[StopAtTwo()], verbose=False)
    assert len(history) == 2 and trainer.optimizer.iterations == 2


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_checkpoint_resume_is_bit_identical(tmp_path, line_search_fn):
    X, y = data(n=60)
    # (restore_best=False: a fit that ends by restoring its best weights does not end where an
    # uninterrupted one goes on, for any optimizer)
    split = dict(val=(X[40:], y[40:]), verbose=False, n_iter_no_change=None, restore_best=False)

    def trainer_for():
        model, _ = make_pair((5, 8, 3))
        return nn.Trainer(model, nn.LBFGS(history_size=3, max_iter=5,
                                          line_search_fn=line_search_fn), dtype=np.float64)

    whole = trainer_for()
    expected = whole.fit(X[:40], y[:40], epochs=6, **split)
    first = trainer_for()
    first.fit(X[:40], y[:40], epochs=3, **split)
    first.save_checkpoint(tmp_path / "mid.nne")
    resumed = trainer_for()
    resumed.load_checkpoint(tmp_path / "mid.nne")
    rest = resumed.fit(X[:40], y[:40], epochs=6, initial_epoch=3, **split)
    for (name, p), (_, q) in zip(whole.model.named_parameters(),
                                 resumed.model.named_parameters()):
        assert np.array_equal(p.data, q.data), name
    assert np.array_equal(whole.optimizer.state, resumed.optimizer.state)
    cols = ["train_loss", "val_loss", "val_accuracy"]
    np.testing.assert_array_equal(rest[cols].to_numpy(), expected[cols].to_numpy()[3:])
    assert resumed.optimizer.iterations == 6


def test_float32_fit_and_its_state_in_a_float64_trainer(tmp_path):
    X, y = data()
    model, _ = make_pair((5, 8, 3))
    trainer = nn.Trainer(model, nn.LBFGS(history_size=4), dtype=np.float32)
    history = trainer.fit(X.astype(np.float32), y, epochs=3, verbose=False,
                          n_iter_no_change=None)
    assert history["train_loss"].iloc[-1] < history["train_loss"].iloc[0]
    trainer.save_checkpoint(tmp_path / "f32.nne")
    model64, _ = make_pair((5, 8, 3))
    other = nn.Trainer(model64, nn.LBFGS(history_size=4), dtype=np.float64)
    other.load_checkpoint(tmp_path / "f32.nne")
    assert other.optimizer.state.dtype == np.float64
    assert (other.optimizer.n_iter, other.optimizer.func_evals) == (
        trainer.optimizer.n_iter, trainer.optimizer.func_evals) and trainer.optimizer.n_iter > 0


def test_a_corrupt_ring_in_a_checkpoint_is_refused(tmp_path):
    X, y = data()
    model, _ = make_pair((5, 3))
    trainer = nn.Trainer(model, nn.LBFGS(history_size=2), dtype=np.float64)
    trainer.fit(X, y, epochs=2, verbose=False)
    opt = trainer.optimizer
    tail = opt.read_tail(np.empty(opt.tail_values()))
    tail[5] = 7.0  # the ring's head, past history_size
    opt.write_tail(tail)
    trainer.save_checkpoint(tmp_path / "bad.nne")
    model2, _ = make_pair((5, 3))
    with pytest.raises(nn.NNEFormatError, match="optimizer/state.*ring head 7"):
        nn.Trainer(model2, nn.LBFGS(history_size=2)).load_checkpoint(tmp_path / "bad.nne")


@pytest.mark.parametrize("kwargs, name", [
    (dict(lr=-1.0), "lr"), (dict(max_iter=0), "max_iter"), (dict(max_eval=0), "max_eval"),
    (dict(tolerance_grad=-1e-3), "tolerance_grad"), (dict(tolerance_change=float("nan")),
                                                     "tolerance_change"),
    (dict(history_size=0), "history_size"), (dict(line_search_fn="armijo"), "line_search_fn"),
    (dict(max_iter=2.5), "max_iter"),
])
def test_bad_arguments_are_refused_by_name(kwargs, name):
    with pytest.raises(ValueError, match=f"LBFGS: {name}"):
        nn.LBFGS(**kwargs)


def test_defaults_are_torchs_and_the_name_builds_it():
    opt = nn.get_optimizer("lbfgs", max_iter=8)
    assert isinstance(opt, nn.LBFGS)
    assert opt.get_config() == dict(lr=1.0, max_iter=8, max_eval=10, tolerance_grad=1e-7,
                                    tolerance_change=1e-9, history_size=100,
                                    line_search_fn=None)


@pytest.mark.parametrize("fit_kwargs, name", [
    (dict(batch_size=16), "batch_size=16"),
    (dict(scheduler=nn.schedulers.StepLR(step_size=1)), "scheduler"),
    (dict(grad_clip_norm=1.0), "grad_clip_norm"),
    (dict(accumulation_steps=2), "accumulation_steps"),
])
def test_fit_refuses_what_a_full_batch_step_does_not_take(fit_kwargs, name):
    X, y = data()
    model, _ = make_pair((5, 3))
    trainer = nn.Trainer(model, nn.LBFGS(), dtype=np.float64)
    with pytest.raises(ValueError, match=name):
        trainer.fit(X, y, epochs=2, verbose=False, **fit_kwargs)
    loader = nn.DataLoader(X, y, batch_size=len(X) - 1)
    with pytest.raises(ValueError, match=f"batch_size={len(X) - 1}"):
        trainer.fit(loader, epochs=2, verbose=False)
