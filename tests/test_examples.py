"""The examples run as scripts, as a user would run them."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).parents[1]


def run(script, cwd):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / script)], cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_quickstart_seed(tmp_path):
    stdout = run("quickstart_seed.py", tmp_path)
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", stdout).group(1))
    assert accuracy >= 0.85
    assert (tmp_path / "model.nne").exists()


def test_custom_op_seed(tmp_path):
    stdout = run("custom_op_seed.py", tmp_path)
    assert re.search(r"Python MulOp: [0-9.]+ ms/epoch, test accuracy 0\.[89]", stdout), stdout
    assert "slower" in stdout


def test_cora_gnn(tmp_path):
    stdout = run("cora_gnn.py", tmp_path)
    accuracies = dict(re.findall(r"^(.+?): test accuracy ([0-9.]+)", stdout, flags=re.M))
    assert set(accuracies) == {"GCN", "GraphSAGE", "GAT", "GraphSAGE, neighbour-sampled"}
    assert all(float(a) >= 0.75 for a in accuracies.values()), stdout
