"""Smoke test of the benchmark suite: ``python -m benchmarks --quick --jobs 2`` runs every
benchmark on tiny sizes with 1 repeat, two at a time, and each writes its JSON. No timing is
asserted (the numbers of a --quick run mean nothing); only that every benchmark completes and
writes the keys its report is built from.

Runs once per session in a fresh process: about 55 s of CPU, ~35 s on 2 idle cores (the longest
part is ``benchmarks.core``'s cold compile into an empty numba cache, ~15 s). Select or skip with
``-m bench`` / ``-m "not bench"``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[1]

#: Keys every benchmark writes, and the ones each benchmark adds.
COMMON_KEYS = {"benchmark", "config", "environment", "warnings", "benchmark_wall_s"}
EXPECTED_KEYS = {
    "core": {"cold_compile", "warm_first_fit", "steady_state", "nrt"},
    "seed_table": {"seed_table"},
    "scale": {"gemm", "scale", "batch_sweep"},
    "memory": {"nrt", "rss", "threads", "blas_threads_inside_fits"},
    "parallel": {"kernels", "families", "thresholds", "threads", "compile"},
    "gnn": {"models", "targets", "compile", "skipped"},
    "gnn_sampled": {"summary", "memory"},
    "custom_ops": {"compile", "steady_state", "ratios"},
    "cnn": {"lenet", "conv_stack", "olivetti", "tabular", "vgg", "compile", "targets"},
    "rnn": {"text", "forecast", "compile", "targets"},
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-results")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", "NUMBA_NRT_STATS")}
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--jobs", "2",
                           "--out-dir", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return out, proc


def _log(proc) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n" \
           f"{proc.stderr[-4000:]}"


def test_suite_exits_cleanly(suite):
    _, proc = suite
    assert proc.returncode == 0, _log(proc)
    assert "Benchmark suite (--quick), 2 at a time" in proc.stdout


def test_seed_table_read_this_runs_core_results(suite):
    """Two at a time, seed_table still starts after core, scale and memory (it reads their JSON:
    its targets name the core.json of this run, not an older one)."""
    out, _ = suite
    core = json.loads((out / "core.json").read_text())
    targets = json.loads((out / "seed_table.json").read_text())["targets"]
    cold = [t for t in targets if t["benchmark"] == "cold compile of the core"]
    assert cold and cold[0]["note"] == f"benchmarks.core, {core['written_at']}"
    assert cold[0]["measured"] != "-"


@pytest.mark.parametrize("name", sorted(EXPECTED_KEYS))
def test_benchmark_writes_json(suite, name):
    if importlib.util.find_spec(f"benchmarks.{name}") is None:
        pytest.skip(f"benchmarks.{name} does not exist")
    out, proc = suite
    path = out / f"{name}.json"
    assert path.is_file(), f"{name} wrote no JSON\n{_log(proc)}"
    data = json.loads(path.read_text())
    missing = (COMMON_KEYS | EXPECTED_KEYS[name]) - set(data)
    assert not missing, f"{name}.json lacks {sorted(missing)}"
    assert data["benchmark"] == name
    assert isinstance(data["warnings"], list)


def test_scale_json_has_the_reported_numbers(suite):
    out, _ = suite
    data = json.loads((out / "scale.json").read_text())
    assert data["config"]["quick"] is True
    assert data["gemm"]["peak_gflops"] > 0
    assert data["gemm"]["shapes"]["gemms"] and data["gemm"]["shapes"]["step_seconds"] > 0
    nnjit = data["scale"]["datasets"]["synthetic"]["nnjit"]
    for key in ("epoch_s", "gflops", "fraction_of_peak", "gemm_only_fraction"):
        assert key in nnjit
    assert {r["batch"] for r in data["batch_sweep"]["rows"]} == {16, 64, 256}


def test_memory_json_has_the_reported_numbers(suite):
    out, _ = suite
    data = json.loads((out / "memory.json").read_text())
    assert data["config"]["quick"] is True
    for entry in data["nrt"].values():
        assert {"alloc_2", "alloc_12", "per_epoch"} <= set(entry)
    for name in ("digits", "mlp784"):
        stages = data["rss"][name]["stages"]
        assert stages and all(s["peak"]["median"] > 0 for s in stages)
        threads = data["threads"][name]
        assert {"sequential", "threads", "ratio_per_repeat"} <= set(threads)
    assert "blas_threads_inside_fits" in data


def test_gnn_sampled_json_reports_throughput_and_memory(suite):
    out, _ = suite
    data = json.loads((out / "gnn_sampled.json").read_text())
    assert data["summary"]["nnjit"]["seeds_per_s"] > 0
    assert set(data["memory"]["arena_bytes"]) == {"big", "small"}


def test_gnn_json_has_the_reported_numbers(suite):
    out, _ = suite
    data = json.loads((out / "gnn.json").read_text())
    assert data["config"]["quick"] is True
    assert set(data["models"]) == {"gcn", "sage", "gat"}
    for name, model in data["models"].items():
        per = model["contenders"]
        assert "nnjit" in per
        # PyG runs when importable, and is listed as skipped (with the reason) otherwise.
        assert ("PyG" in per) != ("PyG" in data["skipped"])
        for entry in per.values():
            assert entry["epoch_s"]["median"] > 0 and entry["epoch_s"]["n"] == 1
            assert 0.0 <= entry["test_acc_mean"] <= 1.0
            assert entry["runs"][0]["epochs"] == data["config"]["epochs"]
    assert ("JAX scan" in data["models"]["gcn"]["contenders"]) != ("JAX scan" in data["skipped"])
    kinds = {(t["model"], t["what"]) for t in data["targets"]}
    assert len(kinds) == 7 and {t["status"] for t in data["targets"]} <= {"PASS", "MISS",
                                                                          "not run"}


def test_cnn_json_pairs_nnjit_and_torch_on_the_same_batches(suite):
    out, _ = suite
    data = json.loads((out / "cnn.json").read_text())
    assert data["config"]["quick"] is True and data["compile"] is None
    for key in ("lenet", "olivetti", "tabular", "vgg"):
        section = data[key]
        if key in ("lenet", "vgg") and "skipped" in section:  # no shared Fashion-MNIST copy here
            continue
        assert section["same_batch_order"] is True
        assert section["nnjit"]["epoch_s"]["median"] > 0
        assert section["PyTorch"]["epoch_s"]["median"] > 0
        assert 0.0 <= section["accuracy"]["nnjit"] <= 1.0 and section["arena_bytes"] > 0
        assert section["nrt"]["per_epoch"] == 0
    assert "sklearn_mlp" in data["olivetti"]
    layers = data["vgg"]["layers"]  # timed without the data set too
    assert len(layers["rows"]) == 8 and layers["gemm_peak_gflops"] > 0
    assert all(r["gflops"]["nnjit"] > 0 and r["gflops"]["PyTorch"] > 0 for r in layers["rows"])
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "not run"}


def test_suite_runs_parallel_lighter_but_quick_stays_quick():
    """The default suite passes benchmarks.parallel lighter settings (to stay under 10 minutes);
    --quick passes --quick."""
    from benchmarks.__main__ import SUITE_ARGS, _module_source, command

    source = _module_source("parallel")
    assert command("parallel", False, None, source)[3:] == SUITE_ARGS["parallel"]
    assert command("parallel", True, None, source)[3:] == ["--quick"]
    assert command("scale", False, None, _module_source("scale"))[3:] == []
    assert command("core", True, None, _module_source("core"))[3:] == ["--quick"]


def test_native_blas_removes_only_the_openblas_pins(monkeypatch):
    from benchmarks.__main__ import child_environment
    from benchmarks._common import blas_kernel_warning

    base = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512", "PATH": "/bin"}
    assert child_environment(False, base) == base
    assert child_environment(True, base) == {"PATH": "/bin"}
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert "OPENBLAS_CORETYPE=Haswell" in blas_kernel_warning()
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert blas_kernel_warning() is None


def test_seed_table_reads_the_other_results_beside_its_own_output(tmp_path):
    """In a suite run with --out-dir, the table of targets uses that run's core/scale/memory."""
    from benchmarks.seed_table import _load_other

    (tmp_path / "core.json").write_text(json.dumps({"benchmark": "core", "marker": 1}))
    assert _load_other("core", tmp_path / "seed_table.json")["marker"] == 1
    assert _load_other("no_such_benchmark", tmp_path / "seed_table.json") is None
