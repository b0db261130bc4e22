"""``nnjit train CONFIG.yaml``: train (or resume) the run of a RunConfig on a data set or CSV."""

from __future__ import annotations

import sys

from nnjit.cli.errors import CommandError, os_error_line
from nnjit.cli.runs import summary_line


def load_config(path: str):
    """The RunConfig of a YAML file, or a CommandError naming the file and what is wrong."""
    import yaml
    import yaml.constructor

    from nnjit.experiment import RunConfig
    from nnjit.experiment.safe_yaml import ConfigLoader, describe_yaml_error, read_yaml_file

    try:  # bounded: at most 64 KiB, never a FIFO or a device such as /dev/zero
        data = read_yaml_file(path, ConfigLoader)
    except OSError as e:
        raise CommandError(f"cannot read the config {path}: {e.strerror or e}; give the path "
                           "of a RunConfig YAML file") from e
    except yaml.YAMLError as e:
        hint = ("; a config is plain YAML (mappings, lists, numbers, strings): no !! tags"
                if isinstance(e, yaml.constructor.ConstructorError) else "")
        what = describe_yaml_error(e)  # "line L, column C: problem", or the problem alone
        at = " at " if what.startswith("line ") else ": "
        raise CommandError(f"invalid config {path}: not valid YAML{at}{what}{hint}") from e
    try:
        return RunConfig.from_state({} if data is None else data)
    except (ValueError, TypeError) as e:
        raise CommandError(f"invalid config {path}: {e}") from e


def load_data(spec: str, config, target: str | None):
    """(X_train, y_train, X_val, y_val, run data) from a built-in data set name, a CSV path,
    ``fashion_mnist:PATH`` or a generated series (``sine_series``)."""
    from nnjit.experiment.data import is_csv, load_run_data
    from nnjit.experiment.series import SERIES_SOURCES

    regression = not config.model.loss.builder().is_classification
    try:
        data = load_run_data(spec, regression, config.train.seed, target)
    except FileNotFoundError as e:
        raise CommandError(f"{e}; give a built-in data set name, an existing .csv file or "
                           "fashion_mnist:PATH") from e
    except (ValueError, TypeError) as e:
        hint = "" if is_csv(spec) or spec in SERIES_SOURCES else (
            " (or give the path of a .csv file)")
        raise CommandError(f"cannot use the data {spec}: {e}{hint}") from e
    except OSError as e:
        raise CommandError(f"cannot read the data {spec}: {e.strerror or e}") from e
    if hasattr(data, "graph"):  # a graph: full batch on its own train / val masks
        return data.graph, None, None, None, data
    return data.X_train, data.y_train, data.X_val, data.y_val, data


def check_shapes(config, X, y, y_val, spec: str, path: str) -> None:
    """A CommandError when the config's network does not fit the data (input width, classes of
    a cross-entropy run, regression targets of an MSE run), naming the setting to change."""
    from nnjit.experiment.data_fit import check_data_fits

    try:
        check_data_fits(config, X, y, y_val, spec)
    except ValueError as e:
        raise CommandError(f"config {path} does not fit the data: {e}") from None


#: The exit status of a run stopped by Ctrl-C (128 + SIGINT, the shells' convention).
INTERRUPTED = 130


def cmd_train(args) -> int:
    from nnjit.distributed import DistributedFitError
    from nnjit.experiment import Checkpoints
    from nnjit.experiment.run_errors import RunError
    from nnjit.experiment.train_run import train_run

    config = load_config(args.config)
    spec = args.data or config.data
    if not spec:
        raise CommandError("no data: set 'data' in the config or pass --data "
                           "NAME|CSV|fashion_mnist:PATH")
    X, y, Xv, yv, data = load_data(spec, config, args.target)
    check_shapes(config, X, y, yv, spec, args.config)
    distributed = _mpi_if_launched()
    talks = distributed is None or distributed.is_root  # (MPI: rank 0 alone prints)
    callbacks = []
    if not args.quiet and talks:
        from nnjit.train.progress import ProgressBar

        callbacks.append(ProgressBar())
    resume = Checkpoints.get(args.resume) if args.resume else None
    try:
        run, trainer, history = train_run(config, X, y, Xv, yv, args.root, resume=resume,
                                          overwrite=args.overwrite, epochs=args.epochs,
                                          callbacks=callbacks,
                                          metadata={"data": spec, "data_target": args.target},
                                          encoding=getattr(data, "encoding", None),
                                          distributed=distributed)
    except KeyboardInterrupt:  # a second Ctrl-C: the epoch running was abandoned
        print("nnjit train: interrupted; the run keeps its completed epochs (nnjit train "
              f"{args.config} --resume last continues it)", file=sys.stderr)
        return INTERRUPTED
    except RunError as e:
        raise CommandError(_run_error_line(e, args)) from e
    except DistributedFitError as e:  # (every rank says it; mpirun shows each)
        raise CommandError(f"{e} (config {args.config})") from e
    except ValueError as e:  # train_run's documented ValueErrors: a damaged or forged file of
        # the run (a checkpoint, idps.csv, encoding.json), its data changed since it started
        raise CommandError(f"cannot {'resume' if resume else 'train'} the run of {args.config}"
                           f": {e}") from e
    except OSError as e:
        raise CommandError(f"{os_error_line(e, 'write')} (the runs root is {args.root}; pass "
                           "--root with a folder you can write)") from e
    if not talks:
        return 0
    print(f"run {run.display}: {len(history)} epochs"
          + (f" on {distributed.size} MPI ranks" if distributed is not None else ""))
    if len(history):
        print(summary_line(history))
        for line in _outcome_lines(run, trainer, history, data):
            print(line)
    reason = getattr(getattr(trainer, "history_", None), "attrs", {}).get("stop_reason", "")
    # a shell script tells an interrupted run from a finished one, as after any Ctrl-C
    return INTERRUPTED if str(reason).startswith("interrupted") else 0


def _outcome_lines(run, trainer, history, data) -> list[str]:
    """Why the fit stopped, the best epoch of the monitored metric (the best checkpoint's), and
    that checkpoint's accuracy on the evaluation data (test, else validation) when the run is a
    classification with such data."""
    import numpy as np

    from nnjit.cli.runs import best_summary
    from nnjit.experiment import Checkpoints

    reason = getattr(trainer, "history_", None)
    reason = None if reason is None else reason.attrs.get("stop_reason")
    lines = [f"stopped: {reason}"] if reason else []
    lines.append(f"best: {best_summary(run.config.train, history)}")
    if not run.config.model.loss.builder().is_classification or data is None:
        return lines
    try:
        X, y, where = data.evaluation()
        if len(y) == 0:
            return lines
        logits = run.checkpoint_outputs(X, Checkpoints.BEST)
    except (FileNotFoundError, ValueError, AttributeError):  # no best checkpoint, no such data
        return lines
    labels = np.asarray(y).reshape(len(y), -1)
    labels = labels[:, 0] if labels.shape[1] == 1 else labels.argmax(axis=1)
    predicted = logits.argmax(axis=1) if logits.shape[1] > 1 else (logits[:, 0] > 0)
    accuracy = float(np.mean(predicted.astype(np.int64) == labels.astype(np.int64)))
    epoch = run.checkpoint_epoch(Checkpoints.BEST)
    lines.append(f"{where} accuracy of the best checkpoint (epoch {epoch}): {accuracy:.4f}")
    return lines


def _mpi_if_launched():
    """``nnjit.MPI()`` when this process is one of several ranks started by ``mpirun``/``srun``
    (data-parallel training), else None."""
    from nnjit.distributed import MPI, launched_by_mpi

    if not launched_by_mpi():
        return None
    try:
        mpi = MPI()
    except ImportError as e:
        raise CommandError(f"nnjit train was started by an MPI launcher but {e}") from e
    return mpi if mpi.size > 1 else None


def _finished(run, args):
    """The RunFinishedError ``--resume last`` would meet on ``run`` (finished by its epochs or
    by early stopping), or None when resuming it would train."""
    from nnjit.experiment import Checkpoints
    from nnjit.experiment.run_errors import RunError, RunFinishedError
    from nnjit.experiment.train_run import _check_resumable

    try:
        _check_resumable(run, Checkpoints.LAST, max(args.epochs or 0, run.config.train.epochs))
    except RunFinishedError as finished:
        return finished
    except (RunError, OSError, ValueError):  # no readable last checkpoint: the general advice
        return None
    return None


def _run_error_line(error, args) -> str:
    """The CLI wording (its options, not train_run's arguments) of a RunError."""
    from nnjit.experiment.run_errors import NoCheckpointError, RunExistsError, RunFinishedError

    run = error.run
    if isinstance(error, RunExistsError):
        finished = _finished(run, args)
        if finished is None:
            return (f"run {run.display} already exists ({error.epochs_done} of "
                    f"{run.config.train.epochs} epochs done); pass --resume last (or best) to "
                    "continue it, or --overwrite to delete its history and checkpoints and "
                    "train it again")
        error = finished  # (resuming it would only say so: say what works at once)
    if isinstance(error, RunFinishedError):
        if error.stopped_early:
            return (f"run {run.display} is finished: early stopping ended it at epoch "
                    f"{error.epoch} of {run.config.train.epochs}; change train.patience in the "
                    "config for a new run, or pass --overwrite to train this one again")
        return (f"run {run.display} is finished (at epoch {error.epoch} of {error.target}); "
                f"to train on, pass --epochs M with M > {error.epoch} "
                f"(e.g. --resume {args.resume or 'last'} --epochs {2 * error.epoch}), or "
                "--overwrite to train it again")
    if isinstance(error, NoCheckpointError):
        return (str(error).removeprefix("train_run: ").replace("train it without resume",
                                                                "run nnjit train without --resume"))
    return str(error)
