"""House rules checked mechanically (as stumpy's test.sh does)."""

from __future__ import annotations

import pathlib
import re

import numpy as np

PACKAGE = pathlib.Path(__file__).parents[1] / "nnjit"


def test_no_stray_fastmath_or_bare_njit():
    """Compiled functions take their options from nnjit.kernels._jit only."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_jit.py":
            continue
        text = path.read_text()
        if re.search(r"fastmath\s*=", text) or re.search(r"@(numba\.)?njit", text):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert not offenders, f"use nnjit.kernels._jit.jit instead in: {offenders}"


def test_fastmath_flags_keep_nan_checks():
    from nnjit.kernels._jit import FASTMATH
    from nnjit.kernels.loss import first_nonfinite

    assert "nnan" not in FASTMATH and "ninf" not in FASTMATH and FASTMATH != {"fast"}
    x = np.zeros(8, np.float32)
    x[5] = np.nan
    assert first_nonfinite(x) == 5


def test_no_pickle_in_package():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "import pickle" not in text and "allow_pickle=True" not in text, path


# -- references that must resolve -----------------------------------------------------------------
ROOT = PACKAGE.parent
#: Where prose names files and modules: the package (comments, docstrings, its READMEs), the
#: README, the docs and the benchmarks.
PROSE = (*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.md"), ROOT / "README.md",
         *(ROOT / "docs").glob("*.md"), *(ROOT / "benchmarks").glob("*.py"),
         ROOT / "benchmarks" / "README.md")
#: A repository path: a top-level folder, then either a file name with an extension or a
#: trailing slash ("nnjit/numba/numpy/Python" in prose is no path).
REPO_PATH = re.compile(r"(?<![\w/.-])((?:nnjit|tests|docs|benchmarks|examples|tools)/"
                       r"(?:[\w.-]+/)*(?:[\w-]+\.(?:py|md|json|yaml|yml|npz|toml|csv|txt)\b|"
                       r"(?=\s|`|$)))")
#: Written by benchmark runs and ignored by git, so absent from a checkout.
GENERATED = ("benchmarks/results/",)
#: Known dead references in files this rule's author could not edit; each fix is listed in the
#: issue-12 report. (file, reference) -> why it is allowed.
DEAD_PATHS_ALLOWED = {
    ("benchmarks/gnn.py", "examples/gcn.py"): "a file of PyTorch Geometric's repository",
}
#: Dotted names that look like modules but are not ("nnjit.tabular_encoding" is a file format).
NOT_MODULES = {"nnjit.tabular_encoding"}


def _mentions(pattern):
    for path in PROSE:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in pattern.finditer(line):
                yield path.relative_to(ROOT).as_posix(), lineno, match.group(1)


def test_every_repository_path_named_in_source_and_docs_exists():
    dead, allowed_seen = [], set()
    for where, lineno, ref in _mentions(REPO_PATH):
        if (ROOT / ref).exists() or ref.startswith(GENERATED):
            continue
        if (where, ref) in DEAD_PATHS_ALLOWED:
            allowed_seen.add((where, ref))
            continue
        dead.append(f"{where}:{lineno}: {ref}")
    assert not dead, "paths that do not exist:\n" + "\n".join(dead)
    # an entry whose reference was fixed must leave the allowlist
    assert allowed_seen == set(DEAD_PATHS_ALLOWED), set(DEAD_PATHS_ALLOWED) - allowed_seen


def test_every_dotted_nnjit_name_in_source_and_docs_resolves():
    import importlib

    dead = []
    for where, lineno, ref in _mentions(re.compile(r"(?<![\w/.])(nnjit(?:\.\w+)+)")):
        if ref in NOT_MODULES or "__main__" in ref:  # importing __main__ would run the CLI
            continue
        parts = ref.split(".")
        for k in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:k]))
                break
            except ImportError:
                continue
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                dead.append(f"{where}:{lineno}: {ref}")
                break
            obj = getattr(obj, attr)
    assert not dead, "names that do not resolve:\n" + "\n".join(dead)
