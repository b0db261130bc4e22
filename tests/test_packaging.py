"""The wheel, built for real by pip from a copy of the checkout: licence, attributions, py.typed.

Building takes about 2-3 s (no compile: pure Python plus the data archives). The copy keeps the
checkout free of setuptools' ``build/`` and ``*.egg-info`` folders.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import nnjit

ROOT = Path(nnjit.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "nnjit", src / "nnjit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc"))
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--quiet", str(src), "-w", str(out)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = list(out.glob("nnjit-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _sources() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "nnjit").rglob("*.py")
            if "__pycache__" not in p.parts}


def test_wheel_holds_the_licence_attributions_and_py_typed(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        dist = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        licence = z.read(f"{dist}/licenses/LICENSE").decode()
        metadata = z.read(f"{dist}/METADATA").decode()
        readme = z.read("nnjit/datasets/README.md")
    assert licence == (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License")
    assert "Copyright (c) 2026 the nnjit developers" in licence
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata
    assert readme == (ROOT / "nnjit" / "datasets" / "README.md").read_bytes()
    assert "nnjit/py.typed" in names
    archives = {f"nnjit/datasets/data/{p.name}" for p in (ROOT / "nnjit/datasets/data").iterdir()}
    assert archives and archives <= names
    missing = _sources() - names
    assert not missing, f"Python files left out of the wheel: {sorted(missing)}"
    assert not [n for n in names if "__pycache__" in n or n.endswith((".nbi", ".nbc", ".pyc"))]


def test_unpacked_wheel_imports_and_reads_its_data(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path)
    code = ("import importlib.resources as r, nnjit, nnjit.datasets as d; "
            "X, y = d.load_iris(); "
            "text = r.files('nnjit.datasets').joinpath('README.md').read_text(); "
            "print(nnjit.__file__, X.shape, 'licence' in text)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**env, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    where = proc.stdout.split(" (")[0]  # nnjit.__file__: the unpacked wheel, not the checkout
    assert Path(where).resolve().is_relative_to(tmp_path.resolve()), proc.stdout
    assert proc.stdout.strip().endswith("(150, 4) True"), proc.stdout


def test_readme_test_command_is_what_ci_runs():
    """README's second command and .ci/run install the same extras and run the same pytest
    command, and every extra they name exists in pyproject.toml (CI runs exactly what a user
    is told to run)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    told = re.search(r"pip install -e '\.\[([\w,-]+)\]' && (python -m pytest[^\n`]*)", readme)
    runs = re.search(r"pip install --quiet -e '\.\[([\w,-]+)\]'", ci)
    assert told and runs, "the install commands of README.md or .ci/run were not found"
    assert told.group(1).split(",") == runs.group(1).split(",")
    pytest_lines = [line.strip() for line in ci.splitlines()
                    if line.strip().startswith("python -m pytest")]
    assert pytest_lines == [told.group(2).strip()]
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = re.findall(r"^([\w-]+) = \[", section, flags=re.M)
    assert set(told.group(1).split(",")) <= set(extras), extras
