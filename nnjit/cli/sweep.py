"""``nnjit sweep CONFIG.yaml --grid KEY=V1,V2 ...``: train every combination as a run, on a
thread pool, a Dask LocalCluster or an existing Dask scheduler; print the table and save it.

Exit status: 0 when every run trained (or, with ``--resume``, was already finished), 1 when some
failed or were invalid configurations (the table says why), 2 for an expected failure before
anything ran (a bad grid key, a missing file, runs that already exist...).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from nnjit.cli.arguments import positive_int
from nnjit.cli.errors import CommandError

#: Exit status when the sweep ran but some of its runs failed.
EXIT_RUNS_FAILED = 1
#: Characters of an error shown in the printed table (the CSV keeps all of it).
TABLE_ERROR_CHARS = 60


def add_parser(sub) -> object:
    """Register ``nnjit sweep`` on the subparsers ``sub``; returns its parser."""
    p = sub.add_parser(
        "sweep", help="train a grid of configurations, each as a run (thread pool or Dask)",
        description="Train every combination of the --grid values applied to a RunConfig YAML "
        "file, each as a normal run (runs/<id>/ with run.yaml, idps.csv, checkpoints), on a "
        "thread pool (default), a Dask LocalCluster (--local-cluster) or an existing Dask "
        "cluster (--scheduler). Prints one row per configuration (its best epoch's metrics, "
        "run folder, status, error) and writes the table to <root>/sweeps/<id>/results.csv. "
        "A failing run does not stop the others; the exit status is then 1.")
    p.add_argument("config", help="RunConfig YAML file the grid varies")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a dotted config key and its values as a YAML flow list without the "
                   "brackets, e.g. optimizer.lr=1e-3,1e-2 or model.net.hidden_dims=[64],[128]; "
                   "repeat for more keys (every combination runs)")
    p.add_argument("--data", help="data for every run: a built-in data set name, a CSV path or "
                   "fashion_mnist:PATH (default: the config's 'data')")
    p.add_argument("--target", help="CSV target column (default: the last one)")
    p.add_argument("--root", default="runs", help="runs root folder (default: runs); on a "
                   "Dask cluster, a folder every worker can write")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 "
                       "(needs pip install 'nnjit[distributed]')")
    where.add_argument("--local-cluster", action="store_true",
                       help="start a Dask LocalCluster of --workers processes, one thread each")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="threads of the pool, or processes of --local-cluster (default: the "
                   "usable cores)")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue runs that exist and are unfinished; keep finished ones")
    again.add_argument("--overwrite", action="store_true",
                       help="train runs that exist again from scratch")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per finished run")
    return p


def parse_grid(entries: list[str]) -> dict:
    """The grid of the ``--grid`` entries; CommandError naming a bad or repeated entry."""
    from nnjit.experiment.grid import parse_grid_entry

    grid: dict = {}
    for entry in entries:
        try:
            key, values = parse_grid_entry(entry)
        except ValueError as e:
            raise CommandError(str(e)) from e
        if key in grid:
            raise CommandError(f"--grid {key} is given twice; give all its values in one "
                               f"entry: --grid {key}=V1,V2,...")
        grid[key] = values
    return grid


def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else (os.cpu_count() or 1)


def _progress(total: int):
    count = [0]

    def show(row: dict) -> None:
        count[0] += 1
        values = ", ".join(f"{k}={v}" for k, v in row.items() if "." in k or k == "data")
        if row["status"] in ("ok", "finished") and row.get("best") is not None:
            what = (f"best {row['monitor']} {row['best']:.4g} at epoch {row['best_epoch']}, "
                    f"{row['seconds']:.1f} s")
        else:
            what = row["error"] or row["status"]
        where = f" {row['run_folder']}" if row["run_folder"] else ""
        print(f"nnjit sweep: [{count[0]}/{total}] {row['status']}{where} ({values}): {what}",
              file=sys.stderr, flush=True)

    return show


def _table_text(frame) -> str:
    import pandas as pd

    shown = frame.drop(columns=["worker"])
    shown["error"] = [e if len(e) <= TABLE_ERROR_CHARS else e[:TABLE_ERROR_CHARS - 3] + "..."
                      for e in shown["error"]]
    if not shown["error"].any():
        shown = shown.drop(columns=["error"])
    with pd.option_context("display.width", 1000, "display.max_columns", None,
                           "display.max_colwidth", 80):
        return shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="")


def cmd_sweep(args) -> int:
    from nnjit.cli.train import load_config
    from nnjit.experiment.sweep import (
        RunsExistError,
        check_sweep,
        import_distributed,
        local_cluster,
        sweep,
    )

    config = load_config(args.config)
    if not args.grid:
        raise CommandError("no --grid: give at least one, e.g. --grid optimizer.lr=1e-3,1e-2 "
                           "(nnjit train trains a single config)")
    grid = parse_grid(args.grid)
    if not (args.data or config.data or "data" in grid):
        raise CommandError("no data: set 'data' in the config or pass --data "
                           "NAME|CSV|fashion_mnist:PATH")
    if args.scheduler and args.workers:
        raise CommandError("--workers sizes the thread pool or the --local-cluster; a "
                           "--scheduler cluster has its own workers")
    existing = "resume" if args.resume else "overwrite" if args.overwrite else "error"
    cluster = client = None
    try:
        # every check that needs no training, before any cluster starts
        points, _ = check_sweep(config, grid, args.data, root=args.root, existing=existing)
        kwargs = dict(data=args.data, root=args.root, existing=existing, target=args.target,
                      on_result=None if args.quiet else _progress(len(points)))
        if args.scheduler or args.local_cluster:
            try:
                distributed = import_distributed()
            except ImportError as e:
                raise CommandError(str(e)) from e
            if args.local_cluster:
                cluster = local_cluster(args.workers or _usable_cores())
            try:
                client = distributed.Client(cluster if cluster is not None else args.scheduler)
            except (OSError, TimeoutError, ValueError) as e:
                raise CommandError(f"cannot connect to the Dask scheduler {args.scheduler}: "
                                   f"{e}") from e
            frame = sweep(config, grid, client=client, **kwargs)
        else:
            frame = sweep(config, grid, workers=args.workers, **kwargs)
    except RunsExistError as e:
        listed = ", ".join(f"{run_id} ({done} epochs)" for run_id, done in e.runs[:10])
        more = f" and {len(e.runs) - 10} more" if len(e.runs) > 10 else ""
        raise CommandError(f"{len(e.runs)} of the sweep's runs already exist in {args.root}: "
                           f"{listed}{more}; pass --resume to continue unfinished ones and keep "
                           "finished ones, or --overwrite to train them again") from e
    except ValueError as e:
        raise CommandError(str(e).removeprefix("sweep: ")) from e
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    print(_table_text(frame))
    results = Path(frame.attrs["results_csv"])
    shown = os.path.join(args.root, results.relative_to(Path(args.root).resolve()))
    print(f"wrote {shown}")
    bad = int((~frame["status"].isin(["ok", "finished"])).sum())
    if bad:
        print(f"nnjit sweep: {bad} of {len(frame)} runs failed or were invalid (see the error "
              f"column of {shown})", file=sys.stderr)
        return EXIT_RUNS_FAILED
    return 0
