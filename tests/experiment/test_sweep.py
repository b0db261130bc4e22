"""Sweeps: grids of configurations trained as runs on a thread pool, a Dask LocalCluster and from
the installed ``nnjit sweep`` command; grid parsing and the errors given before anything runs.

Every run is a tiny MLP on the bundled Iris data for 2 epochs (the float32 build every other test
compiles). The LocalCluster test is the only one that starts processes (a few seconds each)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd
import pytest

import nnjit as nn
from nnjit.cli import main
from nnjit.experiment import (
    ModelConfig,
    NetConfig,
    OptimizerConfig,
    RunConfig,
    TrainConfig,
    sweep,
)
from nnjit.experiment.data import load_run_data
from nnjit.experiment.grid import expand_grid, grid_keys, parse_grid_entry
from nnjit.experiment.run_folder import Run
from nnjit.experiment.train_run import train_run
from nnjit.experiment.sweep import RunsExistError, import_distributed
from tests.test_cli import REPO, nnjit_command

EPOCHS = 2


def _config(**train) -> RunConfig:
    return RunConfig(model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,))),
                     optimizer=OptimizerConfig(lr=0.01),
                     train=TrainConfig(epochs=EPOCHS, batch_size=16, seed=1, **train),
                     data="iris")


def _idps(folder) -> pd.DataFrame:
    return pd.read_csv(folder / "idps.csv").drop(columns="seconds")


# -- grids -----------------------------------------------------------------------------------
def test_grid_expands_every_combination_in_order():
    points = expand_grid(_config(), {"optimizer.lr": [1e-3, 1e-2],
                                     "model.net.hidden_dims": [[4], [8, 8]]})
    assert [p.values for p in points] == [
        {"optimizer.lr": 1e-3, "model.net.hidden_dims": [4]},
        {"optimizer.lr": 1e-3, "model.net.hidden_dims": [8, 8]},
        {"optimizer.lr": 1e-2, "model.net.hidden_dims": [4]},
        {"optimizer.lr": 1e-2, "model.net.hidden_dims": [8, 8]}]
    assert points[1].config.optimizer.lr == 1e-3
    assert points[1].config.model.net.hidden_dims == (8, 8)
    assert points[1].config.train.seed == 1  # the rest of the base config stays
    # a whole section, including none at all; a combination that is no config is kept with why
    points = expand_grid(_config(), {"scheduler": [None, {"kind": "step", "step_size": 1}],
                                     "optimizer.momentum": [0.0, 0.5]})
    assert points[0].config.scheduler is None and points[2].config.scheduler.step_size == 1
    assert points[1].config is None and "momentum does not apply to kind 'adam'" in \
        points[1].error


@pytest.mark.parametrize("grid, message", [
    ({"optimizer.lrr": [1]}, r"grid key 'optimizer.lrr': no setting 'lrr' under 'optimizer'; "
                             r"valid keys under 'optimizer': optimizer.kind, optimizer.lr, "),
    ({"optimiser.lr": [1]}, r"no setting 'optimiser'; valid keys: model, optimizer, scheduler"),
    ({"optimizer.lr.x": [1]}, r"optimizer.lr is a setting, not a section"),
    ({"optimizer.lr": 0.01}, r"grid\['optimizer.lr'\] must be a non-empty list of values"),
    ({"optimizer.lr": []}, r"must be a non-empty list"),
    ({"optimizer": [{}], "optimizer.lr": [1]}, r"grid keys 'optimizer' and 'optimizer.lr' "
                                               r"overlap"),
    ({}, r"grid must be a non-empty mapping"),
    ({f"train.seed": list(range(101)), "optimizer.lr": [0.1] * 100}, r"10100 configurations"),
])
def test_bad_grid_names_the_key_before_anything_runs(grid, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        sweep(_config(), grid, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_grid_keys_cover_every_setting():
    keys = grid_keys()
    assert {"optimizer.lr", "model.net.hidden_dims", "train.epochs", "scheduler.step_size",
            "scheduler", "data"} <= set(keys)


@pytest.mark.parametrize("entry, expected", [
    ("optimizer.lr=1e-3,1e-2", ("optimizer.lr", [0.001, 0.01])),
    ("model.net.hidden_dims=[64],[128, 64]", ("model.net.hidden_dims", [[64], [128, 64]])),
    ("optimizer.kind=adam,sgd", ("optimizer.kind", ["adam", "sgd"])),
    ("scheduler=null,{kind: step, step_size: 5}",
     ("scheduler", [None, {"kind": "step", "step_size": 5}])),
    ("data='a,b.csv'", ("data", ["a,b.csv"])),
])
def test_grid_entries_are_read_as_plain_yaml(entry, expected):
    assert parse_grid_entry(entry) == expected


@pytest.mark.parametrize("entry, message", [
    ("optimizer.lr", r"expected KEY=V1,V2"),
    ("=1,2", r"expected KEY=V1,V2"),
    ("optimizer.lr=", r"no values after '='"),
    ("optimizer.lr=[1e-3,", r"not a plain YAML list"),
    ("optimizer.lr=!!python/name:os.system", r"not a plain YAML list"),
])
def test_bad_grid_entries_are_refused(entry, message):
    with pytest.raises(ValueError, match=message):
        parse_grid_entry(entry)


def test_without_dask_a_client_says_which_extra_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'nnjit\[distributed\]'"):
        import_distributed()
    with pytest.raises(ImportError, match=r"nnjit\[distributed\]"):  # before anything runs
        sweep(_config(), {"optimizer.lr": [0.01]}, client="tcp://127.0.0.1:8786",
              root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


# -- thread pool -----------------------------------------------------------------------------
def test_thread_pool_sweep_trains_each_config_as_its_own_run(tmp_path):
    root = tmp_path / "runs"
    seen = []
    frame = sweep(_config(), {"optimizer.lr": [0.01, 0.05]}, root=root, workers=2,
                  on_result=seen.append)
    assert list(frame.columns[:3]) == ["optimizer.lr", "status", "run_folder"]
    assert frame["optimizer.lr"].tolist() == [0.01, 0.05]
    assert frame["status"].tolist() == ["ok", "ok"] and len(seen) == 2
    assert frame["worker"].str.endswith(f":{os.getpid()}").all()
    assert (frame["error"] == "").all()
    for row in frame.itertuples():
        config = _config().replace(optimizer=OptimizerConfig(lr=row[1]))
        folder = root / config.config_hash()
        assert row.run_folder == os.path.join(str(root), config.config_hash())
        assert {"run.yaml", "idps.csv", "metadata.yaml"} <= {p.name for p in folder.iterdir()}
        assert (folder / "checkpoints" / "last.nne").is_file()
        history = pd.read_csv(folder / "idps.csv")
        assert row.epochs == len(history) == EPOCHS
        best = history.loc[history["val_loss"].idxmin()]
        assert (row.best_epoch, row.monitor, row.best) == (best["epoch"], "val_loss",
                                                            best["val_loss"])
        assert row.val_accuracy == best["val_accuracy"]
        assert Run.load(config.config_hash(), root).metadata()["data"] == "iris"
    saved = pd.read_csv(frame.attrs["results_csv"])
    assert saved["run_folder"].tolist() == frame["run_folder"].tolist()
    assert saved["best"].tolist() == pytest.approx(frame["best"].tolist(), rel=1e-12)

    # two runs in two threads at once train exactly as one run alone (nnjit train's way)
    config = _config().replace(optimizer=OptimizerConfig(lr=0.05))
    data = load_run_data("iris", False, config.train.seed)
    nn.set_seed(12345)  # a lone run seeds itself: the global generator's state does not matter
    train_run(config, data.X_train, data.y_train, data.X_val, data.y_val, tmp_path / "alone")
    pd.testing.assert_frame_equal(_idps(tmp_path / "alone" / config.config_hash()),
                                  _idps(root / config.config_hash()))


def test_failing_runs_are_recorded_and_the_others_finish(tmp_path):
    root = tmp_path / "runs"
    good = _config()
    misfit = good.replace(model=ModelConfig(net=NetConfig(in_dim=5, out_dim=3)))
    no_metric = _config(monitor="val_f1")  # fails at the end of its first epoch
    frame = sweep([good, misfit, no_metric], root=root, workers=2)
    assert list(frame.columns[:3]) == ["model.net.in_dim", "model.net.hidden_dims",
                                       "train.monitor"]
    assert frame["status"].tolist() == ["ok", "failed", "failed"]
    assert frame["epochs"].tolist()[0] == EPOCHS
    assert frame["error"][1] == ("ValueError: model.net.in_dim is 5 but the data iris have 4 "
                                 "input features; set in_dim: 4")
    assert not (root / misfit.config_hash()).exists()  # checked before the folder is made
    assert frame["error"][2].startswith("ValueError: ") and "val_f1" in frame["error"][2]
    assert pd.isna(frame["epochs"][1]) and frame["epochs"][2] == 0  # no folder; no epoch
    assert (root / good.config_hash() / "checkpoints" / "last.nne").is_file()

    # an existing run is refused before anything runs, then kept as it is with "resume"
    with pytest.raises(RunsExistError, match=rf"{good.config_hash()} \({EPOCHS} epochs\).*"
                                              "existing='resume'"):
        sweep([good], root=root)
    again = sweep([good, good.replace(train=good.train.replace(seed=2))], root=root,
                  existing="resume")
    assert again["status"].tolist() == ["finished", "ok"]
    assert again["best"][0] == frame["best"][0]

    with pytest.raises(ValueError, match=r"configurations \(the config\) and \(the config\) are "
                                         "the same run"):
        sweep([good, good], root=root, existing="overwrite")
    with pytest.raises(ValueError, match=r"has no data: set 'data' in the config or pass data="):
        sweep([good.replace(data=None)], root=root)
    with pytest.raises(ValueError, match=r"workers must be an int >= 1, got 0"):
        sweep([good], root=tmp_path / "new", workers=0)
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    with pytest.raises(OSError):  # the table cannot be written: nothing trains
        sweep([good], root=not_a_folder)
    assert not (tmp_path / "new").exists()


# -- Dask ------------------------------------------------------------------------------------
def test_local_cluster_sweep_runs_in_worker_processes(tmp_path):
    """Two worker processes of one thread each; the arrays travel once to each of them, the
    configs as plain dicts, the compiled loop is loaded by each worker from the on-disk cache."""
    distributed = pytest.importorskip("distributed") if not os.environ.get("CI") \
        else import_distributed()  # CI installs the extra: a missing dask fails there
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(np.asarray(X, np.float32))
    X_fit, X_val, y_fit, y_val = nn.datasets.train_test_split(X, y, 0.2, seed=0)
    base = _config().replace(data=None)
    # the build the workers load: compiled (or loaded) here, written to numba's on-disk cache
    train_run(base, X_fit, y_fit, X_val, y_val, tmp_path / "warm", epochs=1)
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])  # this checkout
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, memory_limit=0,
                                  env={"PYTHONPATH": path}) as cluster, \
            distributed.Client(cluster) as client:
        worker_pids = set(client.run(os.getpid).values())
        frame = sweep(base, {"optimizer.lr": [0.01, 0.05], "model.net.hidden_dims": [[8], [4]]},
                      (X_fit, y_fit, X_val, y_val), client, root=tmp_path / "runs")
    assert frame["status"].tolist() == ["ok"] * 4, frame["error"].tolist()
    pids = {int(w.rsplit(":", 1)[1]) for w in frame["worker"]}
    assert pids <= worker_pids and os.getpid() not in pids
    for row in frame.itertuples():
        assert row.epochs == EPOCHS and np.isfinite(row.best)
        assert (tmp_path / row.run_folder / "checkpoints" / "best.nne").is_file()
    # the same config trained here gives the same history as on a worker process
    lone = base.replace(optimizer=OptimizerConfig(lr=0.05))
    train_run(lone, X_fit, y_fit, X_val, y_val, tmp_path / "alone")
    pd.testing.assert_frame_equal(_idps(tmp_path / "alone" / lone.config_hash()),
                                  _idps(tmp_path / "runs" / lone.config_hash()))


# -- the command line ------------------------------------------------------------------------
def test_nnjit_sweep_command(tmp_path, capsys, monkeypatch):
    (tmp_path / "iris.yaml").write_text(_config().to_yaml(), encoding="utf-8")
    grid = ["--grid", "optimizer.lr=1e-2,5e-2", "--grid", "model.net.hidden_dims=[8],[4, 4]"]
    out = nnjit_command("sweep", "iris.yaml", *grid, "--workers", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("nnjit sweep: [") == 4  # one progress line per run
    table = pd.read_csv(tmp_path / out.stdout.splitlines()[-1].removeprefix("wrote "))
    assert table["status"].tolist() == ["ok"] * 4
    assert table["model.net.hidden_dims"].tolist() == ["[8]", "[4, 4]", "[8]", "[4, 4]"]
    for folder in table["run_folder"]:
        assert folder.startswith("runs/") and folder in out.stdout
        assert (tmp_path / folder / "run.yaml").is_file()

    # the failures, in this process (the same main() the command runs; no second start-up)
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "iris.yaml", *grid]) == 2
    err = capsys.readouterr().err
    assert "4 of the sweep's runs already exist" in err and "--resume" in err
    assert main(["sweep", "iris.yaml", "--grid", "model.net.in_dim=4,5", "--root", "other",
                 "-q"]) == 1
    out, err = capsys.readouterr()
    assert "1 of 2 runs failed or were invalid" in err
    assert "ValueError: model.net.in_dim is 5" in out
    assert main(["sweep", "iris.yaml", "--grid", "optimizer.lrr=1"]) == 2
    assert "no setting 'lrr' under 'optimizer'; valid keys under 'optimizer': " \
           "optimizer.kind, optimizer.lr" in capsys.readouterr().err
