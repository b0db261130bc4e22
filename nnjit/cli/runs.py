"""``nnjit runs list``, ``nnjit runs show ID`` and ``nnjit report ID``."""

from __future__ import annotations

import math
import os
import sys

from nnjit.cli.errors import CommandError


def summary_line(history) -> str:
    """``epoch E, train_loss ..., val_loss ..., val_accuracy ..., lr ...`` of the last row."""
    last = history.iloc[-1]
    parts = [f"epoch {int(last['epoch'])}"]
    for col in ("train_loss", "val_loss", "val_accuracy", "lr"):
        if col in last and not math.isnan(last[col]):
            parts.append(f"{col} {last[col]:.4g}")
    return ", ".join(parts)


def warn(command: str, text: str) -> None:
    """One warning line on stderr: ``nnjit <command>: <text>``."""
    print(f"nnjit {command}: " + " ".join(text.split()), file=sys.stderr)


def load_run(run_id: str, root):
    """The run, or a CommandError naming it (an invalid id, no such run, an unreadable or
    invalid run.yaml, a symlink out of the runs root)."""
    from nnjit.experiment.run_folder import Run

    try:
        return Run.load(run_id, root)
    except ValueError as e:
        raise CommandError(str(e)) from e
    except FileNotFoundError as e:
        raise CommandError(f"{e} (nnjit runs list --root {root} lists the runs)") from e


def cmd_runs(args) -> int:
    from nnjit.experiment.run_folder import Run

    if args.runs_command in ("list", None):  # (nnjit runs alone: the list)
        return list_runs(args.root)
    run = load_run(args.id, args.root)
    print(f"run {run.display}")
    print("config:")
    print("  " + run.config.to_yaml(full=True).rstrip().replace("\n", "\n  "))
    try:
        meta = run.metadata()
    except ValueError as e:  # RunFileError: the rest of the run can still be shown
        warn("runs show", str(e))
        meta = {}
    if meta:
        print("metadata: " + ", ".join(f"{_short(k)} {_short(v)}" for k, v in meta.items()))
    try:
        hist = run.history()
        last = summary_line(hist) if len(hist) else ""
    except (ValueError, KeyError, TypeError, OSError) as e:
        warn("runs show", f"cannot read {run.display}/idps.csv: {_short(e)}")
        hist, last = [], ""
    print(f"epochs: {len(hist)}")
    if last:
        print("last: " + last)
    folder = run.path / "checkpoints"
    saved = []
    for p in sorted(folder.glob("*.nne")):
        try:
            saved.append(f"{p.stem} (epoch {run.checkpoint_epoch(p.stem)})")
        except (ValueError, OSError):
            saved.append(p.stem)
    print("checkpoints: " + (", ".join(saved) or "none"))
    return 0


def list_runs(root) -> int:
    """``nnjit runs list``: a line per run; a run that cannot be read is skipped with a warning
    line on stderr naming it (the others are still listed)."""
    from nnjit.experiment.run_folder import Run

    runs, skipped = Run.scan(root)
    for error in skipped:
        warn("runs list", f"skipped {error.folder}: {error}")
    rows = []
    for run in runs:
        try:
            hist = run.history()
            best = best_summary(run.config.train, hist)
        except (ValueError, KeyError, TypeError, OSError) as e:  # a damaged idps.csv
            warn("runs list", f"skipped {run.display}: cannot read its idps.csv: {_short(e)}")
            continue
        net = run.config.model.net
        shape = "-".join(map(str, (net.in_dim, *net.hidden_dims, net.out_dim)))
        rows.append(f"{run.id:<14}{len(hist):>8}  {best:<32}{net.kind.value} {shape}")
    if not rows:
        print(f"no {'readable ' if runs or skipped else ''}runs in {root}")
        return 0
    print(f"{'id':<14}{'epochs':>8}  {'best (the monitored metric)':<32}net")
    print("\n".join(rows))
    return 0


def best_summary(train, hist) -> str:
    """``"val_accuracy 0.9412 @ 92"``: the run's monitored metric (its config's ``monitor``,
    else val_loss with validation data, else train_loss) at its best epoch (highest for
    accuracies or ``mode: max``, lowest otherwise), as the run's best checkpoint holds it."""
    has_val = "val_loss" in hist and hist["val_loss"].notna().any()
    monitor = train.monitor or ("val_loss" if has_val else "train_loss")
    values = hist[monitor] if monitor in hist else None
    if values is None or not values.notna().any():
        return f"{monitor} -"
    mode = train.mode if train.mode != "auto" else ("max" if "acc" in monitor else "min")
    at = values.idxmax() if mode == "max" else values.idxmin()
    epoch = int(hist["epoch"][at]) if "epoch" in hist else int(at) + 1
    return f"{monitor} {values[at]:.4g} @ {epoch}"


def _short(value) -> str:
    """``str(value)`` cut to a bounded excerpt, for printing file contents."""
    from nnjit.experiment.excerpt import EXCERPT_CHARS

    text = str(value)
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."


def cmd_report(args) -> int:
    from nnjit.experiment.report import write_report
    from nnjit.experiment.run_errors import RunFileError

    run = load_run(args.id, args.root)
    try:
        out = write_report(run, args.output)
    except RunFileError as e:  # e.g. an invalid metadata.yaml
        raise CommandError(str(e)) from e
    except ValueError as e:  # a damaged file of the run (idps.csv, a checkpoint)
        raise CommandError(f"run {run.display}: {e}") from e
    shown = args.output if args.output else f"{run.display}/{os.path.basename(out)}"
    print(f"report written to {shown}")
    return 0
