"""Graph runs through the experiment toolkit: train_run, exact resume, report, nnjit train."""

from __future__ import annotations

import numpy as np
import pandas as pd
import yaml

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
from nnjit.experiment.report import write_report
from nnjit.experiment.run_history import IDPS_COLUMNS
from nnjit.experiment.train_run import train_run

COLS = [c for c in IDPS_COLUMNS if c != "seconds"]


def _graph():
    rng = np.random.default_rng(0)
    n = 80
    return nn.Graph.from_arrays(rng.normal(size=(n, 6)), rng.integers(0, n, (2, 300)),
                                rng.integers(0, 3, n), train_mask=np.arange(n) < 40,
                                val_mask=(np.arange(n) >= 40) & (np.arange(n) < 60),
                                test_mask=np.arange(n) >= 60)


def _config(kind="graph_att"):
    net = NetConfig(kind=kind, in_dim=6, out_dim=3, hidden_dims=(8,), dropout=0.2, heads=2)
    return RunConfig(model=ModelConfig(net=net), optimizer=OptimizerConfig(lr=0.01),
                     scheduler=SchedulerConfig(kind=Schedulers.COSINE, eta_min=1e-4),
                     train=TrainConfig(epochs=10, seed=3, patience=None))


def test_graph_run_resumes_exactly_and_reports(tmp_path):
    graph, cfg = _graph(), _config()
    _, straight, hist_a = train_run(cfg, graph, None, root=tmp_path / "a")
    assert hist_a["val_loss"].notna().all()  # validated on the val mask every epoch
    run_b, _, _ = train_run(cfg, graph, None, root=tmp_path / "b", epochs=4)
    _, resumed, hist_b = train_run(cfg, graph, None, root=tmp_path / "b",
                                   resume=Checkpoints.LAST)
    pd.testing.assert_frame_equal(hist_a[COLS], hist_b[COLS], check_exact=True)
    for name, value in straight.model.state_dict().items():
        np.testing.assert_array_equal(resumed.model.state_dict()[name], value)
    test = nn.FullBatch(graph, "test")
    page = write_report(run_b, data=(test, graph.y[test.mask])).read_text()
    assert "Confusion matrix" in page and "20 rows" in page


def test_nnjit_train_cora_full_batch(tmp_path):
    from nnjit.cli import main

    config = {"data": "cora", "train": {"epochs": 3, "seed": 0},
              "model": {"net": {"kind": "graph_conv", "in_dim": 1433, "out_dim": 7,
                                "hidden_dims": [16], "dropout": 0.5}},
              "optimizer": {"kind": "adam", "lr": 0.01, "weight_decay": 5e-4}}
    path = tmp_path / "gcn.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--root", str(tmp_path / "runs"), "--quiet"]) == 0
    from nnjit.experiment.run_folder import Run

    (run,) = Run.all(tmp_path / "runs")
    history = run.history()
    assert len(history) == 3 and history["val_accuracy"].notna().all()
    assert main(["report", run.id, "--root", str(tmp_path / "runs")]) == 0
    page = (run.path / "report.html").read_text()
    assert "test data, 1000 rows" in page
