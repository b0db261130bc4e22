"""Exact resume with schedulers and early stopping: 10 epochs == 5 epochs + resume from LAST
for 5 more, bit for bit in weights and history (``seconds`` aside)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import nnjit as nn
from nnjit.experiment import (
    Checkpoints,
    ModelConfig,
    NetConfig,
    OptimizerConfig,
    RunConfig,
    SchedulerConfig,
    Schedulers,
    TrainConfig,
)
from nnjit.experiment.run_history import IDPS_COLUMNS
from nnjit.experiment.train_run import train_run
from nnjit.train.builtin_callbacks import EarlyStopping
from nnjit.train.callbacks import Callback
from nnjit.io.nne import load_nne, save_nne

COLS = [c for c in IDPS_COLUMNS if c != "seconds"]


def _data():
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(X).astype(np.float32)
    idx = np.random.default_rng(0).permutation(len(X))
    return X[idx[:120]], y[idx[:120]], X[idx[120:]], y[idx[120:]]


def _config(epochs=10, scheduler=None, optimizer=None, **train):
    train.setdefault("patience", None)
    train.setdefault("restore_best", False)
    return RunConfig(
        model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,), dropout=0.1)),
        optimizer=optimizer or OptimizerConfig(lr=0.01),
        scheduler=scheduler,
        train=TrainConfig(epochs=epochs, batch_size=16, seed=3, **train))


def _weights(trainer):
    return {n: np.array(p.data) for n, p in trainer.model.named_parameters()}


def _straight_and_resumed(tmp_path, cfg, split=5, callbacks=lambda: ()):
    X, y, Xv, yv = _data()
    _, straight, hist_a = train_run(cfg, X, y, Xv, yv, tmp_path / "a", callbacks=callbacks())
    run_b, _, hist_half = train_run(cfg, X, y, Xv, yv, tmp_path / "b", epochs=split,
                                    callbacks=callbacks())
    assert len(hist_half) == split and run_b.checkpoint_epoch(Checkpoints.LAST) == split
    _, resumed, hist_b = train_run(cfg, X, y, Xv, yv, tmp_path / "b", resume=Checkpoints.LAST,
                                   callbacks=callbacks())
    wa, wb = _weights(straight), _weights(resumed)
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)
    pd.testing.assert_frame_equal(hist_a[COLS], hist_b[COLS], check_exact=True)
    return hist_a, straight, resumed


SCHEDULERS = {
    "cosine": SchedulerConfig(kind=Schedulers.COSINE, eta_min=1e-4),
    "one_cycle": SchedulerConfig(kind=Schedulers.ONE_CYCLE, max_lr=0.05),
    "warmup": SchedulerConfig(kind=Schedulers.LINEAR_WARMUP, warmup_epochs=3),
    "plateau": SchedulerConfig(kind=Schedulers.PLATEAU, patience=1, factor=0.5, threshold=0.2),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_resume_with_scheduler_is_bit_identical(tmp_path, name):
    hist, _, _ = _straight_and_resumed(tmp_path, _config(scheduler=SCHEDULERS[name]))
    lrs = hist["lr"].to_numpy()
    assert len(np.unique(lrs)) > 2, f"{name}: the learning rate should change: {lrs}"
    if name == "plateau":  # the rule must have acted after the resume point
        assert lrs[5:].min() < lrs[:5].min()


def test_resume_with_accumulation_and_clipping(tmp_path):
    opt = OptimizerConfig(lr=0.02, grad_clip_norm=0.5, accumulation_steps=3)
    _straight_and_resumed(tmp_path, _config(scheduler=SCHEDULERS["cosine"], optimizer=opt))


def test_compiled_early_stopping_patience_spans_the_resume(tmp_path):
    # min_delta large: almost no epoch counts as an improvement, so the patience (3) runs out
    # after the resume point (5) while its count started before it.
    cfg = _config(epochs=20, patience=3, min_delta=0.05, restore_best=True,
                  scheduler=SCHEDULERS["cosine"])
    hist, straight, _ = _straight_and_resumed(tmp_path, cfg)
    n = len(hist)
    assert 5 < n < 20, n  # stopped after the resume point, before the limit
    assert straight.history_.attrs["stop_reason"].startswith("early stopping")


def test_early_stopping_callback_state_spans_the_resume(tmp_path):
    """A user's EarlyStopping: its wait count (1 at epoch 13) and best weights are saved in the
    run's checkpoints, so the resumed run stops at the same epoch with the same weights."""
    cfg = _config(epochs=20, monitor="val_accuracy", mode="max", patience=None,
                  restore_best=False)

    def callbacks():
        return [EarlyStopping("val_loss", patience=2, min_delta=0.025,
                              restore_best_weights=True)]

    hist, straight, resumed = _straight_and_resumed(tmp_path, cfg, split=13,
                                                    callbacks=callbacks)
    assert 13 < len(hist) < 20, len(hist)
    assert straight.history_.attrs["stop_reason"] == "stopped by a callback"


def test_train_run_early_stopping_callback_state_in_checkpoint(tmp_path):
    # a monitor the compiled rule does not know makes train_run use the EarlyStopping callback;
    # it stops at epoch 12 with patience 3, and at epoch 10 its wait count is 1
    cfg = _config(epochs=20, monitor="train_accuracy", patience=3, min_delta=0.01)
    X, y, Xv, yv = _data()
    run, _, hist = train_run(cfg, X, y, Xv, yv, tmp_path, epochs=10)
    nne = load_nne(run.checkpoint(Checkpoints.LAST))
    assert nne.metadata["callbacks"]["EarlyStopping"]["monitor"] == "train_accuracy"
    assert int(nne.groups["callbacks"]["EarlyStopping/wait"]) == 1
    assert float(nne.groups["fit"]["epoch"]) == 10.0
    hist, straight, _ = _straight_and_resumed(tmp_path / "x", cfg, split=10)
    assert len(hist) == 12
    assert straight.history_.attrs["stop_reason"] == "stopped by a callback"


def test_checkpoint_without_fit_state_still_loads(tmp_path):
    """Older checkpoints (no ``fit``/``callbacks`` groups) load; the fit then starts early
    stopping afresh, and the scheduler table still continues at initial_epoch (defaults)."""
    X, y, Xv, yv = _data()
    cfg = _config(epochs=10, scheduler=SCHEDULERS["cosine"])
    run, _, _ = train_run(cfg, X, y, Xv, yv, tmp_path, epochs=5)
    path = run.checkpoint(Checkpoints.LAST)
    nne = load_nne(path)
    assert {"fit", "params", "optimizer", "rng"} <= set(nne.groups)
    old = {g: t for g, t in nne.groups.items() if g not in ("fit", "callbacks")}
    meta = {k: v for k, v in nne.metadata.items() if k != "callbacks"}
    save_nne(path, old, meta)
    _, resumed, hist = train_run(cfg, X, y, Xv, yv, tmp_path, resume=Checkpoints.LAST)
    _, straight, hist_a = train_run(cfg, X, y, Xv, yv, tmp_path / "a")
    # no plateau, no early stopping: the defaults reproduce the straight run
    pd.testing.assert_frame_equal(hist_a[COLS], hist[COLS], check_exact=True)


def test_trainer_initial_epoch_keras_semantics(tmp_path):
    """fit(epochs=10, initial_epoch=5) after loading a 5-epoch checkpoint equals 10 epochs."""
    X, y, Xv, yv = _data()

    def make():
        nn.set_seed(1)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 3))
        return nn.Trainer(model, nn.Adam(lr=0.02), seed=4)

    sched = nn.schedulers.ReduceLROnPlateau(patience=0, factor=0.5, threshold=0.2)
    kw = dict(val=(Xv, yv), n_iter_no_change=2, tol=0.02, verbose=False)
    a = make()
    hist_a = a.fit(nn.DataLoader(X, y, batch_size=16), epochs=10, scheduler=sched, **kw)
    b = make()
    b.fit(nn.DataLoader(X, y, batch_size=16), epochs=4, scheduler=sched, schedule_epochs=10,
          **kw)
    b.save_checkpoint(tmp_path / "c.nne")
    c = make()
    c.load_checkpoint(tmp_path / "c.nne")
    hist_c = c.fit(nn.DataLoader(X, y, batch_size=16), epochs=10, initial_epoch=4,
                   scheduler=sched, **kw)
    assert hist_c["epoch"].iloc[0] == 5  # absolute epoch numbers
    cols = [col for col in hist_a.columns if col != "seconds"]
    pd.testing.assert_frame_equal(hist_a[cols].iloc[4:].reset_index(drop=True),
                                  hist_c[cols].reset_index(drop=True), check_exact=True)
    assert hist_a.attrs["best_epoch"] == hist_c.attrs["best_epoch"]
    assert hist_a.attrs["stop_reason"] == hist_c.attrs["stop_reason"]
    for pa, pc in zip(a.model.parameters(), c.model.parameters()):
        np.testing.assert_array_equal(pa.data, pc.data)
    with pytest.raises(ValueError, match="initial_epoch"):
        c.fit((X, y), epochs=3, initial_epoch=3, verbose=False)


def test_initial_epoch_with_a_mismatched_fit_state_warns(tmp_path):
    X, y, _, _ = _data()
    nn.set_seed(1)
    trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 3)), seed=0)
    trainer.fit((X, y), epochs=2, verbose=False)
    with pytest.warns(UserWarning, match="saved after epoch 2"):
        hist = trainer.fit((X, y), epochs=5, initial_epoch=3, verbose=False)
    assert hist["epoch"].tolist() == [4, 5]


def test_per_batch_rows_resume_bit_identical(tmp_path):
    X, y, Xv, yv = _data()
    cfg = _config(scheduler=SCHEDULERS["one_cycle"])
    run_a, _, _ = train_run(cfg, X, y, Xv, yv, tmp_path / "a", log_batches=True)
    train_run(cfg, X, y, Xv, yv, tmp_path / "b", epochs=5, log_batches=True)
    run_b, _, _ = train_run(cfg, X, y, Xv, yv, tmp_path / "b", resume=Checkpoints.LAST,
                            log_batches=True)
    a, b = run_a.batch_history(), run_b.batch_history()
    assert len(a) == 10 * 8 and a["epoch"].tolist() == b["epoch"].tolist()
    cols = [c for c in a.columns if c != "seconds"]
    pd.testing.assert_frame_equal(a[cols], b[cols], check_exact=True)


def test_load_then_save_keeps_the_fit_state_and_rng(tmp_path):
    X, y, Xv, yv = _data()
    cfg = _config(epochs=10, patience=3, min_delta=0.05, restore_best=True)
    run, _, _ = train_run(cfg, X, y, Xv, yv, tmp_path, epochs=5)
    trainer = run.build_trainer()
    run.resume(trainer, Checkpoints.LAST)
    trainer.save_checkpoint(tmp_path / "again.nne")  # loaded, not fitted: nothing is lost
    first, again = load_nne(run.checkpoint(Checkpoints.LAST)), load_nne(tmp_path / "again.nne")
    for group in ("fit", "rng", "optimizer", "params"):
        assert first.groups[group].keys() == again.groups[group].keys(), group
        for name, value in first.groups[group].items():
            np.testing.assert_array_equal(value, again.groups[group][name], err_msg=name)


def test_summary_line_when_the_best_epoch_precedes_initial_epoch(tmp_path, capsys):
    X, y, Xv, yv = _data()
    nn.set_seed(0)
    trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)),
                         nn.SGD(lr=0.05), seed=0)
    first = trainer.fit((X, y), epochs=3, val=(Xv, yv), n_iter_no_change=None, verbose=0)
    assert first.attrs["best_epoch"] == 3
    trainer.optimizer.lr = 0.0  # the weights stop moving: epochs 4 and 5 tie with epoch 3
    hist = trainer.fit((X, y), epochs=5, initial_epoch=3, val=(Xv, yv), n_iter_no_change=None,
                       verbose=1)
    assert hist["epoch"].tolist() == [4, 5] and hist.attrs["best_epoch"] == 3
    assert hist.attrs["best_value"] == first["val_loss"].iloc[-1]
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"best val_loss {first['val_loss'].iloc[-1]:.4f} at epoch 3" in line


def test_model_checkpoint_best_only_continues_after_resume(tmp_path):
    """ModelCheckpoint(save_best_only) keeps its best value across a resume: it writes the
    same files as an uninterrupted run."""
    from nnjit.train.builtin_callbacks import ModelCheckpoint

    X, y, Xv, yv = _data()
    cfg = _config(epochs=10)

    def saved(root, split):
        ckpt = ModelCheckpoint(str(root / "ck" / "e{epoch:02d}.nne"), monitor="val_accuracy",
                               save_best_only=True)
        if split:
            train_run(cfg, X, y, Xv, yv, root, epochs=split, callbacks=[ckpt])
            ckpt = ModelCheckpoint(str(root / "ck" / "e{epoch:02d}.nne"),
                                   monitor="val_accuracy", save_best_only=True)
            train_run(cfg, X, y, Xv, yv, root, resume=Checkpoints.LAST, callbacks=[ckpt])
        else:
            train_run(cfg, X, y, Xv, yv, root, callbacks=[ckpt])
        return sorted(p.name for p in (root / "ck").iterdir())

    straight, resumed = saved(tmp_path / "a", 0), saved(tmp_path / "b", 5)
    assert straight == resumed and len(straight) >= 2


# -- resume any number of times: 12 epochs + 4 + the rest == one uninterrupted fit ---------------
# Iris, Adam lr 0.04, patience 10 (min_delta 0.005): early stopping ends the fit at epoch 18, with
# bad-epoch counts of 1-5 at epoch 12 and 5-9 at epoch 16 and the plateau rule lowering the rate
# around both resume points, so a resume that lost any counter stops at another epoch.
STOP_EPOCHS = 60
SPLITS = (12, 16)


class _SaveAt(Callback):
    """Write a checkpoint at the end of the given epochs (inside the fit, as a run does)."""

    def __init__(self, folder, epochs):
        self.folder, self.epochs = folder, set(epochs)

    def on_epoch_end(self, trainer, epoch, logs):
        if epoch in self.epochs:
            trainer.save_checkpoint(self.folder / f"e{epoch}.nne", metadata={"epoch": epoch})


def _assert_same_checkpoint(path_a, path_b):
    a, b = load_nne(path_a), load_nne(path_b)
    assert a.groups.keys() == b.groups.keys()
    for group in a.groups:
        assert a.groups[group].keys() == b.groups[group].keys(), group
        for name, value in a.groups[group].items():
            np.testing.assert_array_equal(value, b.groups[group][name], err_msg=f"{group}/{name}")


def test_trainer_resumed_twice_equals_one_fit(tmp_path):
    """Trainer.fit(initial_epoch=) + save/load_checkpoint, 12 + 4 + rest, ReduceLROnPlateau,
    compiled early stopping and an EarlyStopping callback: same weights, history, stop epoch,
    and the checkpoint written at epoch 16 during the resumed fit equals the uninterrupted
    fit's (it used to hold the fit state loaded at epoch 12)."""
    X, y, Xv, yv = _data()

    def make():
        nn.set_seed(1)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 3))
        return nn.Trainer(model, nn.Adam(lr=0.04), seed=4)

    def fit(trainer, folder, epochs, initial_epoch=0):
        callbacks = [EarlyStopping("val_accuracy", patience=100), _SaveAt(folder, SPLITS)]
        sched = nn.schedulers.ReduceLROnPlateau(patience=1, factor=0.5, threshold=0.05)
        return trainer.fit(nn.DataLoader(X, y, batch_size=16, shuffle=True), epochs=epochs,
                           initial_epoch=initial_epoch, val=(Xv, yv), n_iter_no_change=10,
                           tol=0.005, scheduler=sched, schedule_epochs=STOP_EPOCHS,
                           callbacks=callbacks, verbose=False)

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    straight = make()
    hist_a = fit(straight, tmp_path / "a", STOP_EPOCHS)
    assert SPLITS[1] < len(hist_a) < STOP_EPOCHS, len(hist_a)
    assert hist_a.attrs["stop_reason"].startswith("early stopping")
    assert hist_a["lr"].iloc[SPLITS[0]:].nunique() > 1  # the plateau rule acts after a resume
    parts, start = [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "saved after epoch 12" was the symptom
        for end in (*SPLITS, STOP_EPOCHS):
            trainer = make()
            if start:
                trainer.load_checkpoint(tmp_path / "b" / f"e{start}.nne")
            parts.append(fit(trainer, tmp_path / "b", end, initial_epoch=start))
            start = end
    for epoch in SPLITS:
        _assert_same_checkpoint(tmp_path / "a" / f"e{epoch}.nne", tmp_path / "b" / f"e{epoch}.nne")
    cols = [c for c in hist_a.columns if c != "seconds"]
    pd.testing.assert_frame_equal(hist_a[cols], pd.concat(parts)[cols].reset_index(drop=True),
                                  check_exact=True)
    for key in ("stop_reason", "best_epoch", "best_value", "restored_best"):
        assert hist_a.attrs[key] == parts[-1].attrs[key], key
    for pa, pc in zip(straight.model.parameters(), trainer.model.parameters()):
        np.testing.assert_array_equal(pa.data, pc.data)


RESUME_SCHEDULERS = {
    "step": SchedulerConfig(kind=Schedulers.STEP, step_size=5, gamma=0.7),
    "plateau": SchedulerConfig(kind=Schedulers.PLATEAU, patience=1, factor=0.5, threshold=0.05),
}


@pytest.mark.parametrize("name", sorted(RESUME_SCHEDULERS))
def test_train_run_resumed_twice_equals_one_run(tmp_path, name):
    """train_run 12 epochs, resume to 16, resume to the end: the run's idps.csv, weights, stop
    epoch and every checkpoint equal the uninterrupted run's."""
    X, y, Xv, yv = _data()
    cfg = _config(epochs=STOP_EPOCHS, patience=10, min_delta=0.005, restore_best=True,
                  scheduler=RESUME_SCHEDULERS[name], optimizer=OptimizerConfig(lr=0.04))
    run_a, straight, hist_a = train_run(cfg, X, y, Xv, yv, tmp_path / "a")
    assert SPLITS[1] < len(hist_a) < STOP_EPOCHS, len(hist_a)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_run(cfg, X, y, Xv, yv, tmp_path / "b", epochs=SPLITS[0])
        train_run(cfg, X, y, Xv, yv, tmp_path / "b", epochs=SPLITS[1], resume=Checkpoints.LAST)
        nne = load_nne(tmp_path / "b" / cfg.config_hash() / "checkpoints" / "last.nne")
        assert float(nne.groups["fit"]["epoch"]) == SPLITS[1]  # was 12: the loaded state
        run_b, resumed, hist_b = train_run(cfg, X, y, Xv, yv, tmp_path / "b",
                                           resume=Checkpoints.LAST)
    pd.testing.assert_frame_equal(hist_a[COLS], hist_b[COLS], check_exact=True)
    assert straight.history_.attrs["stop_reason"].startswith("early stopping")
    assert resumed.history_.attrs["stop_reason"] == straight.history_.attrs["stop_reason"]
    for (na, a), (nb, b) in zip(straight.model.named_parameters(),
                                resumed.model.named_parameters()):
        np.testing.assert_array_equal(a.data, b.data, err_msg=na)
    assert run_a.saved_phases() == run_b.saved_phases()
    for phase in run_a.saved_phases():
        _assert_same_checkpoint(run_a.checkpoint(phase), run_b.checkpoint(phase))
