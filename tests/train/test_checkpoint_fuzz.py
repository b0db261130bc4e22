"""The fast subset of tools/fuzz_checkpoints.py: forged and damaged checkpoints either load (and
then train and predict) or are refused with NNEFormatError / StateMismatchError, nothing else.

The full run (>= 10,000 cases in child processes, counting crashes and hangs) is
``python tools/fuzz_checkpoints.py``; this file runs its first cases in-process and checks that
the tool itself counts a crash and a hang.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "fuzz_checkpoints.py"
CASES = 300


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_checkpoints", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def base(fuzz, tmp_path_factory):
    return fuzz.make_base(tmp_path_factory.mktemp("fuzz-base"))


def test_forged_and_damaged_checkpoints_load_or_fail_with_documented_errors(fuzz, base, tmp_path):
    data = fuzz.load_data()
    assert fuzz.exercise(base, data, tmp_path)[0] == fuzz.OK  # the unchanged file works
    records = [fuzz.run_case(base, i, tmp_path, data) for i in range(CASES)]
    bad = [r for r in records if r["outcome"] not in (fuzz.OK, fuzz.REJECTED, fuzz.DIVERGED)]
    assert bad == []
    outcomes = Counter(r["outcome"] for r in records)
    kinds = Counter(r["kind"] for r in records)
    # the subset exercises both paths and every kind of mutation
    assert outcomes[fuzz.OK] >= 30 and outcomes[fuzz.REJECTED] >= 100, outcomes
    assert set(kinds) == set(fuzz.KINDS), kinds


def test_cases_are_deterministic(fuzz, base, tmp_path):
    for i in (0, 7, 123):
        first = fuzz.make_case(base, i, tmp_path / "a.nne")
        again = fuzz.make_case(base, i, tmp_path / "b.nne")
        assert first == again
        assert (tmp_path / "a.nne").read_bytes() == (tmp_path / "b.nne").read_bytes()


def test_the_tool_counts_crashes_and_hangs_in_child_processes(tmp_path):
    """Case 0 kills its worker with SIGSEGV and case 1 sleeps (NNJIT_FUZZ_INJECT): the pool must
    count one crash and one hang, replace the workers and still run the other cases."""
    env = {**os.environ, "NNJIT_FUZZ_INJECT": "crash,hang"}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--cases", "5", "--workers", "1", "--timeout", "4",
         "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 1, proc.stderr  # failures found: exit status 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cases"] == 5
    assert summary["outcomes"]["crash"] == 1 and summary["outcomes"]["hang"] == 1
    assert summary["outcomes"]["undocumented"] == 0
    assert summary["outcomes"]["ok"] + summary["outcomes"]["rejected"] == 3
    assert {r["case"]: r["outcome"] for r in summary["failures"]} == {0: "crash", 1: "hang"}
    assert "exit status -11" in (out / "summary.md").read_text()
