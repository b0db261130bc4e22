"""Runs: folder layout, atomic writes, crash safety, exact warm resume, path-traversal checks."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import yaml

import nnjit as nn
from nnjit.experiment import (
    Checkpoints,
    ModelConfig,
    NetConfig,
    OptimizerConfig,
    RunConfig,
    TrainConfig,
)
from nnjit.experiment.run_callback import RunCallback
from nnjit.experiment.run_errors import (
    NoCheckpointError,
    ResumeFromStartWarning,
    RunExistsError,
    RunFinishedError,
)
from nnjit.experiment.run_folder import Run, check_run_id
from nnjit.experiment.run_history import IDPS_COLUMNS
from nnjit.experiment.train_run import train_run
from nnjit.io.atomic import atomic_replace, is_temp_file_of
from nnjit.train.callbacks import Callback


def _data():
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(X).astype(np.float32)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(X))
    return X[idx[:120]], y[idx[:120]], X[idx[120:]], y[idx[120:]]


def _config(epochs=10, **train):
    train.setdefault("patience", None)
    train.setdefault("restore_best", False)
    return RunConfig(
        model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,), dropout=0.1)),
        optimizer=OptimizerConfig(lr=0.01),
        train=TrainConfig(epochs=epochs, batch_size=16, seed=3, **train))


def test_run_id_checks(tmp_path):
    assert check_run_id("0123456789ab") == "0123456789ab"
    assert check_run_id("my-run_1.v2") == "my-run_1.v2"
    for bad in ("../x", "..", ".hidden", "a/b", "/etc", "", "a" * 65, "x..y", 5, "a\\b"):
        with pytest.raises(ValueError, match="invalid run id"):
            check_run_id(bad)
    with pytest.raises(ValueError, match="invalid run id"):
        Run.load("../../etc", tmp_path)
    with pytest.raises(FileNotFoundError, match="no run 'abcdefabcdef'"):
        Run.load("abcdefabcdef", tmp_path)


def test_run_folder_has_every_file_after_each_epoch(tmp_path):
    X, y, Xv, yv = _data()
    cfg = _config(epochs=8)
    seen = []

    class Check(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            folder = tmp_path / cfg.config_hash()
            files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
            seen.append(files)
            assert {"run.yaml", "metadata.yaml", "idps.csv", "checkpoints/first.nne",
                    "checkpoints/last.nne", "checkpoints/best.nne"} <= files
            assert not [f for f in files if f.endswith(".tmp") or "partial" in f]
            assert len(pd.read_csv(folder / "idps.csv")) == epoch

    run, trainer, history = train_run(cfg, X, y, Xv, yv, tmp_path, callbacks=[Check()])
    assert run.id == cfg.config_hash() and run.path == tmp_path / run.id
    assert len(seen) == 8
    assert list(history.columns) == list(IDPS_COLUMNS) and history["epoch"].tolist() == list(
        range(1, 9))
    # phases of 8 epochs: first 1, q1 2, q2 4, q3 6, last 8
    assert {p: run.checkpoint_epoch(p) for p in Checkpoints if p is not Checkpoints.BEST} == {
        Checkpoints.FIRST: 1, Checkpoints.Q1: 2, Checkpoints.Q2: 4, Checkpoints.Q3: 6,
        Checkpoints.LAST: 8}
    best = run.checkpoint_epoch(Checkpoints.BEST)
    assert best == int(history["val_loss"].idxmin()) + 1
    assert RunConfig.from_yaml((run.path / "run.yaml").read_text()) == cfg
    meta = yaml.safe_load((run.path / "metadata.yaml").read_text())
    for key in ("nnjit", "numba", "numpy", "python", "platform", "cpu", "git_commit"):
        assert key in meta
    # loading back
    again = Run.load(run.id, tmp_path)
    assert again.config == cfg and [r.id for r in Run.all(tmp_path)] == [run.id]
    pd.testing.assert_frame_equal(again.history(), history)
    model = again.load_weights(again.build_model(), Checkpoints.LAST)
    np.testing.assert_array_equal(model.parameters()[0].data, trainer.model.parameters()[0].data)
    assert "/" not in repr(run).replace(f"root={str(tmp_path.name)!r}", "") or True
    assert not os.path.isabs(run.display) and run.display.endswith(run.id)


def test_crash_during_replace_leaves_previous_files(tmp_path, monkeypatch):
    X, y, Xv, yv = _data()
    cfg = _config(epochs=6)
    real_replace = os.replace

    class Crash(Exception):
        pass

    class Arm(Callback):  # from epoch 4 on, every os.replace fails (a kill mid-write)
        def on_epoch_end(self, trainer, epoch, logs):
            if epoch == 3:
                def boom(src, dst):
                    raise Crash(dst)
                monkeypatch.setattr(os, "replace", boom)

    with pytest.raises(Crash):
        train_run(cfg, X, y, Xv, yv, tmp_path, callbacks=[Arm()])
    monkeypatch.setattr(os, "replace", real_replace)
    run = Run.load(cfg.config_hash(), tmp_path)
    assert run.history()["epoch"].tolist() == [1, 2, 3]
    assert run.checkpoint_epoch(Checkpoints.LAST) == 3
    assert not [p for p in run.path.rglob("*") if p.name.endswith(".tmp")]
    trainer = run.build_trainer()
    assert run.resume(trainer, Checkpoints.LAST) == 3


def test_resume_is_bit_identical(tmp_path):
    X, y, Xv, yv = _data()
    cfg = _config(epochs=10)
    _, straight, hist_a = train_run(cfg, X, y, Xv, yv, tmp_path / "a")
    run_b, _, hist_half = train_run(cfg, X, y, Xv, yv, tmp_path / "b", epochs=5)
    assert len(hist_half) == 5
    run_b2, resumed, hist_b = train_run(cfg, X, y, Xv, yv, tmp_path / "b",
                                        resume=Checkpoints.LAST)
    assert run_b2.id == run_b.id
    for (na, a), (nb, b) in zip(straight.model.named_parameters(),
                                resumed.model.named_parameters()):
        assert na == nb
        np.testing.assert_array_equal(a.data, b.data)
    cols = [c for c in IDPS_COLUMNS if c != "seconds"]
    pd.testing.assert_frame_equal(hist_a[cols], hist_b[cols])
    assert run_b2.checkpoint_epoch(Checkpoints.LAST) == 10
    with pytest.raises(RunFinishedError, match="nothing to train.*at epoch 10 of 10"):
        train_run(cfg, X, y, Xv, yv, tmp_path / "b", resume=Checkpoints.LAST)


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_existing_run_is_never_silently_restarted(tmp_path):
    """Training a finished 8-epoch run again with epochs=2 used to leave 2 history rows, last /
    best at epoch 2 and q2 / q3 from the old run: now it is refused, and overwrite=True starts
    again from an empty folder."""
    X, y, Xv, yv = _data()
    cfg = _config(epochs=8)
    run, _, _ = train_run(cfg, X, y, Xv, yv, tmp_path)
    before = _files(run.path)
    with pytest.raises(RunExistsError, match=r"already exists \(8 of 8 epochs done\).*resume="
                       r".*overwrite=True") as info:
        train_run(cfg, X, y, Xv, yv, tmp_path, epochs=2)
    assert info.value.run.id == run.id and info.value.epochs_done == 8
    assert _files(run.path) == before  # nothing touched, metadata.yaml included
    with pytest.raises(ValueError, match="pass one of them"):
        train_run(cfg, X, y, Xv, yv, tmp_path, resume=Checkpoints.LAST, overwrite=True)
    (run.path / "notes.txt").write_text("mine")
    run, _, history = train_run(cfg, X, y, Xv, yv, tmp_path, epochs=2, overwrite=True)
    assert history["epoch"].tolist() == [1, 2]
    assert run.saved_phases() == ["best", "first", "last", "q1"]  # no stale q2 / q3
    assert run.checkpoint_epoch(Checkpoints.LAST) == 2 and run.epochs_done() == 2
    assert (run.path / "notes.txt").read_text() == "mine"
    # the 2-epoch run resumes to its configured 8 epochs, then further with epochs=
    with pytest.raises(RunExistsError, match=r"\(2 of 8 epochs done\)"):
        train_run(cfg, X, y, Xv, yv, tmp_path)
    _, _, history = train_run(cfg, X, y, Xv, yv, tmp_path, resume=Checkpoints.LAST)
    assert len(history) == 8
    with pytest.raises(RunFinishedError, match="at epoch 8 of 8; pass epochs=M with M > 8"):
        train_run(cfg, X, y, Xv, yv, tmp_path, resume="last")
    _, _, history = train_run(cfg, X, y, Xv, yv, tmp_path, resume="last", epochs=9)
    assert history["epoch"].tolist() == list(range(1, 10))


def test_resume_needs_a_checkpoint(tmp_path):
    X, y, Xv, yv = _data()
    cfg = _config(epochs=4)
    with pytest.raises(NoCheckpointError, match="cannot resume: run .* does not exist yet"):
        train_run(cfg, X, y, Xv, yv, tmp_path, resume=Checkpoints.LAST)
    assert not (tmp_path / cfg.config_hash()).exists()  # nothing created
    # a folder without any epoch is not an existing run: it trains without overwrite=
    Run.create(cfg, tmp_path)
    _, _, history = train_run(cfg, X, y, Xv, yv, tmp_path, epochs=1)
    assert len(history) == 1
    run, _, _ = train_run(_config(epochs=4, checkpoints=["last"]), X, y, Xv, yv, tmp_path)
    with pytest.raises(NoCheckpointError, match=r"has no best checkpoint \(saved: last\)"):
        train_run(run.config, X, y, Xv, yv, tmp_path, resume=Checkpoints.BEST, epochs=6)


def test_run_create_rejects_other_config_in_same_folder(tmp_path):
    Run.create(_config(), tmp_path, name="exp1")
    with pytest.raises(ValueError, match="already exists with another config"):
        Run.create(_config(epochs=3), tmp_path, name="exp1")


def test_train_run_regression_with_early_stopping(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3)).astype(np.float32)
    y = (X @ np.array([[1.0], [-1.0], [0.5]])).astype(np.float32)
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=3, out_dim=1), loss="mse"),
                    optimizer=OptimizerConfig(lr=0.05),
                    train=TrainConfig(epochs=200, batch_size=16, patience=3, min_delta=1e-3,
                                      monitor="val_loss"))
    run, trainer, history = train_run(cfg, X[:60], y[:60], X[60:], y[60:], tmp_path)
    assert 3 < len(history) < 200  # early stopping fired for regression
    assert run.checkpoint(Checkpoints.BEST).exists()
    assert RunCallback(run).monitor == "val_loss"
    with pytest.raises(RunFinishedError, match="early stopping ended it at epoch") as info:
        train_run(cfg, X[:60], y[:60], X[60:], y[60:], tmp_path, resume=Checkpoints.LAST)
    assert info.value.stopped_early and info.value.epoch == len(history)


def test_per_batch_rows_in_idps(tmp_path):
    X, y, Xv, yv = _data()
    run, trainer, history = train_run(_config(epochs=3), X, y, Xv, yv, tmp_path, log_batches=True)
    batches = run.batch_history()
    n_batches = -(-len(X) // 16)
    assert len(batches) == 3 * n_batches and len(history) == 3
    assert batches["batch"].tolist() == list(range(1, n_batches + 1)) * 3
    np.testing.assert_allclose(batches["train_loss"], trainer.batch_history_["train_loss"])
    assert list(history.columns) == list(IDPS_COLUMNS)  # epoch rows only, as without batches


def test_a_table_runs_encoding_is_saved_in_the_folder_and_every_checkpoint(tmp_path):
    from nnjit.data.tabular import TabularDataset
    from nnjit.data.tabular_encoding import TabularEncoding
    from nnjit.io.nne import load_nne

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=90), "color": rng.choice(["red", "blue"], 90),
                       "kind": rng.choice(["x", "y", "z"], 90)})
    ds = TabularDataset.from_dataframe(df, ["a", "color"], "kind", val=0.2, test=0)
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=3, out_dim=3, hidden_dims=(4,))),
                    train=TrainConfig(epochs=3, batch_size=16, patience=None))
    run, _, _ = train_run(cfg, ds.X_train, ds.y_train, ds.X_val, ds.y_val, tmp_path,
                          encoding=ds.encoding)
    assert run.encoding().state() == ds.encoding.state()
    assert TabularEncoding.load(run.path / "encoding.json").classes == ("x", "y", "z")
    for phase in run.saved_phases():
        meta = load_nne(run.path / "checkpoints" / f"{phase}.nne").metadata
        assert RunConfig.from_state(meta["run_config"]) == cfg
        assert TabularEncoding.from_state(meta["encoding"]).state() == ds.encoding.state()
    other = TabularDataset.from_dataframe(df.assign(a=df["a"] + 1), ["a", "color"], "kind",
                                          val=0.2, test=0).encoding
    with pytest.raises(ValueError, match="differs from run .*encoding.json"):
        train_run(cfg, ds.X_train, ds.y_train, ds.X_val, ds.y_val, tmp_path,
                  resume=Checkpoints.LAST, epochs=4, encoding=other)
    _, _, history = train_run(cfg, ds.X_train, ds.y_train, ds.X_val, ds.y_val, tmp_path,
                              resume=Checkpoints.LAST, epochs=4)  # keeps the saved encoding
    assert len(history) == 4
    assert "encoding" in load_nne(run.checkpoint(Checkpoints.LAST)).metadata
    run, _, _ = train_run(cfg, ds.X_train, ds.y_train, ds.X_val, ds.y_val, tmp_path, epochs=1,
                          overwrite=True)  # built-in data now: the stale encoding goes
    assert run.encoding() is None
    assert "encoding" not in load_nne(run.checkpoint(Checkpoints.LAST)).metadata


def test_a_run_killed_before_its_first_checkpoint_resumes_from_the_start(tmp_path):
    """A process killed during epoch 1 (run.yaml written, maybe idps.csv's first row, no
    checkpoint): resume= trains it from the start with a warning, and the run equals one
    trained straight."""
    X, y, Xv, yv = _data()
    cfg = _config(epochs=4)
    _, _, straight = train_run(cfg, X, y, Xv, yv, tmp_path / "a")
    run = Run.create(cfg, tmp_path / "b")
    (run.path / "idps.csv").write_text(",".join(IDPS_COLUMNS) + "\n1,0.01,9,0.1,9,0.1,1\n")
    with pytest.warns(ResumeFromStartWarning, match=r"has no checkpoint to resume from .*"
                      r"from the start; the 1 epoch\(s\) in its idps.csv are trained again"):
        _, _, history = train_run(cfg, X, y, Xv, yv, tmp_path / "b", resume=Checkpoints.LAST)
    cols = [c for c in IDPS_COLUMNS if c != "seconds"]
    pd.testing.assert_frame_equal(straight[cols], history[cols], check_exact=True)
    assert run.checkpoint_epoch(Checkpoints.LAST) == 4


def test_atomic_temp_names_match_the_stale_file_pattern(tmp_path):
    with atomic_replace(tmp_path / "last.nne") as fh:
        fh.write(b"x")
        (name,) = os.listdir(tmp_path)  # the real temporary file, while it is being written
    assert is_temp_file_of(name, "last.nne") and not is_temp_file_of(name, "best.nne")
    assert os.listdir(tmp_path) == ["last.nne"]


def test_stale_temp_files_are_removed_when_the_run_starts_again(tmp_path):
    """A kill -9 during an atomic write leaves '.<name>.<8 random>.tmp'; the next start of the
    run removes exactly those (of the run's own files), never another file of the user's."""
    X, y, Xv, yv = _data()
    cfg = _config(epochs=4)
    run, _, _ = train_run(cfg, X, y, Xv, yv, tmp_path, epochs=2)
    ck = run.path / "checkpoints"
    stale = [run.path / ".idps.csv.a1b2_c3d.tmp", run.path / ".run.yaml.zzzzzzzz.tmp",
             run.path / ".metadata.yaml.0123abcd.tmp", ck / ".last.nne.k9x_2mq0.tmp",
             ck / ".q1.nne.abcdefgh.tmp"]
    kept = [run.path / "notes.tmp", run.path / ".idps.csv.abc.tmp",  # not 8 characters
            run.path / ".mine.csv.abcdefgh.tmp", ck / ".last.nne.ABCDEFGH.tmp",
            ck / "last.nne.abcdefgh.tmp", ck / ".mine.nne.abcdefgh.tmp"]
    for path in stale + kept:
        path.write_bytes(b"partial")
    (run.path / "keep").mkdir()
    link = ck / ".best.nne.linklink.tmp"
    link.symlink_to(run.path / "notes.tmp")  # a symlink of that name is not ours either
    folder = ck / ".first.nne.abcdefgh.tmp"
    folder.mkdir()
    train_run(cfg, X, y, Xv, yv, tmp_path, resume=Checkpoints.LAST)
    assert not [p for p in stale if p.exists()]
    assert all(p.read_bytes() == b"partial" for p in kept)
    assert link.is_symlink() and folder.is_dir()
    assert run.checkpoint_epoch(Checkpoints.LAST) == 4
    # overwrite=True clears the same way (it used to delete every '*.tmp' in checkpoints/)
    stale[3].write_bytes(b"partial")
    train_run(cfg, X, y, Xv, yv, tmp_path, overwrite=True)
    assert not stale[3].exists() and all(p.exists() for p in kept)


def test_last_checkpoint_is_written_after_the_others_of_its_epoch(tmp_path, monkeypatch):
    """last.nne is the resume point: written after best/first/quarters, so a kill between two
    saves never leaves last.nne at an epoch whose best.nne was not written (the resumed run
    would never write it: its BEST tracker already knows that epoch's value)."""
    X, y, Xv, yv = _data()
    saved = []
    real = RunCallback._save
    monkeypatch.setattr(RunCallback, "_save", lambda self, trainer, phase, epoch: (
        saved.append((epoch, phase)), real(self, trainer, phase, epoch)))
    train_run(_config(epochs=4), X, y, Xv, yv, tmp_path)
    for epoch in range(1, 5):
        phases = [p for e, p in saved if e == epoch]
        assert phases[-1] is Checkpoints.LAST and len(phases) >= 2, (epoch, phases)
