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
    from nnjit.config import FASTMATH
    from nnjit.kernels.loss import first_nonfinite

    assert "nnan" not in FASTMATH and "ninf" not in FASTMATH and FASTMATH != {"fast"}
    x = np.zeros(8, np.float32)
    x[5] = np.nan
    assert first_nonfinite(x) == 5


def test_no_pickle_in_package():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "import pickle" not in text and "allow_pickle=True" not in text, path
