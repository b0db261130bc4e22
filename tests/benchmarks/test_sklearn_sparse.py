"""Smoke test of ``benchmarks.sklearn_sparse`` (not part of ``python -m benchmarks``): its
``--quick`` run fits every contender in its own process and writes the numbers its report and
targets are built from. No number is asserted but that the measured nnjit processes compiled
nothing (the warm-up filled the cache) and that the float64 fits agree with scikit-learn's."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.bench

pytest.importorskip("sklearn")


def test_quick_run_writes_every_contender(tmp_path):
    from benchmarks import sklearn_sparse

    out = tmp_path / "sparse.json"
    sklearn_sparse.main(["--quick", "--out", str(out)])
    data = json.loads(out.read_text())
    contenders = data["summary"]["contenders"]
    assert set(contenders) == set(sklearn_sparse.CONTENDERS)
    for name, row in contenders.items():
        assert row["peak"]["median"] > row["before"]["median"] > 0, name
        assert row["fit_s"]["median"] > 0 and len(row["loss_curve"]) == 1, name
        if name.startswith("nnjit"):
            assert row["n_compiles"] == 0, name
    assert data["summary"]["float64_loss_curve_max_rel_diff"] < 1e-10
    assert {t["what"] for t in data["summary"]["targets"]} and data["config"]["quick"]
