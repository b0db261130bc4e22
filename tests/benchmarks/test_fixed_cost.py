"""Smoke test of ``benchmarks.fixed_cost`` (not part of ``python -m benchmarks``): a short run of
the command as a user types it writes the three cases, the nnjit.sklearn estimator's fit and
scikit-learn's yardstick. No number is asserted but that each is a positive time (the run pins
itself to one CPU: hence its own process, never this test worker)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

pytest.importorskip("sklearn")

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_run_writes_every_case(tmp_path):
    out = tmp_path / "fixed_cost.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.fixed_cost", "--fits", "5",
                           "--sklearn-fits", "2", "--estimator-fits", "2",
                           "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert set(data["outside_s"]) == {"fresh", "same loader", "fit(X, y)"}
    for name, times in data["outside_s"].items():
        assert times["median"] > 0, name
    assert data["sklearn_fit_s"]["median"] > 0 and data["fits"] == 5
    assert data["estimator_fit_s"]["median"] > 0 and data["estimator_fit_s"]["n"] == 2
    assert "Iris fit, outside the compiled epochs" in done.stdout
