"""Kill ``nnjit train`` with SIGKILL at random moments, resume it each time, compare the result.

An uninterrupted reference run is trained first. Then, in trials, the same config is trained in
a child process that is killed (SIGKILL) at a random moment (a quarter of the kills uniformly
within the reference's start-up, the others uniformly within the reference's training time
still to do, after the child's start-up ended), then started again with
``--resume last`` (or without it when the kill came before ``run.yaml`` existed, as the error
message of ``--resume`` then asks), killed again, and so on until a child finishes (or reports
the run finished). Each trial's run folder is then compared with the reference, bit for bit:
every checkpoint's tensors (weights, optimizer, RNG and shuffle order, fit state, callback
states) and metadata, and every ``idps.csv`` value but ``seconds`` (so the stop epoch too).
Every kill also records what it left: the epochs in ``idps.csv`` and ``last.nne``, and the
temporary files of interrupted atomic writes (which the next start must remove).

The config has early stopping (patience) and ReduceLROnPlateau, so the counters that a resume
must carry over are exercised.

Usage::

    python tools/kill_resume.py                       # 12 kills on digits (about 2-3 minutes)
    python tools/kill_resume.py --kills 30 --seed 1
    python tools/kill_resume.py --api                 # a Python script calling train_run
    python tools/kill_resume.py --kills 3 --data iris --epochs 12 --json out.json

Exit status 0 when every trial matches the reference and no temporary file is left, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CONFIGS = {  # a small net per data set: the run is dominated by its per-epoch file writes
    "digits": {"in_dim": 64, "out_dim": 10, "hidden_dims": [32], "batch_size": 32,
               "epochs": 60, "patience": 10, "lr": 0.003},
    "iris": {"in_dim": 4, "out_dim": 3, "hidden_dims": [8], "batch_size": 16,
             "epochs": 30, "patience": 5, "lr": 0.04},
}

#: What a train_run script does after a kill (``--api``): resume when the run folder has a
#: run.yaml, else start it (as nnjit train's error message for --resume asks).
API_SCRIPT = """\
import sys
from pathlib import Path
from nnjit.cli.train import load_config
from nnjit.experiment.data import load_run_data
from nnjit.experiment.run_errors import RunFinishedError
from nnjit.experiment.train_run import train_run

config = load_config(sys.argv[1])
root = Path(sys.argv[2])
data = load_run_data(config.data, False, config.train.seed, None)
resume = "last" if (root / config.config_hash() / "run.yaml").is_file() else None
try:
    train_run(config, data.X_train, data.y_train, data.X_val, data.y_val, root, resume=resume)
except RunFinishedError as e:
    print(e, file=sys.stderr)
    sys.exit(3)
"""


def write_config(folder: Path, data: str, epochs: int | None) -> Path:
    c = CONFIGS[data]
    dims = ", ".join(str(d) for d in c["hidden_dims"])
    path = folder / "config.yaml"
    path.write_text(
        "model:\n"
        f"  net: {{in_dim: {c['in_dim']}, out_dim: {c['out_dim']}, hidden_dims: [{dims}], "
        "dropout: 0.1}\n"
        f"optimizer: {{lr: {c['lr']}}}\n"
        "scheduler: {kind: plateau, patience: 2, factor: 0.5}\n"
        f"train: {{epochs: {epochs or c['epochs']}, batch_size: {c['batch_size']}, seed: 0, "
        f"patience: {c['patience']}}}\n"
        f"data: {data}\n", encoding="utf-8")
    return path


def command(args, config: Path, root: Path, resume: bool) -> list[str]:
    if args.api:
        script = root.parent / "train_run_script.py"
        if not script.exists():
            script.write_text(API_SCRIPT, encoding="utf-8")
        return [sys.executable, str(script), str(config), str(root)]
    installed = Path(sys.executable).with_name("nnjit")  # the console command, as users run it
    nnjit = [str(installed)] if installed.is_file() else [sys.executable, "-m", "nnjit"]
    return (nnjit + ["train", str(config), "--root", str(root), "-q"]
            + (["--resume", "last"] if resume else []))


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    env["NNJIT_COMPILE_NOTICE"] = "0"
    return env


def finished(proc: subprocess.CompletedProcess | subprocess.Popen, stderr: str) -> bool:
    """A child that trained to the end, or found the run already finished (a kill after the
    last epoch's files were written)."""
    return proc.returncode == 0 or (proc.returncode in (2, 3) and "is finished" in stderr)


#: The share of the kills that land in a child's start-up rather than in its training.
STARTUP_KILLS = 0.25


def wait_for_start(proc, root: Path, launched_wall: float) -> float | None:
    """Seconds until the child rewrote its run's ``metadata.yaml`` (``Run.create``: the
    start-up is over, training begins), or None when it exited first."""
    t0 = time.monotonic()
    while proc.poll() is None:
        folder = run_folder(root)
        try:
            if folder is not None and (folder / "metadata.yaml").stat().st_mtime >= launched_wall:
                return time.monotonic() - t0
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    return None


def run_folder(root: Path) -> Path | None:
    runs = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    return runs[0] if len(runs) == 1 else None


def temp_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.tmp"))


def kill_record(root: Path, delay: float) -> dict:
    """What a kill left in the runs root."""
    from nnjit.io.nne import load_nne

    folder = run_folder(root)
    rec = {"seconds_after_launch": round(delay, 3), "tmp_files": temp_files(root), "idps_epochs": 0,
           "last_epoch": None, "stage": "no run folder"}
    if folder is None:
        return rec
    idps = folder / "idps.csv"
    if idps.is_file():
        rec["idps_epochs"] = max(len(idps.read_text(encoding="utf-8").splitlines()) - 1, 0)
    last = folder / "checkpoints" / "last.nne"
    if last.is_file():
        rec["last_epoch"] = int(load_nne(last).metadata.get("epoch", 0))
        rec["stage"] = "training"
    elif (folder / "run.yaml").is_file():
        rec["stage"] = "no checkpoint yet"
    else:
        rec["stage"] = "no run.yaml yet"
    return rec


def compare(ref: Path, got: Path) -> list[str]:
    """Differences between two run folders (empty: bit-identical but for idps.csv's seconds)."""
    from nnjit.io.nne import load_nne

    diffs = []
    a_ck, b_ck = ref / "checkpoints", got / "checkpoints"
    names_a = sorted(p.name for p in a_ck.glob("*.nne"))
    names_b = sorted(p.name for p in b_ck.glob("*.nne"))
    if names_a != names_b:
        diffs.append(f"checkpoints {names_b} != {names_a}")
    for name in sorted(set(names_a) & set(names_b)):
        a, b = load_nne(a_ck / name), load_nne(b_ck / name)
        if a.metadata != b.metadata:
            keys = sorted(k for k in set(a.metadata) | set(b.metadata)
                          if a.metadata.get(k) != b.metadata.get(k))
            diffs.append(f"{name}: metadata differs in {keys}")
        for group in sorted(set(a.groups) | set(b.groups)):
            ta, tb = a.groups.get(group, {}), b.groups.get(group, {})
            for tensor in sorted(set(ta) | set(tb)):
                x, y = ta.get(tensor), tb.get(tensor)
                if x is None or y is None or x.dtype != y.dtype or x.shape != y.shape \
                        or x.tobytes() != y.tobytes():
                    diffs.append(f"{name}: {group}/{tensor} differs")
    rows_a, rows_b = _idps(ref), _idps(got)
    if rows_a != rows_b:
        n = next((i for i, (x, y) in enumerate(zip(rows_a, rows_b)) if x != y),
                 min(len(rows_a), len(rows_b)))
        diffs.append(f"idps.csv differs from row {n + 1} ({len(rows_b)} rows, reference "
                     f"{len(rows_a)})")
    return diffs


def _idps(folder: Path) -> list[list[str]]:
    import csv

    with open(folder / "idps.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    drop = rows[0].index("seconds")
    return [r[:drop] + r[drop + 1:] for r in rows]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=12, help="SIGKILLs in all (default 12)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the kill delays")
    parser.add_argument("--data", choices=sorted(CONFIGS), default="digits")
    parser.add_argument("--epochs", type=int, help="the config's train.epochs")
    parser.add_argument("--api", action="store_true",
                        help="a Python script calling train_run instead of nnjit train")
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--max-trials", type=int, default=50)
    parser.add_argument("--no-warmup", action="store_true",
                        help="one reference run, not two (when the training loop is compiled "
                        "already, e.g. in the test suite)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="nnjit-kill-resume-"))
    work.mkdir(parents=True, exist_ok=True)
    config = write_config(work, args.data, args.epochs)
    env = child_env()
    rng = random.Random(args.seed)

    # The reference run, twice: the first may compile the training loop (a cold cache); the
    # second, timed, sets the range of the kill delays and must equal the first.
    for name in ("reference",) if args.no_warmup else ("warmup", "reference"):
        ref_root = work / name
        with open(work / f"{name}.stderr", "w", encoding="utf-8") as err:
            proc = subprocess.Popen(command(args, config, ref_root, False), env=env,
                                    stdout=subprocess.DEVNULL, stderr=err)
        t0 = time.monotonic()
        startup = wait_for_start(proc, ref_root, time.time())
        proc.wait()
        ref_seconds = time.monotonic() - t0
        if proc.returncode != 0 or startup is None:
            print(f"the {name} run failed:\n{(work / f'{name}.stderr').read_text()}",
                  file=sys.stderr)
            return 1
    train_seconds = max(ref_seconds - startup, 0.05)
    ref = run_folder(ref_root)
    ref_epochs = len(_idps(ref)) - 1
    if not args.no_warmup and compare(run_folder(work / "warmup"), ref):
        print(f"two uninterrupted runs differ: {compare(run_folder(work / 'warmup'), ref)}",
              file=sys.stderr)
        return 1

    kills, trials = [], []
    while len(kills) < args.kills and len(trials) < args.max_trials:
        root = work / f"trial{len(trials):02d}"
        trial = {"kills": 0, "starts": 0, "failures": [], "resumed_from_start": 0}
        while True:
            folder = run_folder(root)
            resume = folder is not None and (folder / "run.yaml").is_file()
            done = kill_record(root, 0.0)["idps_epochs"]
            out = root.parent / f"{root.name}.stderr"
            with open(out, "w", encoding="utf-8") as err:
                proc = subprocess.Popen(command(args, config, root, resume), env=env,
                                        stdout=subprocess.DEVNULL, stderr=err)
            launched, launched_wall = time.monotonic(), time.time()
            trial["starts"] += 1
            killed = False
            if len(kills) < args.kills:
                # A quarter of the kills at a random moment of the start-up (imports, data,
                # run folder), the others at a random moment of the training that remains.
                if rng.random() < STARTUP_KILLS:
                    moment = rng.uniform(0.0, startup)
                    deadline = launched + moment
                else:
                    left = max(ref_epochs - done, 1) / ref_epochs
                    moment = rng.uniform(0.0, train_seconds * left)
                    started = wait_for_start(proc, root, launched_wall)
                    deadline = time.monotonic() + moment if started is not None else None
                if deadline is not None and proc.poll() is None:
                    try:
                        proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
                    except subprocess.TimeoutExpired:
                        proc.send_signal(signal.SIGKILL)
                        proc.wait()
                        killed = True
                        kills.append(kill_record(root, time.monotonic() - launched))
                        trial["kills"] += 1
            proc.wait()
            stderr = out.read_text(encoding="utf-8")
            if "ResumeFromStartWarning" in stderr:
                trial["resumed_from_start"] += 1
            if killed:
                continue
            if finished(proc, stderr):
                break
            trial["failures"].append(f"exit {proc.returncode}: {stderr.strip()[-500:]}")
            break
        folder = run_folder(root)
        trial["tmp_files_left"] = temp_files(root)
        trial["diffs"] = (compare(ref, folder) if folder is not None and not trial["failures"]
                          else ["no finished run"])
        trials.append(trial)

    identical = sum(1 for t in trials if not t["diffs"] and not t["tmp_files_left"])
    stages = {}
    for k in kills:
        stages[k["stage"]] = stages.get(k["stage"], 0) + 1
    figures = {
        "data": args.data, "mode": "train_run script" if args.api else "nnjit train",
        "seed": args.seed, "reference_epochs": ref_epochs,
        "reference_seconds": round(ref_seconds, 2),
        "reference_startup_seconds": round(startup, 2), "kills": len(kills), "trials": len(trials),
        "trials_bit_identical": identical,
        "kills_leaving_tmp_files": sum(1 for k in kills if k["tmp_files"]),
        "tmp_files_left_at_the_end": sum(len(t["tmp_files_left"]) for t in trials),
        "kill_stages": stages, "kills_per_trial": [t["kills"] for t in trials],
        "resumed_from_start": sum(t["resumed_from_start"] for t in trials),
        "failures": [f for t in trials for f in t["failures"]],
        "differences": [d for t in trials for d in t["diffs"]],
        "kill_records": kills,
    }
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(f"{figures['mode']} on {args.data}: reference {ref_epochs} epochs in "
          f"{ref_seconds:.1f} s ({startup:.1f} s start-up); {len(kills)} kills (SIGKILL) in "
          f"{len(trials)} trials (seed {args.seed}); stages at the kill: {stages}")
    print(f"kills that left .tmp files: {figures['kills_leaving_tmp_files']}; .tmp files left "
          f"after the final start: {figures['tmp_files_left_at_the_end']}; runs resumed from the "
          f"start (no checkpoint yet): {figures['resumed_from_start']}")
    print(f"trials bit-identical to the reference (every checkpoint tensor and metadata, "
          f"idps.csv but seconds): {identical} of {len(trials)}")
    for line in figures["failures"] + figures["differences"]:
        print("  " + line)
    ok = identical == len(trials) and len(kills) >= args.kills
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
