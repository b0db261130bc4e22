"""``nnjit train CONFIG.yaml``: train (or resume) the run of a RunConfig on a data set or CSV."""

from __future__ import annotations

from nnjit.cli.errors import CommandError
from nnjit.cli.runs import summary_line


def load_config(path: str):
    """The RunConfig of a YAML file, or a CommandError naming the file and what is wrong."""
    import yaml

    from nnjit.experiment import RunConfig

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise CommandError(f"cannot read the config {path}: {e.strerror or e}; give the path "
                           "of a RunConfig YAML file") from e
    except UnicodeDecodeError as e:
        raise CommandError(f"cannot read the config {path}: not UTF-8 text ({e.reason})") from e
    try:
        return RunConfig.from_yaml(text)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(e, "problem", None) or str(e)
        raise CommandError(f"invalid config {path}: not valid YAML{at}: {problem} (plain YAML "
                           "only: no !!python tags)") from e
    except (ValueError, TypeError) as e:
        raise CommandError(f"invalid config {path}: {e}") from e


def load_data(spec: str, config, target: str | None):
    """(X_train, y_train, X_val, y_val, run data) from a built-in data set name or a CSV path."""
    from nnjit.experiment.data import load_run_data

    regression = not config.model.loss.builder().is_classification
    try:
        data = load_run_data(spec, regression, config.train.seed, target)
    except FileNotFoundError as e:
        raise CommandError(f"{e}; give a built-in data set name or an existing .csv file") from e
    except (ValueError, TypeError) as e:
        raise CommandError(f"cannot use the data {spec}: {e}") from e
    except OSError as e:
        raise CommandError(f"cannot read the data {spec}: {e.strerror or e}") from e
    if hasattr(data, "graph"):  # a graph: full batch on its own train / val masks
        return data.graph, None, None, None, data
    return data.X_train, data.y_train, data.X_val, data.y_val, data


def cmd_train(args) -> int:
    from nnjit.experiment import Checkpoints
    from nnjit.experiment.runs import train_run

    config = load_config(args.config)
    spec = args.data or config.data
    if not spec:
        raise CommandError("no data: set 'data' in the config or pass --data NAME|CSV")
    X, y, Xv, yv, _ = load_data(spec, config, args.target)
    callbacks = []
    if not args.quiet:
        from nnjit.train.builtin_callbacks import ProgressBar

        callbacks.append(ProgressBar())
    resume = Checkpoints.get(args.resume) if args.resume else None
    run, trainer, history = train_run(config, X, y, Xv, yv, args.root, resume=resume,
                                      epochs=args.epochs, callbacks=callbacks,
                                      metadata={"data": spec, "data_target": args.target})
    print(f"run {run.display}: {len(history)} epochs")
    if len(history):
        print(summary_line(history))
    return 0
