"""Listing and opening runs whose files are damaged, hostile or symlinked out of the runs root:
``nnjit runs list`` skips them with a warning line and lists the rest; ``runs show``,
``report``, ``predict`` and ``train --resume`` refuse them with one line (exit 2)."""

from __future__ import annotations

import os
import shutil
import time
import warnings

import pytest

from nnjit.cli import main
from nnjit.experiment import ModelConfig, NetConfig, RunConfig, TrainConfig
from nnjit.experiment.run_errors import RunFileError
from nnjit.experiment.run_folder import Run
from tests.experiment.test_safe_yaml import billion_laughs
from tests.test_cli import _one_line_error, nnjit_command


def _config(width: int) -> RunConfig:
    return RunConfig(model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(width,))),
                     train=TrainConfig(epochs=4, batch_size=16, patience=None), data="iris")


#: Damaged runs, by what is wrong with them, and the words their warning line must hold.
DAMAGE = {
    "alias": "found the alias *a",
    "config": "RunConfig: unknown key 'oops'",
    "list": "RunConfig.from_state expects a mapping, got list",
    "bytes": "not UTF-8 text",
    "folder_out": "is a symlink to outside the runs root",
    "yaml_out": "run.yaml is a symlink to outside the runs root",
    "dev_zero": "run.yaml is a symlink to outside the runs root",
    "yaml_in": "run.yaml is a symbolic link: nnjit does not follow links inside a run folder",
}


@pytest.fixture
def runs(tmp_path):
    """``(root, good ids, {damage: id})``: two good runs and one run per kind of damage."""
    root, outside = tmp_path / "runs", tmp_path / "outside"
    outside.mkdir()
    good = [Run.create(_config(w), root).id for w in (8, 9)]
    bad = {}
    for width, kind in enumerate(DAMAGE, start=10):
        run = Run.create(_config(width), root)
        bad[kind] = run.id
        yaml_path = run.path / "run.yaml"
        if kind == "alias":
            yaml_path.write_text(billion_laughs())
        elif kind == "config":
            yaml_path.write_text(run.config.to_yaml() + "oops: 1\n")
        elif kind == "list":
            yaml_path.write_text("- 1\n- 2\n")
        elif kind == "bytes":
            yaml_path.write_bytes(b"model: \xff\xfe\n")
        elif kind == "folder_out":
            shutil.move(run.path, outside / run.id)
            os.symlink(outside / run.id, run.path)
        elif kind == "yaml_out":
            (outside / "run.yaml").write_text(run.config.to_yaml())  # valid, but outside
            yaml_path.unlink()
            os.symlink(outside / "run.yaml", yaml_path)
        elif kind == "dev_zero":
            yaml_path.unlink()
            os.symlink("/dev/zero", yaml_path)
        elif kind == "yaml_in":  # another run's run.yaml, inside the runs root
            (run.path / "own.yaml").write_text(run.config.to_yaml())
            yaml_path.unlink()
            os.symlink(run.path / "own.yaml", yaml_path)
    (root / "notes").mkdir()  # not a run (no run.yaml): not listed, no warning
    return root, sorted(good), bad


def test_scan_and_all_skip_each_bad_run_and_name_it(runs):
    root, good, bad = runs
    start = time.perf_counter()
    found, skipped = Run.scan(root)
    assert time.perf_counter() - start < 2
    assert [r.id for r in found] == good
    assert sorted(e.folder for e in skipped) == sorted(f"runs/{i}" for i in bad.values())
    for kind, words in DAMAGE.items():
        error = next(e for e in skipped if e.folder.endswith(bad[kind]))
        assert words in str(error) and bad[kind] in str(error), (kind, str(error))
        assert len(str(error)) < 400 and "\n" not in str(error)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [r.id for r in Run.all(root)] == good
    assert len(caught) == len(bad)
    assert all(str(w.message).startswith("Run.all: skipped ") for w in caught)


@pytest.mark.parametrize("kind", DAMAGE)
def test_load_refuses_a_bad_run_with_a_run_file_error(runs, kind):
    root, _, bad = runs
    with pytest.raises(RunFileError, match=DAMAGE[kind].replace("*", r"\*")) as info:
        Run.load(bad[kind], root)
    assert isinstance(info.value, ValueError) and info.value.run is None


def test_metadata_that_cannot_be_read_is_a_run_file_error(runs, tmp_path):
    root, good, _ = runs
    run = Run.load(good[0], root)
    assert run.metadata()["python"]  # what Run.create wrote
    meta = run.path / "metadata.yaml"
    meta.write_text("python: &v 3\nnnjit: *v\n")
    with pytest.raises(RunFileError, match=r"invalid .*/metadata.yaml: line 2, column 8: found "
                                           r"the alias \*v"):
        run.metadata()
    meta.write_text("- a list\n")
    with pytest.raises(RunFileError, match="metadata.yaml: expected a mapping, got list"):
        run.metadata()
    meta.unlink()
    os.symlink(tmp_path / "outside", meta)
    with pytest.raises(RunFileError, match="metadata.yaml is a symlink to outside"):
        run.metadata()
    meta.unlink()
    assert run.metadata() == {}


def test_a_missing_run_lists_at_most_ten_others(tmp_path):
    for width in range(1, 14):
        Run.create(_config(width), tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no run 'nope' in .*; runs: (\w+, ){9}\w+ and 3 "
                                                r"more$"):
        Run.load("nope", tmp_path)


def test_metadata_too_large_to_read_back_is_refused_before_writing(tmp_path):
    with pytest.raises(ValueError, match="more than the 65536 nnjit reads back"):
        Run.create(_config(8), tmp_path, metadata={"notes": "x" * 70_000})
    assert not (tmp_path / _config(8).config_hash()).exists()


def test_runs_list_command_skips_bad_runs_with_a_warning_line_each(runs):
    root, good, bad = runs
    proc = nnjit_command("runs", "list", "--root", root.name, cwd=root.parent, timeout=120)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines()[1:]]
    assert listed == good
    lines = proc.stderr.splitlines()
    assert len(lines) == len(bad) and "Traceback" not in proc.stderr, proc.stderr
    for kind, run_id in bad.items():
        line = next(x for x in lines if x.startswith(f"nnjit runs list: skipped runs/{run_id}:"))
        assert DAMAGE[kind] in line and len(line) < 400


def test_runs_list_skips_a_run_whose_history_is_damaged(runs, capsys):
    root, good, _ = runs
    (root / good[0] / "idps.csv").write_bytes(b"\x00\xff garbage\n1,2\n1,2,3,4\n")
    assert main(["runs", "list", "--root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[1:]] == good[1:]
    assert f"skipped {root.name}/{good[0]}: cannot read its idps.csv" in err
    assert main(["runs", "show", good[0], "--root", str(root)]) == 0  # the rest is shown
    out, err = capsys.readouterr()
    assert "config:" in out and "epochs: 0" in out and "idps.csv" in err


def test_runs_show_and_report_refuse_a_bad_run_with_one_line(runs):
    root, _, bad = runs
    proc = nnjit_command("runs", "show", bad["alias"], cwd=root.parent, timeout=120)
    _one_line_error(proc, "nnjit runs show: invalid runs/", "/run.yaml: line 5, column 7: "
                    "found the alias *a")
    assert len(proc.stderr) < 300
    proc = nnjit_command("report", bad["folder_out"], cwd=root.parent, timeout=120)
    _one_line_error(proc, f"nnjit report: run folder runs/{bad['folder_out']} is a symlink to "
                    "outside the runs root")


def test_show_warns_about_bad_metadata_and_report_refuses_it(runs, capsys):
    root, good, _ = runs
    (root / good[0] / "metadata.yaml").write_text("a: [1, 2\n")
    assert main(["runs", "show", good[0], "--root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert "config:" in out and "metadata:" not in out
    assert err.startswith(f"nnjit runs show: invalid {root.name}/{good[0]}/metadata.yaml: line")
    assert main(["report", good[0], "--root", str(root)]) == 2
    assert "metadata.yaml: line" in capsys.readouterr().err


def test_predict_and_train_resume_refuse_a_run_outside_the_root(runs, tmp_path):
    root, _, bad = runs
    rows = tmp_path / "rows.csv"
    rows.write_text("a,b,c,d\n1,2,3,4\n")
    proc = nnjit_command("predict", bad["yaml_out"], "--data", rows, "--out", tmp_path / "p.csv",
                         cwd=root.parent, timeout=120)
    _one_line_error(proc, f"nnjit predict: runs/{bad['yaml_out']}/run.yaml is a symlink to "
                    "outside the runs root")
    config = tmp_path / "cfg.yaml"
    config.write_text(_config(10 + list(DAMAGE).index("folder_out")).to_yaml())
    before = sorted(os.listdir(tmp_path / "outside" / bad["folder_out"]))
    proc = nnjit_command("train", config, "--resume", "last", cwd=root.parent, timeout=120)
    _one_line_error(proc, f"nnjit train: run folder runs/{bad['folder_out']} is a symlink to "
                    "outside the runs root")
    assert sorted(os.listdir(tmp_path / "outside" / bad["folder_out"])) == before


def test_train_refuses_a_billion_laughs_config_fast_with_one_short_line(tmp_path):
    config = tmp_path / "laughs.yaml"
    config.write_text(billion_laughs())
    proc = nnjit_command("train", config, cwd=tmp_path, timeout=60)
    _one_line_error(proc, f"invalid config {config}: not valid YAML at line 5, column 7: found "
                    "the alias *a: aliases (*name) are not allowed")
    assert len(proc.stderr) < 400 + len(str(config))
    assert not (tmp_path / "runs").exists()


def test_runs_list_shows_the_monitored_metric_at_the_best_checkpoints_epoch(tmp_path, capsys,
                                                                             monkeypatch):
    """A run monitoring val_accuracy is listed with its best val_accuracy and the epoch of its
    best checkpoint (issue 25, item 3: the listing showed the lowest val_loss of any epoch)."""
    monkeypatch.chdir(tmp_path)
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,))),
                    train=TrainConfig(epochs=12, batch_size=16, patience=None,
                                      monitor="val_accuracy", checkpoints=["best"]),
                    data="iris")
    (tmp_path / "run.yaml").write_text(cfg.to_yaml())
    assert main(["train", "run.yaml", "-q"]) == 0
    capsys.readouterr()
    assert main(["runs", "list"]) == 0
    header, line = capsys.readouterr().out.splitlines()
    run = Run.load(line.split()[0], tmp_path / "runs")
    history = run.history()
    best_epoch = run.checkpoint_epoch("best")
    best = history.loc[history["epoch"] == best_epoch, "val_accuracy"].item()
    assert "best (the monitored metric)" in header
    assert f"val_accuracy {best:.4g} @ {best_epoch}" in line, (line, history)


def test_run_yaml_says_every_value_that_made_the_run_defaults_included(tmp_path):
    """run.yaml (and so runs show and the report's config section) holds the defaulted values
    too: learning rate, epochs, batch size, ... (issue 25, item 16); the run id is unchanged."""
    cfg = _config(8)
    run = Run.create(cfg, tmp_path / "runs")
    recorded = (run.path / "run.yaml").read_text()
    for key in ("lr:", "epochs:", "batch_size:", "kind:", "seed:"):
        assert key in recorded, recorded
    assert RunConfig.from_yaml(recorded) == cfg and run.id == cfg.config_hash()
