"""nnjit benchmarks. Run from the repository root, e.g. ``python -m benchmarks.core``.

Shared helpers (timing, medians, subprocess runs, JSON output, environment info, tables) live in
:mod:`benchmarks._common`; results are written to ``benchmarks/results/`` (git-ignored).
"""
