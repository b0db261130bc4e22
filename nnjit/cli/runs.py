"""``nnjit runs list``, ``nnjit runs show ID`` and ``nnjit report ID``."""

from __future__ import annotations

import math
import os

from nnjit.cli.errors import CommandError


def summary_line(history) -> str:
    """``epoch E, train_loss ..., val_loss ..., val_accuracy ..., lr ...`` of the last row."""
    last = history.iloc[-1]
    parts = [f"epoch {int(last['epoch'])}"]
    for col in ("train_loss", "val_loss", "val_accuracy", "lr"):
        if col in last and not math.isnan(last[col]):
            parts.append(f"{col} {last[col]:.4g}")
    return ", ".join(parts)


def load_run(run_id: str, root):
    """The run, or a CommandError naming it (an invalid id, no such run)."""
    from nnjit.experiment.runs import Run

    try:
        return Run.load(run_id, root)
    except ValueError as e:
        raise CommandError(str(e)) from e
    except FileNotFoundError as e:
        raise CommandError(f"{e} (nnjit runs list --root {root} lists the runs)") from e


def cmd_runs(args) -> int:
    from nnjit.experiment.runs import Run

    if args.runs_command == "list":
        runs = Run.all(args.root)
        if not runs:
            print(f"no runs in {args.root}")
            return 0
        print(f"{'id':<14}{'epochs':>8}{'best val_loss':>15}  net")
        for run in runs:
            hist = run.history()
            best = hist["val_loss"].min() if len(hist) and hist["val_loss"].notna().any() \
                else float("nan")
            net = run.config.model.net
            shape = "-".join(map(str, (net.in_dim, *net.hidden_dims, net.out_dim)))
            print(f"{run.id:<14}{len(hist):>8}{best:>15.4g}  {net.kind.value} {shape}")
        return 0
    run = load_run(args.id, args.root)
    print(f"run {run.display}")
    print("config:")
    print("  " + run.config.to_yaml().rstrip().replace("\n", "\n  "))
    meta = run.metadata()
    if meta:
        print("metadata: " + ", ".join(f"{k} {v}" for k, v in meta.items()))
    hist = run.history()
    print(f"epochs: {len(hist)}")
    if len(hist):
        print("last: " + summary_line(hist))
    folder = run.path / "checkpoints"
    saved = []
    for p in sorted(folder.glob("*.nne")):
        try:
            saved.append(f"{p.stem} (epoch {run.checkpoint_epoch(p.stem)})")
        except (ValueError, OSError):
            saved.append(p.stem)
    print("checkpoints: " + (", ".join(saved) or "none"))
    return 0


def cmd_report(args) -> int:
    from nnjit.experiment.runs import write_report

    run = load_run(args.id, args.root)
    out = write_report(run, args.output)
    shown = args.output if args.output else f"{run.display}/{os.path.basename(out)}"
    print(f"report written to {shown}")
    return 0
