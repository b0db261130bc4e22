"""Forged checkpoints, damaged run files, hostile CSV input and links inside a run folder, through
the installed ``nnjit`` command (issue 24, items 5-11): each expected failure is one line on
stderr and exit status 2, quoting at most ~200 characters of the file's content, and nothing is
allocated for sizes a file merely claims.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import time

import numpy as np
import pandas as pd
import pytest

from nnjit.experiment import ModelConfig, NetConfig, OptimizerConfig, RunConfig, TrainConfig
from nnjit.io.nne import load_nne, save_nne
from nnjit.train.checkpoint import ENCODING, RUN_CONFIG
from tests.test_cli import _one_line_error, nnjit_command
from tests.test_cli_predict import _table


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A classification run trained from a CSV file (with a categorical column) by the installed
    command; each test works on its own copy of the folder."""
    folder = tmp_path_factory.mktemp("untrusted")
    _table(120, 0).to_csv(folder / "train.csv", index=False)
    cfg = RunConfig(
        model=ModelConfig(net=NetConfig(in_dim=6, out_dim=3, hidden_dims=(8,))),
        optimizer=OptimizerConfig(lr=0.05),
        train=TrainConfig(epochs=4, batch_size=16, patience=None),
        data="train.csv",
    )
    (folder / "cfg.yaml").write_text(cfg.to_yaml())
    done = nnjit_command("train", "cfg.yaml", "-q", cwd=folder)
    assert done.returncode == 0, done.stderr
    _table(20, 1).to_csv(folder / "new.csv", index=False)
    return folder, cfg.config_hash()


@pytest.fixture
def work(run, tmp_path):
    folder, run_id = run
    shutil.copytree(folder, tmp_path / "w", symlinks=True)
    return tmp_path / "w", run_id


def _forge(path, metadata=None, params=None):
    """Rewrite the .nne at ``path`` with its metadata and params changed (checksum valid)."""
    nne = load_nne(path)
    groups = {g: {k: np.array(v) for k, v in t.items()} for g, t in nne.groups.items()}
    meta = copy.deepcopy(nne.metadata)
    if metadata:
        metadata(meta)
    if params:
        params(groups["params"])
    save_nne(path, groups, meta)


def _predict(folder, source, data="new.csv", timeout=120):
    return nnjit_command(
        "predict", source, "--data", data, "--out", "out.csv", cwd=folder, timeout=timeout
    )


def test_a_huge_network_in_a_checkpoint_config_is_refused_before_it_is_built(work):
    """(item 5) a checkpoint whose run config asks for hidden_dims [10000000]: before, a 74.5 GiB
    MemoryError traceback or ~0.8 GB allocated before the mismatch was reported."""
    folder, run_id = work
    ckpt = folder / "runs" / run_id / "checkpoints" / "last.nne"

    def huge(meta):
        meta[RUN_CONFIG]["model"]["net"]["hidden_dims"] = [10_000_000]

    _forge(ckpt, metadata=huge)
    done = _predict(folder, ckpt)
    line = _one_line_error(done, "nnjit predict:", "hidden")
    assert len(line) < 700


@pytest.mark.parametrize("change", ["shape", "missing", "extra"])
def test_forged_weights_in_a_checkpoint_are_one_line(work, change):
    """(item 6) NNEFormatError / StateMismatchError were tracebacks with exit 1."""
    folder, run_id = work
    ckpt = folder / "runs" / run_id / "checkpoints" / "last.nne"

    def forge(params):
        name = next(iter(params))
        if change == "shape":
            params[name] = np.zeros((3, 3), params[name].dtype)
        elif change == "missing":
            del params[name]
        else:
            params["9.weight"] = np.zeros((2, 2), np.float32)

    _forge(ckpt, params=forge)
    _one_line_error(_predict(folder, ckpt), "nnjit predict:")
    _one_line_error(
        nnjit_command("train", "cfg.yaml", "--resume", "last", "--epochs", "6", cwd=folder),
        "nnjit train:",
    )


def test_values_beyond_float32_in_the_csv_are_one_line_naming_the_cell(work):
    """(item 7) 1e39 passed the encoder's finiteness check as float64 and became inf."""
    folder, run_id = work
    df = pd.read_csv(folder / "new.csv")
    df.loc[3, "pw"] = 1e39
    df.to_csv(folder / "big.csv", index=False)
    _one_line_error(_predict(folder, run_id, "big.csv"), "nnjit predict:", "pw", "1e+39")


def test_categories_pandas_sees_as_one_are_refused(work):
    """(item 8) categories [true, 1]: distinct JSON values, one pandas key (InvalidIndexError)."""
    folder, run_id = work
    ckpt = folder / "runs" / run_id / "checkpoints" / "last.nne"

    def collide(meta):
        column = next(c for c in meta[ENCODING]["columns"] if c["kind"] == "categorical")
        column["categories"] = [True, 1]

    _forge(ckpt, metadata=collide)
    _one_line_error(_predict(folder, ckpt), "nnjit predict:")


def test_a_10_mb_unseen_category_is_quoted_short(work):
    """(item 11) the whole 10 MB value was printed as one line."""
    folder, run_id = work
    df = pd.read_csv(folder / "new.csv")
    df["band"] = df["band"].astype(object)
    df.loc[0, "band"] = "x" * 10_000_000
    df.to_csv(folder / "long.csv", index=False)
    line = _one_line_error(_predict(folder, run_id, "long.csv"), "nnjit predict:", "band")
    assert len(line) < 1000, len(line)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_as_data_is_refused_without_blocking(work):
    """(item 11) ``--data FIFO`` blocked in open() until killed."""
    folder, run_id = work
    os.mkfifo(folder / "pipe.csv")
    start = time.monotonic()
    done = _predict(folder, run_id, "pipe.csv", timeout=60)
    assert time.monotonic() - start < 60
    _one_line_error(done, "nnjit predict:", "pipe.csv", "not a regular file")


def test_a_damaged_idps_csv_is_one_line_in_report(work):
    """(item 6) invalid UTF-8 in idps.csv: a UnicodeDecodeError traceback in ``nnjit report``
    and ``train --resume last``."""
    folder, run_id = work
    idps = folder / "runs" / run_id / "idps.csv"
    idps.write_bytes(idps.read_bytes()[:40] + b"\xff\xfe\x80garbage\n")
    _one_line_error(nnjit_command("report", run_id, cwd=folder), "nnjit report:", "idps.csv")
    _one_line_error(
        nnjit_command("train", "cfg.yaml", "--resume", "last", "--epochs", "6", cwd=folder),
        "nnjit train:",
        "idps.csv",
    )


@pytest.mark.parametrize("content", ["garbage", "nested", "wrong"])
def test_a_damaged_encoding_json_at_resume_is_one_line(work, content):
    """(item 6) ValueError / RecursionError tracebacks at ``--resume``."""
    folder, run_id = work
    path = folder / "runs" / run_id / "encoding.json"
    if content == "garbage":
        path.write_bytes(b"\xff{not json")
    elif content == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        state = json.loads(path.read_text())
        state["feature_names"] = 17
        path.write_text(json.dumps(state))
    _one_line_error(
        nnjit_command("train", "cfg.yaml", "--resume", "last", "--epochs", "6", cwd=folder),
        "nnjit train:",
        "encoding.json",
    )


def test_a_csv_changed_since_the_run_started_is_one_line(work):
    """(item 6) the documented ValueError was printed as a traceback."""
    folder, _ = work
    df = pd.read_csv(folder / "train.csv")
    df["sl"] = df["sl"] * 2
    df.to_csv(folder / "train.csv", index=False)
    _one_line_error(
        nnjit_command("train", "cfg.yaml", "--resume", "last", "--epochs", "6", cwd=folder),
        "nnjit train:",
    )


def test_a_checkpoints_folder_linking_out_of_the_run_is_refused(work, tmp_path):
    """(item 9) ``--overwrite`` deleted the *.nne files the link pointed at and wrote there."""
    folder, run_id = work
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.nne").write_bytes(b"keep me")
    checkpoints = folder / "runs" / run_id / "checkpoints"
    shutil.rmtree(checkpoints)
    checkpoints.symlink_to(outside, target_is_directory=True)
    done = nnjit_command("train", "cfg.yaml", "--overwrite", cwd=folder)
    _one_line_error(done, "nnjit train:", "link")
    assert sorted(p.name for p in outside.iterdir()) == ["precious.nne"]
    assert (outside / "precious.nne").read_bytes() == b"keep me"


def test_a_sweeps_folder_linking_out_of_the_root_is_refused(work, tmp_path):
    """(item 9) ``runs/sweeps`` linking outside received results.csv."""
    folder, _ = work
    outside = tmp_path / "outside-sweeps"
    outside.mkdir()
    (folder / "runs" / "sweeps").symlink_to(outside, target_is_directory=True)
    done = nnjit_command(
        "sweep", "cfg.yaml", "--grid", "optimizer.lr=0.01,0.02", "-q", cwd=folder, timeout=600
    )
    assert done.returncode == 2, done.stderr
    assert "link" in done.stderr
    assert list(outside.iterdir()) == []


def test_the_cli_fuzzer_one_case_of_each_kind(tmp_path):
    """The first cases of ``tools/fuzz_cli.py`` (one per kind of change), through the installed
    command: each is ok or refused in one line (on main, case 3, invalid UTF-8 in idps.csv under
    ``nnjit report``, was a traceback)."""
    import importlib.util
    from pathlib import Path

    tool = Path(__file__).resolve().parents[1] / "tools" / "fuzz_cli.py"
    spec = importlib.util.spec_from_file_location("fuzz_cli", tool)
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    base, run_id = fuzz.base_run(tmp_path)
    results = [fuzz.run_case(case, 0, base, run_id, 120) for case in range(len(fuzz.KINDS))]
    assert {r["kind"] for r in results} == set(fuzz.KINDS)
    assert [r for r in results if r["outcome"] not in ("ok", "refused")] == []
