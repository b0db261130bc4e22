"""Fuzz the ``nnjit`` command line with forged run folders and hostile CSV input.

Every expected failure of ``nnjit predict``, ``train --resume``, ``report`` and ``runs show`` must
be one line on stderr with exit status 2; nothing may crash, hang, print a traceback, print a
line longer than :data:`MAX_LINE` characters, or touch a file outside the run through a link.

A base run is trained once by the installed command (an Iris MLP on a CSV with a categorical
column, 4 epochs). Each case copies it, changes one thing chosen deterministically from the case
number and the seed, and runs one command:

* ``config``: a field of a checkpoint's ``run_config`` metadata replaced (huge, negative, wrong
  type, nested), the file re-encoded by nnjit's writer (valid SHA-256);
* ``params``: a checkpoint tensor's shape, dtype or values changed, one removed or added;
* ``encoding``: the checkpoint's or ``encoding.json``'s encoding changed (categories that
  collide, wrong types, a long value), or ``encoding.json``'s bytes damaged;
* ``idps``: ``idps.csv``'s bytes damaged (truncated, invalid UTF-8, binary);
* ``csv``: a cell of the CSV to predict replaced (1e39, inf, a 1 MB string, an unseen category,
  text in a numeric column), or the file made empty, binary or a FIFO;
* ``link``: ``checkpoints/``, ``idps.csv`` or ``encoding.json`` replaced by a symbolic link out
  of the run.

Outcomes: ``ok`` (exit 0), ``refused`` (exit 2, one line), and the failures ``traceback`` (any
other exit status, or a traceback), ``crash`` (killed by a signal), ``hang`` (past
``--timeout``), ``long line`` (a stderr line over MAX_LINE characters), ``escaped`` (a file
outside the run changed).

Usage::

    python tools/fuzz_cli.py --cases 100 --seed 0 --out fuzz-cli
    python tools/fuzz_cli.py --case 7 --out fuzz-cli     # one case, its command and output

Writes ``<out>/summary.json``; exits 1 on any failure outcome.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

MAX_LINE = 1000
KINDS = ("config", "params", "encoding", "idps", "csv", "link")
FAILURES = ("traceback", "crash", "hang", "long line", "escaped")
REPO = Path(__file__).resolve().parents[1]


def nnjit(*args, cwd, timeout):
    """The installed ``nnjit`` command (next to this Python) with this checkout first."""
    exe = shutil.which("nnjit", path=os.path.dirname(sys.executable)) or shutil.which("nnjit")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    env["NNJIT_COMPILE_NOTICE"] = "0"
    return subprocess.run(
        [exe, *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
    )


def _table(n: int, seed: int):
    import pandas as pd

    import nnjit as nn

    X, y = nn.datasets.load_iris()
    rows = np.random.default_rng(seed).choice(len(X), n, replace=False)
    df = pd.DataFrame(X[rows], columns=["sl", "sw", "pl", "pw"])
    df["band"] = np.where(df["sl"] > 5.8, "long", "short")
    df["species"] = np.array(["setosa", "versicolor", "virginica"])[y[rows]]
    return df


def base_run(out: Path) -> tuple[Path, str]:
    """The trained base folder (made once under ``out``) and its run id."""
    from nnjit.experiment import ModelConfig, NetConfig, OptimizerConfig, RunConfig, TrainConfig

    folder = out / "base"
    cfg = RunConfig(
        model=ModelConfig(net=NetConfig(in_dim=6, out_dim=3, hidden_dims=(8,))),
        optimizer=OptimizerConfig(lr=0.05),
        train=TrainConfig(epochs=4, batch_size=16, patience=None),
        data="train.csv",
    )
    run_id = cfg.config_hash()
    if not (folder / "runs" / run_id / "checkpoints" / "last.nne").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        _table(120, 0).to_csv(folder / "train.csv", index=False)
        (folder / "cfg.yaml").write_text(cfg.to_yaml())
        done = nnjit("train", "cfg.yaml", "-q", cwd=folder, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"the base run failed to train:\n{done.stderr}")
        _table(20, 1).to_csv(folder / "new.csv", index=False)
    return folder, run_id


def _forge(path: Path, metadata=None, params=None) -> None:
    from nnjit.io.nne import load_nne, save_nne

    nne = load_nne(path)
    groups = {g: {k: np.array(v) for k, v in t.items()} for g, t in nne.groups.items()}
    meta = copy.deepcopy(nne.metadata)
    if metadata:
        metadata(meta)
    if params:
        params(groups["params"])
    save_nne(path, groups, meta)


def _hostile(rng: random.Random):
    return rng.choice(
        [
            10**7,
            10**12,
            -1,
            0,
            2**63,
            1e308,
            "x" * 100_000,
            "",
            None,
            True,
            [10**6] * 50,
            {"a": [[[]]]},
            [[1, 2], [3]],
            3.5,
            "mlp",
            -0.0,
        ]
    )


def _paths(state, prefix=()):
    """Every (path, value) leaf of a JSON-like state."""
    if isinstance(state, dict):
        for k, v in state.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(state, list) and state:
        for i, v in enumerate(state):
            yield from _paths(v, (*prefix, i))
    else:
        yield prefix, state


def _set(state, path, value) -> None:
    for key in path[:-1]:
        state = state[key]
    state[path[-1]] = value


def mutate(kind: str, rng: random.Random, work: Path, run: Path, outside: Path) -> str:
    """Apply one change of ``kind`` in ``work``; returns what it did (for the summary)."""
    from nnjit.train.checkpoint import ENCODING, RUN_CONFIG

    checkpoints = run / "checkpoints"
    ckpt = checkpoints / rng.choice(["last.nne", "best.nne"])
    if kind == "config":

        def change(meta):
            paths = [p for p, _ in _paths(meta[RUN_CONFIG])]
            path = rng.choice(paths)
            _set(meta[RUN_CONFIG], path, _hostile(rng))
            change.what = "/".join(map(str, path))

        _forge(ckpt, metadata=change)
        return f"{ckpt.name} run_config {change.what}"
    if kind == "params":
        op = rng.choice(["shape", "dtype", "remove", "add", "values"])

        def change(params):
            name = rng.choice(sorted(params))
            if op == "shape":
                params[name] = np.zeros(
                    tuple(rng.randint(0, 9) for _ in range(rng.randint(0, 3))), np.float32
                )
            elif op == "dtype":
                params[name] = params[name].astype(rng.choice([np.float64, np.int32, np.uint8]))
            elif op == "remove":
                del params[name]
            elif op == "add":
                params[f"{rng.randint(0, 99)}.weight"] = np.ones((2, 2), np.float32)
            else:
                params[name][...] = rng.choice([np.nan, np.inf, 1e38, 0.0])

        _forge(ckpt, params=change)
        return f"{ckpt.name} params {op}"
    if kind == "encoding":
        target = rng.choice(["checkpoint", "json", "json bytes"])
        if target == "json bytes":
            path = run / "encoding.json"
            data = bytearray(path.read_bytes())
            op = rng.choice(["truncate", "flip", "nest", "binary"])
            if op == "truncate":
                data = data[: rng.randint(0, len(data))]
            elif op == "flip":
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            elif op == "nest":
                data = bytearray(b"[" * 200_000 + b"]" * 200_000)
            else:
                data = bytearray(os.urandom(64))
            path.write_bytes(bytes(data))
            return f"encoding.json {op}"
        value = rng.choice(
            [[True, 1], [1, 1.0], ["a", "a"], [], ["x" * 100_000], 5, [None], [[1]], [{"a": 1}]]
        )
        if target == "checkpoint":

            def change(meta):
                column = next(c for c in meta[ENCODING]["columns"] if c["kind"] == "categorical")
                column["categories"] = value

            _forge(ckpt, metadata=change)
        else:
            path = run / "encoding.json"
            state = json.loads(path.read_text())
            field = rng.choice(["categories", "classes", "target", "mean"])
            if field == "categories":
                next(c for c in state["columns"] if c["kind"] == "categorical")[field] = value
            elif field == "mean":
                state["columns"][0]["mean"] = _hostile(rng)
            else:
                state[field] = value
            path.write_text(json.dumps(state))
        return f"encoding {target} {str(value)[:30]}"
    if kind == "idps":
        path = run / "idps.csv"
        data = path.read_bytes()
        op = rng.choice(["truncate", "utf8", "binary", "columns"])
        if op == "truncate":
            data = data[: rng.randint(0, len(data))]
        elif op == "utf8":
            data = data[:30] + b"\xff\xfe\x80" + data[30:]
        elif op == "binary":
            data = os.urandom(200)
        else:
            data = b"a,b\n1,2\n"
        path.write_bytes(data)
        return f"idps.csv {op}"
    if kind == "csv":
        import pandas as pd

        path = work / "new.csv"
        op = rng.choice(["1e39", "inf", "long", "unseen", "text", "empty", "binary", "fifo"])
        if op in ("empty", "binary", "fifo"):
            path.unlink()
            if op == "fifo":
                os.mkfifo(path)
            else:
                path.write_bytes(b"" if op == "empty" else os.urandom(300))
            return f"new.csv {op}"
        df = pd.read_csv(path).astype(object)
        row = rng.randrange(len(df))
        column = "band" if op in ("long", "unseen") else rng.choice(["sl", "sw", "pl", "pw"])
        df.loc[row, column] = {
            "1e39": 1e39,
            "inf": "inf",
            "long": "y" * 1_000_000,
            "unseen": "medium",
            "text": "abc",
        }[op]
        df.to_csv(path, index=False)
        return f"new.csv {op} in {column}"
    what = rng.choice(["checkpoints", "idps.csv", "encoding.json"])
    target = outside / what
    path = run / what
    if what == "checkpoints":
        shutil.copytree(path, target)
        shutil.rmtree(path)
    else:
        shutil.copy(path, target)
        path.unlink()
    path.symlink_to(target, target_is_directory=what == "checkpoints")
    return f"{what} linked out of the run"


def _snapshot(folder: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_case(case: int, seed: int, base: Path, run_id: str, timeout: float) -> dict:
    """One case in a temporary copy of ``base``: its kind, change, command and outcome."""
    rng = random.Random(seed * 1_000_003 + case)
    kind = KINDS[case % len(KINDS)]
    with tempfile.TemporaryDirectory(prefix="nnjit-fuzz-cli-") as tmp:
        work, outside = Path(tmp) / "w", Path(tmp) / "outside"
        shutil.copytree(base, work, symlinks=True)
        outside.mkdir()
        run = work / "runs" / run_id
        change = mutate(kind, rng, work, run, outside)
        before = _snapshot(outside)
        commands = {
            "predict run": ("predict", run_id, "--data", "new.csv", "--out", "out.csv"),
            "predict file": (
                "predict",
                f"runs/{run_id}/checkpoints/last.nne",
                "--data",
                "new.csv",
                "--out",
                "out.csv",
            ),
            "train --resume": ("train", "cfg.yaml", "--resume", "last", "--epochs", "5"),
            "report": ("report", run_id),
            "runs show": ("runs", "show", run_id),
        }
        name = (
            rng.choice(["predict run", "predict file"])
            if kind == "csv"
            else rng.choice(sorted(commands))
        )
        try:
            done = nnjit(*commands[name], cwd=work, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {
                "case": case,
                "kind": kind,
                "change": change,
                "command": name,
                "outcome": "hang",
            }
        lines = done.stderr.splitlines()
        errors = [
            line
            for line in lines
            if not line.startswith("nnjit: warning") and ": warning: " not in line
        ]
        if done.returncode < 0:
            outcome = "crash"
        elif any(len(line) > MAX_LINE for line in lines):
            outcome = "long line"
        elif (
            "Traceback" in done.stderr
            or done.returncode not in (0, 2)
            or (done.returncode == 2 and len(errors) != 1)
        ):
            outcome = "traceback"
        elif _snapshot(outside) != before:
            outcome = "escaped"
        else:
            outcome = "ok" if done.returncode == 0 else "refused"
        result = {
            "case": case,
            "kind": kind,
            "change": change,
            "command": name,
            "outcome": outcome,
            "exit": done.returncode,
        }
        if outcome in FAILURES:
            result["stderr"] = done.stderr[-600:]
        return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--case", type=int, help="run this one case and print it")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--out", default="fuzz-cli")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base, run_id = base_run(out)
    cases = [args.case] if args.case is not None else range(args.cases)
    results = []
    for case in cases:
        results.append(run_case(case, args.seed, base, run_id, args.timeout))
        if args.case is not None or results[-1]["outcome"] in FAILURES:
            print(json.dumps(results[-1], indent=1), flush=True)
    counts = Counter(r["outcome"] for r in results)
    by_kind = {k: dict(Counter(r["outcome"] for r in results if r["kind"] == k)) for k in KINDS}
    summary = {
        "cases": len(results),
        "seed": args.seed,
        "outcomes": dict(counts),
        "by_kind": by_kind,
        "failures": [r for r in results if r["outcome"] in FAILURES],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("cases", "outcomes", "by_kind")}))
    return 1 if any(counts[f] for f in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
