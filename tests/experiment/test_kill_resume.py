"""kill -9 at random moments, then ``nnjit train --resume last``: the run ends bit-identical to
an uninterrupted one (a cheap version of ``tools/kill_resume.py``), and a run killed before its
first checkpoint resumes from the start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import installed_nnjit

REPO = Path(__file__).resolve().parents[2]


def _env():
    env = dict(os.environ, NNJIT_COMPILE_NOTICE="0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def _nnjit():
    return [installed_nnjit()]


def test_kill_at_random_moments_then_resume_is_bit_identical(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(REPO / "tools" / "kill_resume.py"), "--kills", "2",
                           "--data", "iris", "--epochs", "10", "--seed", "3", "--no-warmup",
                           "--workdir", str(tmp_path / "work"), "--json", str(out)],
                          env=_env(), capture_output=True, text=True, timeout=600, check=False)
    assert out.is_file(), done.stderr
    figures = json.loads(out.read_text())
    assert figures["kills"] == 2, figures
    assert figures["failures"] == [] and figures["differences"] == [], figures
    assert figures["trials_bit_identical"] == figures["trials"] >= 1
    assert figures["tmp_files_left_at_the_end"] == 0
    assert done.returncode == 0, done.stdout + done.stderr


def test_cli_resume_of_a_run_killed_before_its_first_checkpoint(tmp_path):
    """run.yaml written, a temporary checkpoint file half-written, no checkpoint: --resume last
    trains from the start with a message, removes the stale file, and ends like a fresh run."""
    sys.path.insert(0, str(REPO))
    from nnjit.experiment import RunConfig

    config = tmp_path / "config.yaml"
    config.write_text("model:\n  net: {in_dim: 4, out_dim: 3, hidden_dims: [8]}\n"
                      "optimizer: {lr: 0.01}\ntrain: {epochs: 3, batch_size: 16, seed: 0}\n"
                      "data: iris\n")
    run_id = RunConfig.from_yaml(config.read_text()).config_hash()
    folder = tmp_path / "runs" / run_id
    (folder / "checkpoints").mkdir(parents=True)
    shutil.copy(config, folder / "run.yaml")  # what Run.create writes (the same config)
    stale = folder / "checkpoints" / ".last.nne.q7w_x2ab.tmp"
    stale.write_bytes(b"NNE half")
    done = subprocess.run([*_nnjit(), "train", str(config), "--root", str(tmp_path / "runs"),
                           "--resume", "last", "-q"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "has no checkpoint to resume from" in done.stderr
    warning = [line for line in done.stderr.splitlines() if "has no checkpoint" in line]
    assert len(warning) == 1 and warning[0].startswith("nnjit train: warning: train_run: run ")
    assert "warnings.warn" not in done.stderr  # one line, not Python's file:line format
    assert "training it from the start" in done.stderr
    assert f"run runs/{run_id}: 3 epochs" in done.stdout
    assert not stale.exists()
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == [
        "best.nne", "first.nne", "last.nne", "q1.nne", "q2.nne", "q3.nne"]
