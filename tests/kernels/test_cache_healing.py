"""A damaged compiled-code cache entry is discarded with one warning line and compiled again
(issue 24): it never makes every later call fail.

Each case compiles a small module's functions in a child process (numba caches them next to the
module), damages one cache file the way a kill or a full disk during the write, a bad disk, or a
cache shared between checkouts does, then runs two more child processes: the first must give the
right answer after one warning line naming the file, and the second must load the rewritten entry
from the cache, silently.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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

RUN = textwrap.dedent("""\
    import probe_mod
    value = probe_mod.add_one(41)
    other = probe_mod.scale(1.0, 2.0, 3.0, 4.0)
    stats = probe_mod.add_one.stats
    print(value, other, stats.cache_hits.total(), stats.cache_misses.total())
    """)

# Rewrites add_one's data file through the cache's own writer with an object of a module that
# is then deleted: a valid file whose unpickling fails (a cache written by another checkout).
GHOST = textwrap.dedent("""\
    import probe_mod, ghost_mod
    cache_file = probe_mod.add_one._cache._cache_file
    probe_mod.add_one(1)
    for name in set(cache_file._load_index().values()):
        cache_file._save_data(name, ghost_mod.Ghost())
    """)


def _run(folder: Path, script: str = RUN) -> subprocess.CompletedProcess:
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


def _result(done: subprocess.CompletedProcess) -> tuple:
    assert done.returncode == 0, done.stderr[-3000:]
    value, other, hits, misses = done.stdout.split()
    return int(value), float(other), int(hits), int(misses)


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


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    (tmp_path / "probe_mod.py").write_text(PROBE)
    first = _run(tmp_path)
    assert _result(first) == (42, 1.0, 0, 1)
    assert _warnings(first) == []
    return tmp_path


def _heals(folder: Path, damaged: Path) -> None:
    healing = _run(folder)
    assert _result(healing)[:2] == (42, 1.0)
    [warning] = _warnings(healing)
    assert damaged.name in warning and "discarded" in warning, warning
    assert len(warning) < 600
    healed = _run(folder)
    assert _result(healed) == (42, 1.0, 1, 0)  # the rewritten entry loads
    assert _warnings(healed) == []


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_cache_file_is_discarded_and_recompiled(probe, case):
    pattern, damage = DAMAGE[case]
    [path] = _files(probe, pattern)
    damage(path)
    _heals(probe, path)


def test_another_functions_data_file_is_not_run(probe):
    """A data file copied over another function's (a cache shared between checkouts, a
    restored backup): numba would run ``scale`` as ``add_one`` (or fail for the argument
    count) in every process."""
    [mine] = _files(probe, "probe_mod.add_one-*.nbc")
    [theirs] = _files(probe, "probe_mod.scale-*.nbc")
    mine.write_bytes(theirs.read_bytes())
    _heals(probe, mine)


def test_a_data_file_needing_a_missing_module_is_discarded(probe):
    """An entry whose unpickling imports a module this checkout does not have
    (ModuleNotFoundError in every process before)."""
    (probe / "ghost_mod.py").write_text("class Ghost:\n    pass\n")
    done = _run(probe, GHOST)
    assert done.returncode == 0, done.stderr[-3000:]
    (probe / "ghost_mod.py").unlink()
    [path] = _files(probe, "probe_mod.add_one-*.nbc")
    _heals(probe, path)


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
