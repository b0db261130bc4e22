"""``nnjit predict``: a new process that never calls fit scores new CSV rows with a run's
checkpoint, its saved encoding and the run config stored in the checkpoint."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

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
    TrainConfig,
)
from nnjit.experiment.run_folder import Run
from tests.test_cli import _one_line_error, nnjit_command


def _table(n, seed):
    """Iris with a categorical column (its sepal-length band) and the species as names."""
    X, y = nn.datasets.load_iris()
    rows = np.random.default_rng(seed).choice(len(X), n, replace=False)
    df = pd.DataFrame(X[rows], columns=["sl", "sw", "pl", "pw"])
    df["band"] = np.where(df["sl"] > 5.8, "long", "short")
    df["species"] = np.array(["setosa", "versicolor", "virginica"])[y[rows]]
    return df


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A classification and a regression run trained from CSV files by the installed command."""
    folder = tmp_path_factory.mktemp("predict")
    _table(120, 0).to_csv(folder / "train.csv", index=False)
    _table(120, 0)[["sl", "sw", "pl", "band", "pw"]].to_csv(folder / "reg.csv", index=False)
    configs = {
        "classify": RunConfig(model=ModelConfig(net=NetConfig(in_dim=6, out_dim=3,
                                                              hidden_dims=(8,))),
                              optimizer=OptimizerConfig(lr=0.05),
                              train=TrainConfig(epochs=8, batch_size=16, patience=None),
                              data="train.csv"),
        "regress": RunConfig(model=ModelConfig(net=NetConfig(in_dim=5, out_dim=1,
                                                             hidden_dims=(8,)), loss="mse"),
                             train=TrainConfig(epochs=3, batch_size=16, patience=None),
                             data="reg.csv"),
        "builtin": RunConfig(model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3)),
                             train=TrainConfig(epochs=1, batch_size=16), data="iris"),
    }
    for name, cfg in configs.items():
        (folder / f"{name}.yaml").write_text(cfg.to_yaml())
    with ThreadPoolExecutor(3) as pool:
        procs = list(pool.map(lambda n: nnjit_command("train", f"{n}.yaml", "-q", cwd=folder),
                              configs))
    for proc in procs:
        assert proc.returncode == 0, proc.stderr
    new = _table(40, 1)
    new = new[["species", "band", "pw", "pl", "sw", "sl"]].assign(id=range(40))  # reordered
    new.to_csv(folder / "new.csv", index=False)
    return folder, {k: c.config_hash() for k, c in configs.items()}, new


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_predict_a_run_id_and_a_checkpoint_file(trained):
    folder, ids, new = trained
    run = Run.load(ids["classify"], folder / "runs")
    X = run.encoding().transform(new)
    names = ["predicted_species", "probability_setosa", "probability_versicolor",
             "probability_virginica"]
    for source, extra, phase in ((ids["classify"], [], Checkpoints.BEST),
                                 (ids["classify"], ["--checkpoint", "last"], Checkpoints.LAST),
                                 (f"runs/{ids['classify']}/checkpoints/q1.nne", [],
                                  Checkpoints.Q1)):
        proc = nnjit_command("predict", source, "--data", "new.csv", "--out", "pred.csv", *extra,
                             cwd=folder)
        assert proc.returncode == 0, proc.stderr
        assert "40 predictions of " in proc.stdout and "written to pred.csv" in proc.stdout
        pred = pd.read_csv(folder / "pred.csv")
        assert list(pred.columns) == names
        expected = _softmax(run.checkpoint_outputs(X, phase).astype(np.float64))
        np.testing.assert_allclose(pred[names[1:]].to_numpy(), expected, rtol=1e-5, atol=1e-6)
        labels = np.array(["setosa", "versicolor", "virginica"])[expected.argmax(axis=1)]
        assert pred["predicted_species"].tolist() == labels.tolist()
        if phase is Checkpoints.BEST:  # it learned something (the labels are not shuffled)
            assert (pred["predicted_species"] == new["species"]).mean() > 0.7


def test_predict_regression_writes_the_target(trained):
    folder, ids, new = trained
    proc = nnjit_command("predict", ids["regress"], "--data", "new.csv", "--out", "reg.csv",
                         cwd=folder)
    assert proc.returncode == 0, proc.stderr
    pred = pd.read_csv(folder / "reg.csv")
    run = Run.load(ids["regress"], folder / "runs")
    expected = run.checkpoint_outputs(run.encoding().transform(new), Checkpoints.BEST)
    assert list(pred.columns) == ["predicted_pw"]  # the CSV's last column was the target
    np.testing.assert_allclose(pred.iloc[:, 0], expected[:, 0], rtol=1e-5, atol=1e-6)


def test_predict_failures_are_one_line(trained):
    folder, ids, new = trained
    new.assign(band=["medium"] + ["long"] * 39).to_csv(folder / "unseen.csv", index=False)
    new.drop(columns="pw").to_csv(folder / "missing.csv", index=False)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    model.save_weights(folder / "plain.nne")
    (folder / "junk.nne").write_bytes(b"not an nne file")
    cid = ids["classify"]
    cases = {
        "unseen category": ([cid, "--data", "unseen.csv"],
                            ["cannot use the rows of unseen.csv: column 'band' has the category "
                             "'medium' (row 0)", "known: 'long', 'short'"]),
        "missing column": ([cid, "--data", "missing.csv"],
                           ["cannot use the rows of missing.csv: missing columns ['pw'] (the model was "
                            "trained on them)"]),
        "plain weights": (["plain.nne", "--data", "new.csv"],
                          ["plain.nne has no run config in its metadata", "save_weights"]),
        "not nne": (["junk.nne", "--data", "new.csv"], ["junk.nne is not a valid .nne file"]),
        "no encoding": ([ids["builtin"], "--data", "new.csv"],
                        ["has no saved table encoding", "not trained on a CSV file (data iris)"]),
        "unknown run": (["0123456789ab", "--data", "new.csv"], ["no run '0123456789ab' in runs"]),
        "missing CSV": ([cid, "--data", "gone.csv"], ["no such CSV file: gone.csv"]),
        "checkpoint of a file": (["plain.nne", "--checkpoint", "best", "--data", "new.csv"],
                                 ["--checkpoint picks a checkpoint of a run id"]),
    }
    with ThreadPoolExecutor(4) as pool:
        procs = dict(zip(cases, pool.map(
            lambda c: nnjit_command("predict", *c[0], "--out", "x.csv", cwd=folder),
            cases.values())))
    for name, (_, parts) in cases.items():
        assert _one_line_error(procs[name], "nnjit predict: ", *parts), name
    assert not (folder / "x.csv").exists()
