"""Fuzz nnjit's checkpoint loading: every forged or damaged ``.nne`` file must either load and then
train and predict normally, or be refused with the documented ``NNEFormatError`` /
``StateMismatchError``. Nothing may crash, hang or raise anything else.

Each case starts from a real checkpoint (an Iris MLP with dropout, Adam, ReduceLROnPlateau,
EarlyStopping with best weights and ModelCheckpoint, so every group of a checkpoint is present)
and changes one thing, chosen deterministically from the case number:

* **forged** files: the payload is decoded, one field changed (a tensor's values, shape or dtype,
  a tensor or group removed, added or renamed, a metadata entry replaced or removed) and the file
  re-encoded by nnjit's own writer, so the SHA-256 is valid;
* **rehashed** byte mutations: bytes of the preamble, header text or payload changed, then the
  SHA-256 recomputed;
* **raw** byte mutations (bit flips, truncation, appended bytes) without fixing the checksum.

Then ``Trainer.load_checkpoint`` and, when it succeeds, one more epoch of the same fit
(``initial_epoch``, so the loaded fit and callback states are used) and ``predict``; and
separately ``Module.load_weights`` and ``predict``. Outcomes:

``ok`` (loaded and ran), ``rejected`` (NNEFormatError / StateMismatchError), ``diverged`` (loaded
weights or optimizer moments that are NaN or infinite: the fit's documented
``TrainingDivergedError``), ``undocumented`` (any other exception), ``crash`` (the child process
died from a signal, e.g. SIGSEGV), ``died`` (the child exited without a signal), ``hang`` (a case
ran past ``--timeout``).

The cases run in child processes (``--workers`` of them, each handling many cases), so crashes
and hangs are counted instead of ending the run; a worker that crashed or hung is replaced.

Usage::

    python tools/fuzz_checkpoints.py --cases 10000 --workers 2 --out fuzz-results
    python tools/fuzz_checkpoints.py --case 123      # one case in this process, with traceback

The summary goes to ``<out>/summary.json`` and ``<out>/summary.md``. The fast subset in the test
suite (``tests/train/test_checkpoint_fuzz.py``) runs cases of this module in-process.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import random
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

BASE_EPOCHS = 3
BASE_NAME = "base.nne"
OK, REJECTED, DIVERGED, UNDOCUMENTED = "ok", "rejected", "diverged", "undocumented"
CRASH, DIED, HANG = "crash", "died", "hang"
OUTCOMES = (OK, REJECTED, DIVERGED, UNDOCUMENTED, CRASH, DIED, HANG)
#: Kinds of mutation and how often each is drawn.
KINDS = {"values": 30, "shape": 10, "dtype": 8, "tensors": 8, "groups": 4, "metadata": 15,
         "header_text": 10, "rehashed_bytes": 10, "raw_bytes": 5}


# --------------------------------------------------------------------------------------------
# the model, the base checkpoint and what a case runs
# --------------------------------------------------------------------------------------------

def _nn():
    import nnjit

    return nnjit


def make_model():
    nn = _nn()
    nn.set_seed(3)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3))


def load_data():
    nn = _nn()
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(X).astype(np.float32)
    return X[:120], y[:120], X[120:], y[120:]


def _fit(trainer, data, epochs: int, initial_epoch: int, folder: Path):
    from nnjit.schedulers import ReduceLROnPlateau
    from nnjit.train.builtin_callbacks import EarlyStopping, ModelCheckpoint

    nn = _nn()
    X, y, Xv, yv = data
    callbacks = [EarlyStopping(monitor="val_loss", patience=5, restore_best_weights=True),
                 ModelCheckpoint(str(folder / "best.nne"), save_best_only=True)]
    return trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=epochs, val=(Xv, yv),
                       initial_epoch=initial_epoch, n_iter_no_change=4, verbose=False,
                       scheduler=ReduceLROnPlateau(patience=1, factor=0.5),
                       callbacks=callbacks)


def make_trainer(model):
    nn = _nn()
    return nn.Trainer(model, nn.Adam(lr=0.01), seed=11)


def make_base(folder: Path) -> Path:
    """Train the base model for BASE_EPOCHS epochs and write its checkpoint into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    trainer = make_trainer(make_model())
    _fit(trainer, load_data(), BASE_EPOCHS, 0, folder)
    path = folder / BASE_NAME
    trainer.save_checkpoint(path, metadata={"epoch": BASE_EPOCHS})
    return path


def exercise(path: Path, data, folder: Path) -> tuple[str, str]:
    """Load ``path`` as a checkpoint (then fit one epoch and predict) and as weights (then
    predict). Returns ``(outcome, detail)``: the worse of the two."""
    nn = _nn()
    documented = (nn.NNEFormatError, nn.StateMismatchError)
    results = []
    for step in ("load_checkpoint", "load_weights"):
        model = make_model()
        try:
            if step == "load_checkpoint":
                trainer = make_trainer(model)
                trainer.load_checkpoint(path)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        _fit(trainer, data, BASE_EPOCHS + 1, BASE_EPOCHS, folder)
                except nn.TrainingDivergedError as e:
                    results.append((DIVERGED, f"{step}: fit: {_one_line(e)}"))
                    continue
                trainer.predict(data[0])
            else:
                model.load_weights(path)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # NaN weights: NumPy's overflow warnings
                    model.predict(data[0])
            results.append((OK, step))
        except documented as e:
            results.append((REJECTED, f"{step}: {type(e).__name__}: {_one_line(e)}"))
        except Exception as e:  # noqa: BLE001 - exactly what the fuzzer is looking for
            where = traceback.extract_tb(e.__traceback__)[-1]
            results.append((UNDOCUMENTED, f"{step}: {type(e).__name__}: {_one_line(e)} "
                                          f"({Path(where.filename).name}:{where.lineno})"))
    rank = {UNDOCUMENTED: 0, DIVERGED: 1, REJECTED: 2, OK: 3}
    return min(results, key=lambda r: rank[r[0]])


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 300 else text[:297] + "..."


# --------------------------------------------------------------------------------------------
# mutations
# --------------------------------------------------------------------------------------------

_SPECIAL_INTS = (0, -1, 1, 2, 3, 119, 120, 121, 2**31 - 1, 2**31, -2**31, 2**62, 2**63 - 1,
                 -2**63)
_SPECIAL_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, 12.0, 1e300, -1e300, 2.0**53 + 2,
                   float("nan"), float("inf"), float("-inf"), 5e-324)
_JSON_VALUES = (None, True, False, 0, -1, 1, 3, 2**63, 2**70, -2**70, 1.5, -1e300, "", "x",
                "Adam", "SGD", "EarlyStopping", [], [1, 2], {}, {"a": 1},
                {"class": "Adam", "iterations": -5}, {"class": "Adam", "iterations": "7"})
_DTYPES = (np.float32, np.float64, np.int32, np.int64, np.uint8)


def _decode(path: Path):
    from nnjit.io.nne import load_nne

    nne = load_nne(path)
    groups = {g: {n: np.array(a, copy=True) for n, a in t.items()} for g, t in nne.groups.items()}
    return groups, copy.deepcopy(nne.metadata)


def _pick_tensor(rng: random.Random, groups) -> tuple[str, str]:
    """A group, then one of its tensors: the few RNG and fit tensors are drawn as often as the
    many parameters."""
    group = rng.choice([g for g, tensors in groups.items() if tensors])
    return group, rng.choice(list(groups[group]))


def _special(rng: random.Random, arr: np.ndarray):
    if arr.dtype.kind == "f":
        return rng.choice(_SPECIAL_FLOATS)
    info = np.iinfo(arr.dtype)
    value = rng.choice(_SPECIAL_INTS + (rng.randrange(-1000, 1000),))
    return min(max(value, int(info.min)), int(info.max))


def _mutate_values(rng: random.Random, arr: np.ndarray) -> tuple[np.ndarray, str]:
    arr = np.array(arr, copy=True)
    flat = arr.reshape(-1)
    if flat.size == 0:
        return np.zeros(1, dtype=arr.dtype), "empty -> one zero"
    op = rng.choice(("special", "special", "bitflip", "bitflip", "zeros", "fill", "swap",
                     "duplicate", "negate", "scale"))
    i = rng.randrange(flat.size)
    if op == "special":
        value = _special(rng, arr)
        flat[i] = value
        return arr, f"[{i}] = {value!r}"
    if op == "bitflip":
        raw = flat.view(np.uint8)
        bit = rng.randrange(raw.size * 8)
        raw[bit // 8] ^= np.uint8(1 << (bit % 8))
        return arr, f"bit {bit} flipped"
    if op == "zeros":
        flat[:] = 0
        return arr, "all zero"
    if op == "fill":
        value = _special(rng, arr)
        flat[:] = value
        return arr, f"all {value!r}"
    if op == "swap":
        j = rng.randrange(flat.size)
        flat[i], flat[j] = flat[j], flat[i]
        return arr, f"swap [{i}] [{j}]"
    if op == "duplicate":
        j = rng.randrange(flat.size)
        flat[i] = flat[j]
        return arr, f"[{i}] = [{j}]"
    if op == "negate":
        with np.errstate(all="ignore"):
            flat[:] = -flat if arr.dtype.kind != "u" else flat[::-1]
        return arr, "negated"
    with np.errstate(all="ignore"):
        flat[:] = (flat * rng.choice((2, 3, 1000))).astype(arr.dtype)
    return arr, "scaled"


def _mutate_shape(rng: random.Random, arr: np.ndarray) -> tuple[np.ndarray, str]:
    flat = arr.reshape(-1)
    op = rng.choice(("drop", "append", "row", "column", "scalar", "empty", "transpose"))
    if op == "drop" and flat.size:
        return flat[:-1].copy(), "last value dropped"
    if op == "append":
        extra = np.array([_special(rng, arr)], dtype=arr.dtype)
        return np.concatenate([flat, extra]), "one value appended"
    if op == "row":
        return flat.reshape(1, -1).copy(), "reshaped to one row"
    if op == "column":
        return flat.reshape(-1, 1).copy(), "reshaped to one column"
    if op == "scalar" and flat.size:
        return np.array(flat[0]), "0-d"
    if op == "transpose" and arr.ndim == 2:
        return arr.T.copy(), "transposed"
    return np.zeros((0,), dtype=arr.dtype), "empty"


def _mutate_tensors(rng: random.Random, groups) -> str:
    g, n = _pick_tensor(rng, groups)
    op = rng.choice(("remove", "add", "rename", "move"))
    if op == "remove":
        del groups[g][n]
        return f"removed {g}/{n}"
    if op == "add":
        name = rng.choice(("extra", "state", "shuffle_order", "epoch", "0.weight", "x/y",
                           "best_weights.9", "EarlyStopping/wait"))
        groups[g][name] = np.array(groups[g][n], copy=True)
        return f"{g}/{n} copied to {g}/{name}"
    if op == "rename":
        name = n + "_" if rng.random() < 0.5 else n.upper()
        groups[g][name] = groups[g].pop(n)
        return f"renamed {g}/{n} to {g}/{name}"
    other = rng.choice([x for x in groups if x != g] or [g])
    groups[other][n] = groups[g].pop(n)
    return f"moved {g}/{n} to {other}/{n}"


def _mutate_groups(rng: random.Random, groups) -> str:
    op = rng.choice(("remove", "add_empty", "add", "rename"))
    g = rng.choice(list(groups))
    if op == "remove":
        del groups[g]
        return f"removed group {g}"
    if op == "add_empty":
        groups[rng.choice(("extra", "rng", "fit", "callbacks", "optimizer"))] = {}
        return "added an empty group"
    if op == "add":
        groups["extra"] = {"x": np.zeros(3)}
        return "added group extra"
    groups[g + "2"] = groups.pop(g)
    return f"renamed group {g}"


def _metadata_paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _metadata_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _metadata_paths(v, (*path, i))


def _mutate_metadata(rng: random.Random, metadata) -> str:
    path = rng.choice([p for p in _metadata_paths(metadata) if p])
    parent = metadata
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    op = rng.choice(("replace", "replace", "replace", "delete", "add"))
    if op == "delete" and isinstance(parent, dict):
        del parent[key]
        return f"deleted metadata {list(path)}"
    if op == "add" and isinstance(parent[key], dict):
        parent[key][rng.choice(("extra", "wait", "best_weights.0", "class"))] = rng.choice(
            _JSON_VALUES)
        return f"added an entry to metadata {list(path)}"
    value = rng.choice(_JSON_VALUES)
    parent[key] = copy.deepcopy(value)
    return f"metadata {list(path)} = {value!r}"


def _rehash(raw: bytearray) -> bytearray:
    digest = hashlib.sha256(bytes(raw[:32]))
    digest.update(bytes(raw[64:]))
    raw[32:64] = digest.digest()
    return raw


def _mutate_bytes(rng: random.Random, raw: bytearray, rehash: bool) -> str:
    op = rng.choice(("bitflip", "bitflip", "byte", "truncate", "append", "zero_run"))
    where = rng.choice(("preamble", "header", "payload", "anywhere")) if rehash else "anywhere"
    header_len = int.from_bytes(raw[16:24], "little")
    lo, hi = {"preamble": (0, 32), "header": (64, 64 + header_len),
              "payload": (64 + header_len, len(raw)), "anywhere": (0, len(raw))}[where]
    if hi <= lo:
        lo, hi = 0, len(raw)
    i = rng.randrange(lo, hi)
    if op == "bitflip":
        raw[i] ^= 1 << rng.randrange(8)
        detail = f"bit flipped in byte {i} ({where})"
    elif op == "byte":
        raw[i] = rng.randrange(256)
        detail = f"byte {i} ({where}) set"
    elif op == "truncate":
        del raw[i:]
        detail = f"truncated to {i} bytes"
    elif op == "append":
        raw.extend(rng.randbytes(rng.choice((1, 63, 64, 128))))
        detail = "bytes appended"
    else:
        n = rng.randrange(1, 65)
        raw[i : i + n] = bytes(len(raw[i : i + n]))
        detail = f"{n} bytes zeroed at {i} ({where})"
    if rehash and len(raw) >= 64:
        _rehash(raw)
    return detail


def _mutate_header_text(rng: random.Random, raw: bytearray) -> str:
    """Change one character of the header's JSON (a digit, most often) and fix the checksum."""
    header_len = int.from_bytes(raw[16:24], "little")
    text = raw[64 : 64 + header_len]
    digits = [i for i, c in enumerate(text) if 48 <= c <= 57]
    if digits and rng.random() < 0.7:
        i = rng.choice(digits)
        new = rng.choice(b"0123456789-")
    else:
        i = rng.randrange(len(text))
        new = rng.choice(b'0123456789-[]{}",:. aeE\\')
    text[i] = new
    raw[64 : 64 + header_len] = text
    _rehash(raw)
    return f"header character {i} set to {chr(new)!r}"


def make_case(base: Path, index: int, out: Path, seed: int = 0) -> tuple[str, str]:
    """Write case ``index``'s file (derived from ``base``) to ``out``; returns (kind, detail)."""
    with np.errstate(all="ignore"):  # (casting special values overflows on purpose)
        return _make_case(base, index, out, seed)


def _make_case(base: Path, index: int, out: Path, seed: int) -> tuple[str, str]:
    from nnjit.io.nne import save_nne

    rng = random.Random(seed * 1_000_003 + index)
    kinds, weights = zip(*KINDS.items())
    for _ in range(100):  # a mutation the writer refuses (rare) is drawn again
        kind = rng.choices(kinds, weights)[0]
        if kind in ("header_text", "rehashed_bytes", "raw_bytes"):
            raw = bytearray(base.read_bytes())
            if kind == "header_text":
                detail = _mutate_header_text(rng, raw)
            else:
                detail = _mutate_bytes(rng, raw, rehash=kind == "rehashed_bytes")
            out.write_bytes(bytes(raw))
            return kind, detail
        groups, metadata = _decode(base)
        if kind in ("values", "shape", "dtype"):
            g, n = _pick_tensor(rng, groups)
            arr = groups[g][n]
            if kind == "values":
                groups[g][n], what = _mutate_values(rng, arr)
            elif kind == "shape":
                groups[g][n], what = _mutate_shape(rng, arr)
            else:
                dtype = rng.choice([d for d in _DTYPES if np.dtype(d) != arr.dtype])
                groups[g][n] = arr.astype(dtype)
                what = f"{arr.dtype} -> {np.dtype(dtype)}"
            detail = f"{g}/{n}: {what}"
        elif kind == "tensors":
            detail = _mutate_tensors(rng, groups)
        elif kind == "groups":
            detail = _mutate_groups(rng, groups)
        else:
            detail = _mutate_metadata(rng, metadata)
        try:
            save_nne(out, groups, metadata)
        except (TypeError, ValueError):
            continue
        return kind, detail
    raise RuntimeError(f"case {index}: no mutation the writer accepts")


def run_case(base: Path, index: int, folder: Path, data=None, seed: int = 0) -> dict:
    """Make and run case ``index`` in this process; returns its record."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"case{index}.nne"
    kind, detail = make_case(base, index, path, seed)
    outcome, result = exercise(path, data if data is not None else load_data(), folder)
    return {"case": index, "kind": kind, "mutation": detail, "outcome": outcome,
            "detail": result}


# --------------------------------------------------------------------------------------------
# child processes
# --------------------------------------------------------------------------------------------

def worker(base: Path, folder: Path, seed: int) -> None:
    """Read case numbers from stdin, one a line; write one JSON line per case to stdout."""
    data = load_data()
    exercise(base, data, folder)  # compile (or load the cache) before any clock starts
    out = sys.stdout
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    out.flush()
    # The tool's own test: NNJIT_FUZZ_INJECT=crash,hang makes case 0 die of SIGSEGV and case 1
    # sleep, to check that both are counted.
    inject = os.environ.get("NNJIT_FUZZ_INJECT", "").split(",")
    for line in sys.stdin:
        index = int(line)
        if "crash" in inject and index == 0:
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        if "hang" in inject and index == 1:
            time.sleep(3600)
        record = run_case(base, index, folder, data, seed)
        for stale in folder.glob(f"case{index}*"):
            stale.unlink(missing_ok=True)
        out.write(json.dumps(record) + "\n")
        out.flush()


class _Child:
    """One worker process and the case it is running."""

    def __init__(self, base: Path, folder: Path, seed: int, selector, n: int):
        self.folder = folder / f"worker{n}"
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", str(base),
             "--folder", str(self.folder), "--seed", str(seed)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.selector = selector
        selector.register(self.proc.stdout, selectors.EVENT_READ, self)
        self.case: int | None = None
        self.ready = False
        self.deadline = 0.0

    def send(self, index: int, timeout: float) -> None:
        self.case, self.deadline = index, time.monotonic() + timeout
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()

    def stop(self) -> int:
        """Kill this worker (its own pid) and return its exit status."""
        self.selector.unregister(self.proc.stdout)
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return code


def _describe(base: Path, index: int, folder: Path, seed: int) -> dict:
    """The mutation of a case whose worker died (cases are deterministic: made again here)."""
    kind, detail = make_case(base, index, folder / "described.nne", seed)
    return {"kind": kind, "mutation": detail}


def run_pool(base: Path, folder: Path, cases: int, workers: int, timeout: float, seed: int,
             start_timeout: float = 900.0, progress=None) -> list[dict]:
    """Run cases 0..cases-1 in ``workers`` child processes; returns one record per case."""
    selector = selectors.DefaultSelector()
    pending = list(range(cases - 1, -1, -1))  # popped from the end: case 0 first
    records: list[dict] = []
    children = [_Child(base, folder, seed, selector, n) for n in range(min(workers, cases))]
    started = {id(c): time.monotonic() for c in children}
    spawned = len(children)

    def replace(child: _Child) -> None:
        nonlocal spawned
        children.remove(child)
        if pending:
            new = _Child(base, folder, seed, selector, spawned)
            spawned += 1
            children.append(new)
            started[id(new)] = time.monotonic()

    def give(child: _Child) -> None:
        if pending:
            child.send(pending.pop(), timeout)
        else:
            child.case = None

    while children and (pending or any(c.case is not None for c in children)
                        or not all(c.ready for c in children)):
        now = time.monotonic()
        for child in list(children):
            if child.case is not None and now > child.deadline:
                index = child.case
                child.stop()
                records.append({"case": index, "outcome": HANG,
                                "detail": f"no result after {timeout:g} s",
                                **_describe(base, index, folder, seed)})
                replace(child)
            elif not child.ready and now - started[id(child)] > start_timeout:
                child.stop()
                raise RuntimeError(f"a worker did not start within {start_timeout:g} s")
        for key, _ in selector.select(timeout=0.5):
            child: _Child = key.data
            line = child.proc.stdout.readline()
            if not line:  # the worker is gone
                index = child.case
                code = child.stop()
                if index is None:
                    raise RuntimeError(f"a worker exited with status {code} before its cases")
                outcome = CRASH if code < 0 else DIED
                records.append({"case": index, "outcome": outcome,
                                "detail": f"exit status {code}",
                                **_describe(base, index, folder, seed)})
                replace(child)
                continue
            message = json.loads(line)
            if "ready" in message:
                child.ready = True
            else:
                records.append(message)
                if progress:
                    progress(len(records))
            give(child)
        if not pending and all(c.case is None and c.ready for c in children):
            break
    for child in children:
        child.proc.stdin.close()
        child.stop()
    return sorted(records, key=lambda r: r["case"])


# --------------------------------------------------------------------------------------------
# summary
# --------------------------------------------------------------------------------------------

def summarize(records: list[dict], seconds: float, workers: int, seed: int) -> dict:
    counts = Counter(r["outcome"] for r in records)
    by_kind: dict[str, Counter] = {}
    for r in records:
        by_kind.setdefault(r.get("kind", "?"), Counter())[r["outcome"]] += 1
    bad = [r for r in records if r["outcome"] in (UNDOCUMENTED, CRASH, DIED, HANG)]
    return {
        "cases": len(records), "seconds": round(seconds, 1),
        "cases_per_second": round(len(records) / seconds, 2) if seconds else None,
        "workers": workers, "seed": seed,
        "outcomes": {o: counts.get(o, 0) for o in OUTCOMES},
        "by_kind": {k: {o: c.get(o, 0) for o in OUTCOMES} for k, c in sorted(by_kind.items())},
        "failures": bad[:50],
        "rejection_examples": [r["detail"] for r in records if r["outcome"] == REJECTED][:10],
    }


def markdown(summary: dict) -> str:
    lines = [f"# Checkpoint fuzzing: {summary['cases']} cases",
             "",
             f"{summary['seconds']} s with {summary['workers']} worker processes "
             f"({summary['cases_per_second']} cases/s), seed {summary['seed']}. Re-run: "
             f"`python tools/fuzz_checkpoints.py --cases {summary['cases']} --seed "
             f"{summary['seed']}`.",
             "",
             "| mutation | " + " | ".join(OUTCOMES) + " |",
             "|---|" + "---:|" * len(OUTCOMES)]
    for kind, counts in summary["by_kind"].items():
        lines.append(f"| {kind} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + " |")
    lines.append("| **all** | " + " | ".join(f"**{summary['outcomes'][o]}**" for o in OUTCOMES)
                 + " |")
    if summary["failures"]:
        lines += ["", "## Failures (crash, died, hang, undocumented exception)", ""]
        lines += [f"- case {r['case']} ({r.get('kind', '?')}: {r.get('mutation', '?')}): "
                  f"{r['outcome']}: {r['detail']}" for r in summary["failures"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a case may take before it counts as a hang")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="fuzz-results")
    parser.add_argument("--case", type=int, help="run one case here, with its traceback")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(Path(args.worker), Path(args.folder), args.seed)
        return 0
    with tempfile.TemporaryDirectory(prefix="nnjit-fuzz-") as tmp:
        folder = Path(tmp)
        base = make_base(folder / "base")
        if args.case is not None:
            path = folder / "case.nne"
            print(make_case(base, args.case, path, args.seed))
            print(exercise(path, load_data(), folder))
            return 0
        t0 = time.monotonic()
        step = max(args.cases // 20, 1)

        def progress(done: int) -> None:
            if done % step == 0:
                print(f"{done}/{args.cases} cases, {time.monotonic() - t0:.0f} s", flush=True)

        records = run_pool(base, folder, args.cases, args.workers, args.timeout, args.seed,
                           progress=progress)
        summary = summarize(records, time.monotonic() - t0, args.workers, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "summary.md").write_text(markdown(summary))
    print(markdown(summary))
    bad = sum(summary["outcomes"][o] for o in (UNDOCUMENTED, CRASH, DIED, HANG))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
