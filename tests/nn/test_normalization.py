"""BatchNorm1d, BatchNorm2d and LayerNorm against PyTorch (float64, same weights), their running
statistics, train/eval semantics across fit/evaluate/predict/gradients, and their errors. The
nets put a ReLU after the norm: a batch norm's program folds it in (nnjit.engine.fusion), so
the parity covers the folded forward, backward and evaluation too.

Op-level checks (training-mode forward against a float64 NumPy reference, gradients against
finite differences) are the registry's: tests/ops/test_op_gradients.py. Every trainer here is
float64 so the whole file shares one build of the normalization family.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.tape.tape import op_name
from nnjit.train.callbacks import Callback

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

F64 = dict(rtol=1e-10, atol=1e-12)
C, H, W = 3, 2, 2  # the image shape the 2-D models view their input as


class Net(nn.Module):
    """Linear -> (view as an image) -> norm -> ReLU -> (flatten) -> Linear, in nnjit."""

    def __init__(self, norm, image: bool, n_in=5, n_out=3):
        super().__init__()
        width = C * H * W if image else 6
        self.image = image
        self.fc1 = nn.Linear(n_in, width)
        self.norm = norm
        self.fc2 = nn.Linear(width, n_out)

    def forward(self, x):
        h = self.fc1(x)
        if self.image:
            h = h.view(-1, C, H, W)
        h = nn.functional.relu(self.norm(h))
        return self.fc2(h.flatten(1) if self.image else h)


class TorchNet(torch.nn.Module):
    def __init__(self, norm, image: bool, n_in=5, n_out=3):
        super().__init__()
        width = C * H * W if image else 6
        self.image = image
        self.fc1 = torch.nn.Linear(n_in, width, dtype=torch.float64)
        self.norm = norm
        self.fc2 = torch.nn.Linear(width, n_out, dtype=torch.float64)

    def forward(self, x):
        h = self.fc1(x)
        if self.image:
            h = h.view(-1, C, H, W)
        h = torch.relu(self.norm(h))
        return self.fc2(h.flatten(1) if self.image else h)


def pair(kind: str, **kw):
    """The same network in nnjit and torch, torch's weights copied from nnjit's state_dict (the
    names match 1:1: a test that they do)."""
    image = kind in ("bn2d", "ln2d")
    width = C * H * W if image else 6
    ours_norm, theirs_norm = {
        "bn1d": (lambda: nn.BatchNorm1d(width, **kw), lambda: torch.nn.BatchNorm1d(width, **kw)),
        "bn2d": (lambda: nn.BatchNorm2d(C, **kw), lambda: torch.nn.BatchNorm2d(C, **kw)),
        "ln1d": (lambda: nn.LayerNorm(width, **kw), lambda: torch.nn.LayerNorm(width, **kw)),
        "ln2d": (lambda: nn.LayerNorm((H, W), **kw), lambda: torch.nn.LayerNorm((H, W), **kw)),
    }[kind]
    with nn.seeded(3):
        ours = Net(ours_norm(), image)
    theirs = TorchNet(theirs_norm().double(), image)
    rng = np.random.default_rng(4)
    state = ours.state_dict()
    for name in state:  # non-trivial affine parameters and running statistics
        if name.endswith(("norm.weight", "norm.bias")):
            state[name] = rng.uniform(0.5, 1.5, state[name].shape)
        if name.endswith("running_var"):
            state[name] = rng.uniform(0.5, 2.0, state[name].shape)
        if name.endswith("running_mean"):
            state[name] = rng.normal(size=state[name].shape)
    ours.load_state_dict(state)
    assert list(theirs.state_dict()) == list(ours.state_dict())
    theirs.load_state_dict({k: torch.from_numpy(np.array(v, np.float64))
                            for k, v in ours.state_dict().items()})
    return ours, theirs


def data(n=17, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)) * 2.0 + 0.5, rng.integers(0, 3, n)


def torch_state(model):
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def assert_state_equal(ours, theirs, **tol):
    theirs = torch_state(theirs)
    for name, value in ours.state_dict().items():
        np.testing.assert_allclose(value, theirs[name], err_msg=name, **(tol or F64))


KINDS = {
    "bn1d": {},
    "bn1d-cumulative-no-affine": {"momentum": None, "affine": False},
    "bn2d": {"momentum": 0.3, "eps": 1e-3},
    "bn2d-no-running-stats": {"track_running_stats": False},
    "ln1d": {},
    "ln2d-no-bias": {"bias": False, "eps": 1e-4},
}


@pytest.mark.parametrize("name", list(KINDS))
def test_forward_gradients_training_and_evaluation_match_torch(name):
    """Train mode: forward and every gradient equal torch's on one batch; after 2 epochs of
    SGD (momentum, weight decay) on the same batches, every parameter and running statistic
    (running_mean, running_var, num_batches_tracked) equals torch's; eval outputs equal."""
    kind = name.split("-")[0]
    ours, theirs = pair(kind, **KINDS[name])
    X, y = data()
    trainer = nn.Trainer(ours, nn.SGD(lr=0.05, momentum=0.9, weight_decay=0.01),
                         nn.CrossEntropyLoss(), dtype=np.float64, seed=0)
    loss_fn = torch.nn.CrossEntropyLoss()

    grads = trainer.gradients(X, y)  # training mode: batch statistics (and a stats update)
    # a batch norm takes in the ReLU after it (nnjit.engine.fusion); a layer norm does not
    ops = [op_name(code) for code in trainer.program.records[:, 0]]
    assert ("relu" in ops) == kind.startswith("ln"), ops
    theirs.train()
    theirs.zero_grad()
    loss = loss_fn(theirs(torch.from_numpy(X)), torch.from_numpy(y))
    loss.backward()
    assert np.isclose(trainer.last_loss_, loss.item(), **F64)
    assert list(grads) == [n for n, _ in theirs.named_parameters()]
    for n, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[n], p.grad.numpy(), err_msg=n, **F64)
    assert_state_equal(ours, theirs)  # the gradients call updated the running stats as torch

    opt = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)
    trainer.fit(nn.DataLoader(X, y, batch_size=6, shuffle=False), epochs=2, verbose=False)
    for _ in range(2):
        for start in range(0, len(X), 6):
            opt.zero_grad()
            loss_fn(theirs(torch.from_numpy(X[start:start + 6])),
                    torch.from_numpy(y[start:start + 6])).backward()
            opt.step()
    assert_state_equal(ours, theirs, rtol=1e-9, atol=1e-11)

    theirs.eval()
    with torch.no_grad():
        expected = theirs(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(trainer.predict_outputs(X), expected, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(ours(X), expected, rtol=1e-9, atol=1e-11)


def test_running_statistics_follow_torchs_rule_over_many_steps():
    """num_batches_tracked counts training batches only (not validation, evaluate, predict), and
    the statistics after 3 epochs of 3 batches equal torch's (momentum 0.1, unbiased var)."""
    ours, theirs = pair("bn1d")
    X, y = data(n=18)
    Xv, yv = data(n=7, seed=2)
    trainer = nn.Trainer(ours, nn.SGD(lr=1e-30), nn.CrossEntropyLoss(), dtype=np.float64, seed=0)
    trainer.fit(nn.DataLoader(X, y, batch_size=6, shuffle=False), epochs=3, val=(Xv, yv),
                verbose=False, n_iter_no_change=None, restore_best=False)
    trainer.evaluate(Xv, yv)
    trainer.predict(Xv)
    assert ours.norm.num_batches_tracked.data == 9.0
    theirs.train()
    with torch.no_grad():
        for _ in range(3):
            for start in range(0, 18, 6):
                theirs(torch.from_numpy(X[start:start + 6]))
    assert_state_equal(ours, theirs)


def test_validation_uses_running_statistics_and_fit_keeps_the_users_mode():
    """Validation batches run in evaluation mode: the last epoch's val_loss is evaluate()'s on
    the final weights (dropout off, running statistics). The mode flags the user set are what
    they were after fit, predict and gradients, and read True while fitting."""
    class Check(Callback):
        seen = []

        def on_epoch_end(self, trainer, epoch, logs):
            self.seen.append(trainer.model.training)

    with nn.seeded(0):
        model = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5),
                              nn.Linear(8, 3))
    X, y = data(n=24)
    Xv, yv = data(n=9, seed=2)
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), dtype=np.float64, seed=0)
    model.eval()
    model[1].train()  # a mixed setting is kept as set
    history = trainer.fit(nn.DataLoader(X, y, batch_size=8), epochs=3, val=(Xv, yv),
                          verbose=False, restore_best=False, callbacks=[Check()])
    assert Check.seen == [True, True, True]
    assert [m.training for m in model.modules()] == [False, False, True, False, False, False]
    assert np.isclose(history["val_loss"].iloc[-1], trainer.evaluate(Xv, yv)["loss"], **F64)
    out = trainer.predict_outputs(Xv)
    np.testing.assert_array_equal(trainer.predict_outputs(Xv), out)  # deterministic: eval mode
    stats = model[1].running_mean.data.copy()
    trainer.gradients(X, y)  # training mode: dropout and batch statistics, stats updated
    assert not np.array_equal(model[1].running_mean.data, stats)
    assert [m.training for m in model.modules()] == [False, False, True, False, False, False]
    model.train()
    trainer.fit(nn.DataLoader(X, y, batch_size=8), epochs=1, verbose=False)
    assert all(m.training for m in model.modules())


def test_a_training_batch_of_one_row_names_the_layer_and_suggests_drop_last():
    with nn.seeded(0):
        model = nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Linear(6, 3))
    X, y = data(n=17)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), dtype=np.float64, seed=0)
    before = model.state_dict()
    with pytest.raises(ValueError, match=r"layer '1'.*batch of 1 row.*last batch of 17 rows in "
                                         r"batches of 8.*drop_last=True"):
        trainer.fit(nn.DataLoader(X, y, batch_size=8), epochs=1, verbose=False)
    for name, value in model.state_dict().items():  # nothing trained
        np.testing.assert_array_equal(value, before[name])
    with pytest.raises(ValueError, match=r"gradients: layer '1'.*batch of 1 row"):
        trainer.gradients(X[:1], y[:1])
    trainer.fit(nn.DataLoader(X, y, batch_size=8, drop_last=True), epochs=1, verbose=False)
    assert model[1].num_batches_tracked.data == 2.0
    assert np.isfinite(trainer.predict_outputs(X[:1])).all()  # evaluation: one row is fine


def test_shape_errors_name_the_layer():
    X, y = data()
    cases = [
        (nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(4)),
         r"BatchNorm1d '1': expected input \(B, C\) or \(B, C, L\) with C = 4 channels, got "
         r"shape \(batch\(\d+\), 6\)"),
        (nn.Sequential(nn.Linear(5, 6), nn.BatchNorm2d(6)),
         r"BatchNorm2d '1': expected input \(B, C, H, W\)"),
        (nn.Sequential(nn.Linear(5, 6), nn.LayerNorm(5)),
         r"LayerNorm '1': normalized_shape \[5\] must equal the input's trailing dims"),
    ]
    for model, message in cases:
        with pytest.raises(ValueError, match=message):
            nn.Trainer(model, dtype=np.float64).fit(nn.DataLoader(X, y), epochs=1,
                                                    verbose=False)
    with pytest.raises(ValueError, match=r"BatchNorm1d: momentum must be in \[0, 1\]"):
        nn.BatchNorm1d(4, momentum=2.0)
    with pytest.raises(ValueError, match=r"LayerNorm: eps must be > 0"):
        nn.LayerNorm(4, eps=0.0)


def test_saved_weights_and_resume_are_bit_exact_with_batch_norm(tmp_path):
    """.nne weights carry the running statistics; a checkpoint resume continues bit for bit;
    the best weights restored at the end of a fit include the running statistics of that
    epoch."""
    def make():
        with nn.seeded(5):
            return nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2),
                                 nn.Linear(8, 3))

    X, y = data(n=40)
    Xv, yv = data(n=10, seed=7)

    class Snapshots(Callback):
        def __init__(self):
            self.states = []

        def on_epoch_end(self, trainer, epoch, logs):
            self.states.append(trainer.model.state_dict())

    def fit(trainer, epochs, initial_epoch=0, callbacks=()):
        return trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=epochs, val=(Xv, yv),
                           initial_epoch=initial_epoch, verbose=False, callbacks=list(callbacks),
                           n_iter_no_change=None)

    snapshots = Snapshots()
    full = nn.Trainer(make(), nn.Adam(lr=0.05), dtype=np.float64, seed=1)
    history = fit(full, 6, callbacks=[snapshots])
    best = history.attrs["best_epoch"]
    assert history.attrs["restored_best"] and best < 6
    for name, value in full.model.state_dict().items():
        np.testing.assert_array_equal(value, snapshots.states[best - 1][name], err_msg=name)
    assert full.model[1].num_batches_tracked.data == 3 * best

    first = nn.Trainer(make(), nn.Adam(lr=0.05), dtype=np.float64, seed=1)
    fit(first, 3)
    first.save_checkpoint(tmp_path / "ck.nne")
    first.model.save_weights(tmp_path / "w.nne")
    loaded = make()
    inference = nn.Trainer(loaded, dtype=np.float64)
    inference.predict_outputs(X)  # laid out in float64 first: the file's values load exactly
    loaded.load_weights(tmp_path / "w.nne")
    for name, value in first.model.state_dict().items():
        np.testing.assert_array_equal(loaded.state_dict()[name], value, err_msg=name)
    np.testing.assert_array_equal(inference.predict_outputs(X), first.predict_outputs(X))

    resumed = nn.Trainer(make(), nn.Adam(lr=0.05), dtype=np.float64)
    resumed.load_checkpoint(tmp_path / "ck.nne")
    fit(resumed, 6, initial_epoch=3)
    straight = nn.Trainer(make(), nn.Adam(lr=0.05), dtype=np.float64, seed=1)
    fit(straight, 6)
    for name, value in straight.model.state_dict().items():
        np.testing.assert_array_equal(resumed.model.state_dict()[name], value, err_msg=name)
