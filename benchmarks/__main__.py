"""Run the whole benchmark suite: ``python -m benchmarks [--quick] [--only NAMES] [--out-dir DIR]
[--native-blas]``.

Runs ``core``, ``scale``, ``memory``, ``seed_table``, ``parallel``, ``gnn``, ``gnn_sampled``,
``custom_ops``, ``cnn`` and ``rnn`` in turn, each in its own fresh Python process (``python -m benchmarks.<name>``: no benchmark
inherits another's imports, numba caches or environment changes), printing each one's tables and
writing its JSON to
``benchmarks/results/<name>.json`` (or ``DIR/<name>.json``). A benchmark whose module is missing is
skipped with a message; a failing one does not stop the others, but the exit status is 1.

``--quick`` is forwarded to every benchmark (tiny sizes, 1 repeat, peers only where the smoke
test checks them: checks that they run; the numbers mean nothing). With ``--quick``, ``--jobs 2``
runs two benchmarks at a time (each one's output is printed when it ends; ``seed_table`` still
starts after the benchmarks whose JSON it reads): the smoke test's setting on 2 cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import REPO_ROOT, fmt_time, print_table

#: In this order: seed_table's table of every target reads core, scale and memory's fresh JSON.
BENCHMARKS = ("core", "scale", "memory", "seed_table", "parallel", "gnn", "gnn_sampled",
              "custom_ops", "cnn", "rnn")

#: Benchmarks that read other benchmarks' fresh JSON start after those have ended.
NEEDS = {"seed_table": ("core", "scale", "memory")}

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
        args += ["--quick"] if '"--quick"' in source else []
    else:
        args += SUITE_ARGS.get(name, [])
    if out_dir is not None:
        args += ["--out", str(Path(out_dir) / f"{name}.json")]
    return args


def run_one_by_one(commands: dict, env: dict) -> dict:
    """Run ``commands`` (name -> argv) in order, output streaming; ``{name: (exit, wall s)}``."""
    results = {}
    for name, cmd in commands.items():
        print(f"== {name}: {' '.join(cmd[1:])}\n", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, cwd=REPO_ROOT, env=env)
        results[name] = (rc, time.perf_counter() - t0)
        print(flush=True)
    return results


def run_concurrently(commands: dict, jobs: int, env: dict) -> dict:
    """Run ``commands`` (name -> argv) ``jobs`` at a time, in order as far as :data:`NEEDS`
    allows; each one's output (stdout and stderr) is printed when it ends.
    Returns ``{name: (exit status, wall seconds)}``."""
    pending, running, results = list(commands), {}, {}
    while pending or running:
        for name in list(pending):
            if len(running) >= jobs:
                break
            if any(dep in commands and dep not in results for dep in NEEDS.get(name, ())):
                continue
            log = tempfile.TemporaryFile(mode="w+")
            proc = subprocess.Popen(commands[name], cwd=REPO_ROOT, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, text=True)
            running[name] = (proc, time.perf_counter(), log)
            pending.remove(name)
            print(f"== {name} started", flush=True)
        time.sleep(0.1)
        for name, (proc, t0, log) in list(running.items()):
            rc = proc.poll()
            if rc is None:
                continue
            results[name] = (rc, time.perf_counter() - t0)
            del running[name]
            log.seek(0)
            print(f"== {name}: {' '.join(commands[name][1:])}\n", flush=True)
            sys.stdout.write(log.read())
            log.close()
            print(flush=True)
    return results


def main(argv=None) -> int:
    # (nnjit bench runs this module and names itself)
    p = argparse.ArgumentParser(prog=os.environ.get("NNJIT_BENCH_PROG", "python -m benchmarks"),
                                description=__doc__,
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
    p.add_argument("--jobs", type=int, default=1,
                   help="with --quick: benchmarks run at a time (default 1); timing needs 1")
    args = p.parse_args(argv)
    if args.jobs < 1 or (args.jobs > 1 and not args.quick):
        p.error("--jobs must be 1, or more with --quick (benchmarks running side by side "
                "measure each other)")

    names = [n.strip() for n in (args.only or ",".join(BENCHMARKS)).split(",") if n.strip()]
    skip = {n.strip() for n in args.skip.split(",") if n.strip()}
    for n in names + sorted(skip):
        if n not in BENCHMARKS:
            p.error(f"unknown benchmark {n!r}; valid: {', '.join(BENCHMARKS)}")
    if args.out_dir is not None:
        Path(args.out_dir).mkdir(parents=True, exist_ok=True)

    child_env = child_environment(args.native_blas)

    t_suite = time.perf_counter()
    not_run, commands = {}, {}
    for name in names:
        source = None if name in skip else _module_source(name)
        if name in skip:
            not_run[name] = "skipped (--skip)"
        elif source is None:
            not_run[name] = f"skipped: module benchmarks.{name} not found"
            print(f"== {name}: {not_run[name]}\n", flush=True)
        else:
            commands[name] = command(name, args.quick, args.out_dir, source)
    results = (run_one_by_one(commands, child_env) if args.jobs == 1 else
               run_concurrently(commands, args.jobs, child_env))
    summary = []
    for name in names:
        if name in not_run:
            summary.append([name, not_run[name], "", ""])
            continue
        rc, wall = results[name]
        out = (Path(args.out_dir) / f"{name}.json" if args.out_dir else
               Path("benchmarks") / "results" / f"{name}.json")
        summary.append([name, "ok" if rc == 0 else f"FAILED (exit {rc})", fmt_time(wall),
                        str(out) if rc == 0 else ""])

    print_table(["benchmark", "status", "wall time", "results"], summary,
                f"Benchmark suite{' (--quick)' if args.quick else ''}"
                f"{f', {args.jobs} at a time' if args.jobs > 1 else ''}: "
                f"{fmt_time(time.perf_counter() - t_suite)} in all", align="llrl")
    return 1 if any(row[1].startswith("FAILED") for row in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
