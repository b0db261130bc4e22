"""``nnjit bench``: run ``python -m benchmarks`` of the repository checkout the user is in.

The benchmarks are not installed with the package (they live next to it in the repository), so
the installed ``nnjit`` command finds them by looking for ``benchmarks/__main__.py`` beside an
``nnjit/`` package folder in the current directory and each of its parents. It runs them with
that repository root as the working directory (relative paths such as ``--out-dir`` are relative
to it) and the root first on ``PYTHONPATH``, so the checkout's own ``nnjit`` is measured.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nnjit.cli.errors import CommandError


def find_checkout(start=None) -> Path | None:
    """The nearest folder, ``start`` (default: the working directory) or a parent, that holds
    ``benchmarks/__main__.py`` and ``nnjit/__init__.py``; None outside any checkout."""
    here = Path(os.getcwd() if start is None else start).resolve()
    for folder in (here, *here.parents):
        if (folder / "benchmarks" / "__main__.py").is_file() and (
                folder / "nnjit" / "__init__.py").is_file():
            return folder
    return None


def cmd_bench(args) -> int:
    root = find_checkout()
    if root is None:
        raise CommandError(
            f"no nnjit repository checkout in {os.getcwd()} or its parents (the benchmarks are "
            "not part of the installed package); run it inside a clone of the nnjit repository")
    env = dict(os.environ, NNJIT_BENCH_PROG="nnjit bench")  # (its --help names the command)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.call([sys.executable, "-m", "benchmarks", *args.bench_args], cwd=root,
                           env=env)
