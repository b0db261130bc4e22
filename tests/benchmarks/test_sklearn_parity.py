"""Smoke test of ``benchmarks.sklearn_parity`` (not part of ``python -m benchmarks``): its
``--quick`` sweep runs both sides and writes the counts the README quotes. Every quick fit
(standardised and unscaled Iris) ends with scikit-learn's n_iter_."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.bench

pytest.importorskip("sklearn")


def test_quick_sweep_writes_the_counts(tmp_path):
    from benchmarks import sklearn_parity

    out = tmp_path / "parity.json"
    sklearn_parity.main(["--quick", "--out", str(out)])
    data = json.loads(out.read_text())
    summary = data["summary"]
    assert summary["fits"] == len(data["fits"]) == 2 * 2 * 3 * 2
    assert summary["n_iter_equal"] == summary["fits"]
    assert set(summary["loss_curve_within"]) == {f"{t:.0e}" for t in sklearn_parity.THRESHOLDS}
