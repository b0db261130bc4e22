"""Run the whole benchmark suite: ``python -m benchmarks [--quick] [--only NAMES] [--out-dir DIR]
[--native-blas]``.

Runs ``core``, ``scale``, ``memory``, ``seed_table``, ``parallel``, ``gnn`` and ``gnn_sampled``
in turn, each in its own fresh Python process (``python -m benchmarks.<name>``: no benchmark
inherits another's imports, numba caches or environment changes), printing each one's tables and
writing its JSON to
``benchmarks/results/<name>.json`` (or ``DIR/<name>.json``). A benchmark whose module is missing is
skipped with a message; a failing one does not stop the others, but the exit status is 1.

``--quick`` is forwarded to every benchmark (tiny sizes, 1 repeat: checks that they run; the
numbers mean nothing). ``benchmarks.core`` has no ``--quick``; it gets the smallest settings
instead (1 cold and 1 warm process, 2 epochs, 1 repeat).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import REPO_ROOT, fmt_time, print_table

#: In this order: seed_table's table of every target reads core, scale and memory's fresh JSON.
BENCHMARKS = ("core", "scale", "memory", "seed_table", "parallel", "gnn", "gnn_sampled")

#: Arguments standing in for ``--quick`` for benchmarks whose command line has no such flag.
QUICK_FALLBACK = {"core": ["--cold-runs", "1", "--warm-runs", "1", "--epochs", "2",
                           "--repeats", "1"]}

#: Variables some machines set to pin OpenBLAS to older kernels (removed by --native-blas).
OPENBLAS_PINS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

#: Lighter settings inside the full suite, which must stay under 10 minutes on a quiet machine
#: (2026-11-30, --native-blas: core 54 s, seed_table 204 s, scale 42 s, memory 37 s, parallel
#: 94 s, gnn 79 s, gnn_sampled 23 s; 534 s in all). ``benchmarks.parallel`` calibrates the
#: prange thresholds: its own default (9 repeats, compile processes, the two-thread section)
#: takes ~6.5 minutes; in the suite ~1.5 minutes.
SUITE_ARGS = {"parallel": ["--repeats", "5", "--compile-runs", "0", "--no-threads"]}


def child_environment(native_blas: bool, base=None) -> dict:
    """The environment each benchmark process gets: ``base`` (default ``os.environ``), without
    the OpenBLAS pins when ``native_blas``."""
    env = dict(os.environ if base is None else base)
    if native_blas:
        for var in OPENBLAS_PINS:
            env.pop(var, None)
    return env


def _module_source(name: str) -> str | None:
    """Source of ``benchmarks.<name>`` without importing it, or None when it does not exist."""
    spec = importlib.util.find_spec(f"benchmarks.{name}")
    if spec is None or spec.origin is None:
        return None
    try:
        return Path(spec.origin).read_text()
    except OSError:
        return None


def command(name: str, quick: bool, out_dir: str | None, source: str) -> list[str]:
    args = [sys.executable, "-m", f"benchmarks.{name}"]
    if quick:
        args += ["--quick"] if '"--quick"' in source else QUICK_FALLBACK.get(name, [])
    else:
        args += SUITE_ARGS.get(name, [])
    if out_dir is not None:
        args += ["--out", str(Path(out_dir) / f"{name}.json")]
    return args


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="forward --quick: tiny sizes, 1 repeat (smoke test)")
    p.add_argument("--only", default=None,
                   help=f"comma-separated subset of {','.join(BENCHMARKS)} (default all)")
    p.add_argument("--skip", default="", help="comma-separated benchmarks to leave out")
    p.add_argument("--native-blas", action="store_true",
                   help="run each benchmark without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in its "
                        "environment, so OpenBLAS picks its kernels for this CPU (see "
                        "benchmarks/README.md, 'BLAS kernels')")
    p.add_argument("--out-dir", default=None,
                   help="write <name>.json here instead of benchmarks/results/")
    args = p.parse_args(argv)

    names = [n.strip() for n in (args.only or ",".join(BENCHMARKS)).split(",") if n.strip()]
    skip = {n.strip() for n in args.skip.split(",") if n.strip()}
    for n in names + sorted(skip):
        if n not in BENCHMARKS:
            p.error(f"unknown benchmark {n!r}; valid: {', '.join(BENCHMARKS)}")
    if args.out_dir is not None:
        Path(args.out_dir).mkdir(parents=True, exist_ok=True)

    child_env = child_environment(args.native_blas)

    summary = []
    t_suite = time.perf_counter()
    for name in names:
        if name in skip:
            summary.append([name, "skipped (--skip)", "", ""])
            continue
        source = _module_source(name)
        if source is None:
            msg = f"skipped: module benchmarks.{name} not found"
            print(f"== {name}: {msg}\n", flush=True)
            summary.append([name, msg, "", ""])
            continue
        cmd = command(name, args.quick, args.out_dir, source)
        print(f"== {name}: {' '.join(cmd[1:])}\n", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, cwd=REPO_ROOT, env=child_env)
        wall = time.perf_counter() - t0
        out = (Path(args.out_dir) / f"{name}.json" if args.out_dir else
               Path("benchmarks") / "results" / f"{name}.json")
        summary.append([name, "ok" if rc == 0 else f"FAILED (exit {rc})", fmt_time(wall),
                        str(out) if rc == 0 else ""])
        print(flush=True)

    print_table(["benchmark", "status", "wall time", "results"], summary,
                f"Benchmark suite{' (--quick)' if args.quick else ''}: "
                f"{fmt_time(time.perf_counter() - t_suite)} in all", align="llrl")
    return 1 if any(row[1].startswith("FAILED") for row in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
