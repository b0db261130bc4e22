"""Command line of nnjit.

``nnjit train CONFIG.yaml`` trains a run, ``nnjit sweep CONFIG.yaml --grid KEY=V1,V2`` trains
every combination of a grid as runs (thread pool or Dask), ``nnjit predict ID --data new.csv
--out pred.csv`` predicts new rows with a run, ``nnjit runs list`` / ``nnjit runs show ID``
inspect runs, ``nnjit demo`` trains on built-in data (``--dataset cora``: a GCN), ``nnjit
warmup`` compiles the interpreter, ``nnjit report ID`` writes a run's HTML page, ``nnjit bench``
runs the benchmarks of a repository checkout. Paths are printed relative to the runs root. An
expected failure prints one line on stderr and exits with status 2 (``nnjit --debug ...``: the
traceback instead).
"""

from __future__ import annotations

import argparse
import sys

from nnjit.cli.arguments import positive_int
from nnjit.cli.errors import CommandError, one_line_warnings, os_error_line, report

__all__ = ["build_parser", "main", "version_text"]


def version_text() -> str:
    """``nnjit X (numba Y, numpy Z, Python W)``."""
    import platform

    import numba
    import numpy

    from nnjit._version import __version__

    return (f"nnjit {__version__} (numba {numba.__version__}, numpy {numpy.__version__}, "
            f"Python {platform.python_version()})")


def _root_option(parser) -> None:
    parser.add_argument("--root", default="runs", help="runs root folder (default: runs)")


def build_parser() -> argparse.ArgumentParser:
    from nnjit.cli.demo import DEMO_SETTINGS

    # (the docstring's reStructuredText literals read as plain text in a terminal)
    parser = argparse.ArgumentParser(prog="nnjit", description=__doc__.replace("``", ""),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version_text())
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an expected failure instead of one line")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_demo = sub.add_parser("demo", help="train an MLP (or, on cora, a GCN) on bundled data")
    p_demo.add_argument("--dataset", choices=sorted(DEMO_SETTINGS) + ["cora"], default="digits")
    p_demo.add_argument("--epochs", type=int, default=None, help="default 100 (cora: 200)")
    p_demo.add_argument("--seed", type=int, default=42)
    p_warm = sub.add_parser("warmup", help="compile the training loop and every built-in op "
                            "family ahead of time (float32; --dtype float64, --all for both)")
    p_warm.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p_warm.add_argument("--all", action="store_true", help="both dtypes")
    # (every family is compiled now; the graph build that --graph added is one of them)
    p_warm.add_argument("--graph", action="store_true", help=argparse.SUPPRESS)
    p_train = sub.add_parser("train", help="train a run from a RunConfig YAML file")
    p_train.add_argument("config", help="RunConfig YAML file")
    p_train.add_argument("--data", help="built-in data set name (iris, digits, "
                         "olivetti_faces, cora), a CSV path or fashion_mnist:PATH (an IDX "
                         "folder or .npz); default: the config's 'data'")
    p_train.add_argument("--target", help="CSV target column (default: the last one)")
    _root_option(p_train)
    p_train.add_argument("--epochs", type=positive_int, metavar="N",
                         help="stop after epoch N (counting the epochs a resumed run already "
                         "did; default: the config's train.epochs, which still sets the run id, "
                         "the scheduler's span and the checkpoint phases)")
    again = p_train.add_mutually_exclusive_group()
    again.add_argument("--resume", choices=["last", "best"],
                         help="continue the existing run from this checkpoint (its later "
                         "history rows are dropped)")
    again.add_argument("--overwrite", action="store_true",
                         help="train an existing run again from scratch (deletes its history "
                         "and checkpoints first)")
    p_train.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    from nnjit.cli.sweep import add_parser as add_sweep_parser

    p_sweep = add_sweep_parser(sub)
    p_predict = sub.add_parser(
        "predict", help="predict new CSV rows with a run's checkpoint",
        description="Predict the rows of a CSV file with a checkpoint of a run trained on a CSV "
        "(nnjit train --data FILE.csv): the model is rebuilt from the run config in the "
        "checkpoint and the rows are encoded with the run's saved encoding (column order, "
        "scaling, categories; other columns are ignored, an unseen category is an error). The "
        "output has one row per input row, in order: predicted_<target> (the class label) and, "
        "for classification, probability_<class> for each class.")
    p_predict.add_argument("source", metavar="RUN_ID|CHECKPOINT.nne",
                           help="a run id (under --root) or a run's .nne checkpoint file")
    p_predict.add_argument("--data", required=True, metavar="FILE.csv", help="rows to predict")
    p_predict.add_argument("--out", required=True, metavar="FILE.csv",
                           help="where to write the predictions (replaced atomically)")
    p_predict.add_argument("--checkpoint", choices=["best", "last", "first", "q1", "q2", "q3"],
                           help="which checkpoint of a run id (default: best, else last)")
    _root_option(p_predict)
    p_runs = sub.add_parser("runs", help="list runs (nnjit runs, or runs list) or show one")
    _root_option(p_runs)  # (nnjit runs alone lists them, as runs list)
    runs_sub = p_runs.add_subparsers(dest="runs_command", metavar="{list,show}")
    p_list = runs_sub.add_parser("list", help="list the runs under the root")
    _root_option(p_list)
    p_show = runs_sub.add_parser("show", help="show a run's config, metadata, history")
    p_show.add_argument("id", help="run id")
    _root_option(p_show)
    p_report = sub.add_parser("report", help="write a run's self-contained HTML report")
    p_report.add_argument("id", help="run id")
    _root_option(p_report)
    p_report.add_argument("-o", "--output", help="HTML file (default: <run>/report.html)")
    # every argument after "bench", --help included, goes to python -m benchmarks (see _parse)
    sub.add_parser("bench", help="run the benchmarks of the repository checkout you are in "
                   "(python -m benchmarks [--quick] [--only NAMES] ...; nnjit bench --help)")
    for leaf in (p_demo, p_warm, p_train, p_sweep, p_predict, p_list, p_show, p_report):
        leaf.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help="show the traceback of an expected failure instead of one line")
    return parser


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    debug = False
    while argv[:1] == ["--debug"]:
        debug, argv = True, argv[1:]
    if argv[:1] == ["bench"]:  # the rest belongs to python -m benchmarks (--quick, --help...)
        return argparse.Namespace(command="bench", bench_args=argv[1:], debug=debug)
    args = parser.parse_args(argv)
    args.debug = args.debug or debug
    return args


def main(argv=None) -> int:
    """Run the ``nnjit`` command line; returns the exit status."""
    args = _parse(sys.argv[1:] if argv is None else list(argv))
    command = " ".join(filter(None, (args.command, getattr(args, "runs_command", None))))
    try:
        if args.debug:  # Python's own warning format, with the file and line of each
            return _dispatch(args)
        with one_line_warnings(command):
            return _dispatch(args)
    except CommandError as error:
        if args.debug:
            raise
        return report(command, error)
    except OSError as error:  # a file or folder the command could not read or write
        if args.debug:
            raise
        return report(command, CommandError(os_error_line(error, "use")))


def _dispatch(args) -> int:
    if args.command == "demo":
        from nnjit.cli.demo import demo, demo_graph

        if args.dataset == "cora":
            demo_graph(args.epochs or 200, args.seed)
        else:
            demo(args.dataset, args.epochs or 100, args.seed)
        return 0
    if args.command == "warmup":
        from nnjit.cli.warmup import warmup

        warmup(("float32", "float64") if args.all else (args.dtype,))
        return 0
    if args.command == "train":
        from nnjit.cli.train import cmd_train

        return cmd_train(args)
    if args.command == "sweep":
        from nnjit.cli.sweep import cmd_sweep

        return cmd_sweep(args)
    if args.command == "predict":
        from nnjit.cli.predict import cmd_predict

        return cmd_predict(args)
    if args.command == "runs":
        from nnjit.cli.runs import cmd_runs

        return cmd_runs(args)
    if args.command == "report":
        from nnjit.cli.runs import cmd_report

        return cmd_report(args)
    from nnjit.cli.bench import cmd_bench

    return cmd_bench(args)
