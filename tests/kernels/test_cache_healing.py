"""A damaged compiled-code cache entry is discarded with one warning line and compiled again
(issue 24): it never makes every later call fail.

Each case compiles a small module's functions in a child process (numba caches them next to the
module), damages one cache file the way a kill or a full disk during the write, a bad disk, or a
cache shared between checkouts does, then runs two more child processes: the first must give the
right answer after one warning line naming the file, and the second must load the rewritten entry
from the cache, silently. The cases share those processes: each damages its own function's files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""\
    from nnjit.kernels._jit import jit


    @jit
    def add_one(x):
        return x + 1


    @jit
    def scale(x, a, b, c):
        return x * a + b - c
    """)


def _run(folder: Path, script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(folder), str(REPO)]),
        PYTHONDONTWRITEBYTECODE="1",
        NNJIT_COMPILE_NOTICE="1",
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _warnings(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("nnjit: warning")]


def _files(folder: Path, pattern: str) -> list[Path]:
    found = sorted((folder / "__pycache__").glob(pattern))
    assert found, f"no {pattern} in {folder / '__pycache__'}"
    return found


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _zero(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _garbage(path: Path) -> None:
    path.write_bytes(b"garbage" + os.urandom(64))


DAMAGE = {
    "truncated .nbc": ("probe_mod.add_one-*.nbc", _truncate),
    "empty .nbc": ("probe_mod.add_one-*.nbc", _empty),
    "zeroed .nbc": ("probe_mod.add_one-*.nbc", _zero),
    "bit-flipped .nbc": ("probe_mod.add_one-*.nbc", _flip),
    "truncated .nbi": ("probe_mod.add_one-*.nbi", _truncate),
    "empty .nbi": ("probe_mod.add_one-*.nbi", _empty),
    "garbage .nbi": ("probe_mod.add_one-*.nbi", _garbage),
}


#: Every way a cache file is damaged, each on its own function of one probe module (one child
#: process heals them all: the cases cost three processes, not three each).
CASES = (*sorted(DAMAGE), "another function's .nbc", "a missing module's object")
HEAL_PROBE = "from nnjit.kernels._jit import jit\n" + "".join(
    f"\n\n@jit\ndef f{i}(x):\n    return x + 1\n" for i in range(len(CASES))) + (
    "\n\n@jit\ndef scale(x, a, b, c):\n    return x * a + b - c\n")
HEAL_RUN = textwrap.dedent(f"""\
    import json, probe_mod
    out = {{}}
    for i in range({len(CASES)}):
        f = getattr(probe_mod, f"f{{i}}")
        out[i] = [f(41), f.stats.cache_hits.total(), f.stats.cache_misses.total()]
    print(json.dumps(out), probe_mod.scale(1.0, 2.0, 3.0, 4.0))
    """)
# Rewrites a function's data file through the cache's own writer with an object of a module that
# is then deleted: a valid file whose unpickling fails (a cache written by another checkout).
HEAL_GHOST = textwrap.dedent(f"""\
    import probe_mod, ghost_mod
    f = probe_mod.f{len(CASES) - 1}
    cache_file = f._cache._cache_file
    f(1)
    for name in set(cache_file._load_index().values()):
        cache_file._save_data(name, ghost_mod.Ghost())
    """)


def _outputs(done: subprocess.CompletedProcess) -> dict[int, list]:
    assert done.returncode == 0, done.stderr[-3000:]
    per_function, other = done.stdout.rsplit(" ", 1)
    assert float(other) == 1.0
    return {int(i): row for i, row in json.loads(per_function).items()}


def test_every_kind_of_damaged_cache_file_is_discarded_and_recompiled(tmp_path):
    """Each case damages one function's cache file: truncated, empty, zeroed or bit-flipped
    machine code; a truncated, empty or garbage index; another function's data file copied over
    (a cache shared between checkouts, a restored backup: numba would run ``scale`` as ``f7``,
    or fail for the argument count, in every process); an entry whose unpickling imports a
    module this checkout does not have (ModuleNotFoundError in every process before). The next
    process gives every right answer after one warning line per damaged file, naming it; the
    one after loads every rewritten entry from the cache, silently."""
    (tmp_path / "probe_mod.py").write_text(HEAL_PROBE)
    first = _run(tmp_path, HEAL_RUN)
    assert _outputs(first) == {i: [42, 0, 1] for i in range(len(CASES))}
    assert _warnings(first) == []
    (tmp_path / "ghost_mod.py").write_text("class Ghost:\n    pass\n")
    done = _run(tmp_path, HEAL_GHOST)
    assert done.returncode == 0, done.stderr[-3000:]
    (tmp_path / "ghost_mod.py").unlink()

    damaged = {}
    for i, case in enumerate(CASES):
        if case in DAMAGE:
            pattern, damage = DAMAGE[case]
            [path] = _files(tmp_path, pattern.replace("add_one", f"f{i}"))
            damage(path)
        elif case == "another function's .nbc":
            [path] = _files(tmp_path, f"probe_mod.f{i}-*.nbc")
            [theirs] = _files(tmp_path, "probe_mod.scale-*.nbc")
            path.write_bytes(theirs.read_bytes())
        else:  # (the ghost's object, written above)
            [path] = _files(tmp_path, f"probe_mod.f{i}-*.nbc")
        damaged[case] = path

    healing = _run(tmp_path, HEAL_RUN)
    assert {i: row[0] for i, row in _outputs(healing).items()} == dict.fromkeys(
        range(len(CASES)), 42)
    warnings = _warnings(healing)
    for case, path in damaged.items():
        named = [w for w in warnings if path.name in w]
        assert len(named) == 1 and "discarded" in named[0], (case, warnings)
        assert len(named[0]) < 600, case
    assert len(warnings) == len(CASES), warnings
    healed = _run(tmp_path, HEAL_RUN)
    assert _outputs(healed) == {i: [42, 1, 0] for i in range(len(CASES))}  # rewritten, loaded
    assert _warnings(healed) == []


RACE = textwrap.dedent("""\
    import numpy as np
    import probe_mod
    f = probe_mod.add_one
    f(np.float32(1.0)), f(np.float64(1.0))  # process A saved both overloads
    cache_file = f._cache._cache_file
    index = cache_file._load_index()
    key32, key64 = sorted(index, key=lambda k: str(k[0]))
    data64 = cache_file._load_data(index[key64])
    # process B read an empty index before A's saves, then saved its float64 overload ...
    cache_file._save_index({})
    cache_file.save(key64, data64)
    # ... and A's index write (the float32 entry only) came last
    cache_file._save_index({key32: index[key32]})
    """)
CALL = "import numpy as np, probe_mod; print(probe_mod.add_one(np.float32(41)))"


def test_two_overloads_saved_at_once_never_share_a_data_file(tmp_path):
    """numba named a data file by the next number free in the index the saving process read:
    two processes saving two overloads at once wrote one file, and the index could name the
    other overload's machine code for a key (compiled for other argument types: memory
    corruption when called, seen as a hung or aborted test worker). nnjit names it by the
    entry's key: a lost index update is a cache miss, never another overload's code."""
    (tmp_path / "probe_mod.py").write_text(PROBE)
    race = _run(tmp_path, RACE)
    assert race.returncode == 0, race.stderr
    out = _run(tmp_path, CALL)
    assert out.returncode == 0 and out.stdout.split() == ["42.0"], (out.stdout, out.stderr)
