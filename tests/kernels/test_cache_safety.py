"""Where nnjit caches compiled code, and that a planted cache cannot run code (issue 11).

Each case runs a child process with its own HOME and XDG_CACHE_HOME. Numba's own locators are made
to fail for real by putting a *file* where they would create a folder (``__pycache__`` next to
the source, ``$XDG_CACHE_HOME/numba``): that fails for root too, unlike a read-only mode. The
cache mechanism is checked on a one-line function compiled with nnjit's ``jit``; one case runs a
whole (uncached) nnjit fit.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numba
import pytest
from numba.core.caching import _CacheLocator

try:
    from nnjit.kernels.cache_locator import _VERSION_MARK, _seal
except ImportError:
    _VERSION_MARK = _seal = None

REPO = Path(__file__).resolve().parents[2]

PROBE_SOURCE = """\
from nnjit.kernels._jit import jit


@jit
def add_one(x):
    return x + 1
"""
PROBE_LINE = 4  # the line of ``@jit``: numba names the cache files after it

USER_SOURCE = """\
import numba


@numba.njit(cache=True)
def times_two(x):
    return x * 2
"""

# Prints, as JSON, where each function's cache lives and whether its call compiled or loaded.
REPORT = """
import json, sys
import numba
report = {"CACHE_DIR": numba.config.CACHE_DIR}
for module_name, name in (("probe_mod", "add_one"), ("user_mod", "times_two")):
    try:
        module = __import__(module_name)
    except ImportError:
        continue
    dispatcher = getattr(module, name)
    dispatcher(1)
    stats = dispatcher.stats
    report[name] = dict(path=getattr(dispatcher._cache, "cache_path", None),
                        cached=type(dispatcher._cache).__name__ != "NullCache",
                        hits=sum(stats.cache_hits.values()),
                        misses=sum(stats.cache_misses.values()))
print(json.dumps(report))
"""


def _env(tmp: Path, *paths: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "NUMBA_CACHE_LOCATOR_CLASSES")}
    env.update(HOME=str(tmp / "home"), XDG_CACHE_HOME=str(tmp / "cache"),
               PYTHONPATH=os.pathsep.join(str(p) for p in (*paths, REPO)),
               PYTHONDONTWRITEBYTECODE="1", NNJIT_COMPILE_NOTICE="1")
    env.update(extra)
    return env


def _run(tmp: Path, *paths: Path, script: str = REPORT, **extra: str):
    done = subprocess.run([sys.executable, "-c", script], env=_env(tmp, *paths, **extra),
                          cwd=tmp, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _report(done) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


def _warnings(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("nnjit: warning")]


def _module_dir(tmp: Path, name: str, source: str, cacheable: bool) -> Path:
    """A folder holding ``<name>.py``; numba's in-tree locator fails there unless ``cacheable``
    (``__pycache__`` is a file, so it cannot be created)."""
    folder = tmp / f"src_{name}"
    folder.mkdir()
    (folder / f"{name}.py").write_text(source)
    if not cacheable:
        (folder / "__pycache__").write_text("not a folder")
    return folder


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "cache").mkdir()
    return tmp_path


def _own_private_folder(cache_home: Path) -> Path:
    """nnjit's private cache folder under ``cache_home``, made as nnjit makes it (0700, parent
    0700): a folder that passes the owner and mode check."""
    private = cache_home / "nnjit" / "numba"
    private.mkdir(parents=True, mode=0o700)
    private.parent.chmod(0o700)
    private.chmod(0o700)
    return private


def _block_user_wide_locator(cache_home: Path) -> None:
    """numba's UserWideCacheLocator ($XDG_CACHE_HOME/numba) fails: that path is a file."""
    cache_home.mkdir(exist_ok=True)
    (cache_home / "numba").write_text("not a folder")


def _plant_index(private: Path, probe_dir: Path, marker: Path, in_tree: bool = False) -> Path:
    """An index file where nnjit's private locator (numba's user-wide one has the same layout;
    numba's in-tree one with ``in_tree``) would look for ``add_one``'s, whose unpickling
    creates ``marker`` (and then reads as a stale, harmless index)."""
    sub = (private if in_tree else
           private / _CacheLocator.get_suitable_cache_subpath(str(probe_dir / "probe_mod.py")))
    sub.mkdir(parents=True, exist_ok=True)
    abi = getattr(sys, "abiflags", "")
    index = sub / (f"probe_mod.add_one-{PROBE_LINE}.py{sys.version_info[0]}"
                   f"{sys.version_info[1]}{abi}.nbi")

    class Payload:
        def __reduce__(self):
            return (eval, (f"(open({str(marker)!r}, 'w').close(), ('stale', {{}}))[1]",))

    if _seal is None:  # (nnjit before sealed cache files read numba's format)
        index.write_bytes(pickle.dumps(numba.__version__) + pickle.dumps(Payload()))
        return index
    # sealed as nnjit writes its index files (a checksum is no defence against a planter)
    body = pickle.dumps(numba.__version__ + _VERSION_MARK) + pickle.dumps(Payload())
    index.write_bytes(_seal(index.name, body))
    return index


def test_numba_locators_first_and_user_functions_untouched(tmp):
    """(a) Normal case: nnjit's functions and the user's own ``cache=True`` functions are cached
    where numba puts them (next to the source, or in NUMBA_CACHE_DIR); the global CACHE_DIR is
    not set and no private folder is made."""
    probe = _module_dir(tmp, "probe_mod", PROBE_SOURCE, cacheable=True)
    user = _module_dir(tmp, "user_mod", USER_SOURCE, cacheable=True)
    report = _report(_run(tmp, probe, user))
    assert report["CACHE_DIR"] == ""
    assert report["add_one"]["path"] == str(probe / "__pycache__")
    assert report["times_two"]["path"] == str(user / "__pycache__")
    assert list((probe / "__pycache__").glob("probe_mod.add_one-*.nbi"))

    numba_dir = tmp / "numba_cache_dir"
    report = _report(_run(tmp, probe, user, NUMBA_CACHE_DIR=str(numba_dir)))
    assert report["CACHE_DIR"] == str(numba_dir)
    assert report["add_one"]["path"].startswith(str(numba_dir))
    assert report["times_two"]["path"].startswith(str(numba_dir))
    assert not (tmp / "cache" / "nnjit").exists()


def test_private_folder_when_no_numba_locator_works(tmp):
    """(b) No numba locator for nnjit's file: a private 0700 folder under $XDG_CACHE_HOME is
    made and used (the second process loads from it); the user's function stays next to its
    source, the global CACHE_DIR is not set, and nothing is printed."""
    probe = _module_dir(tmp, "probe_mod", PROBE_SOURCE, cacheable=False)
    user = _module_dir(tmp, "user_mod", USER_SOURCE, cacheable=True)
    _block_user_wide_locator(tmp / "cache")
    private = tmp / "cache" / "nnjit" / "numba"

    first = _run(tmp, probe, user)
    report = _report(first)
    assert report["CACHE_DIR"] == ""
    assert report["add_one"]["path"].startswith(str(private) + os.sep)
    assert (report["add_one"]["hits"], report["add_one"]["misses"]) == (0, 1)
    assert report["times_two"]["path"] == str(user / "__pycache__")
    assert _warnings(first) == []
    for folder in (private, private.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert list(private.rglob("probe_mod.add_one-*.nbi"))

    second = _report(_run(tmp, probe, user))
    assert (second["add_one"]["hits"], second["add_one"]["misses"]) == (1, 0)


def test_private_folder_open_to_others_is_refused_unread(tmp):
    """(c) A private folder of mode 0777 holding a planted index file is refused with one line
    and the file is never unpickled. Control: the same file in a 0700 folder IS unpickled
    (numba trusts its cache folder), so the plant is where a load would look."""
    probe = _module_dir(tmp, "probe_mod", PROBE_SOURCE, cacheable=False)
    _block_user_wide_locator(tmp / "cache")
    private = _own_private_folder(tmp / "cache")
    marker = tmp / "planted-code-ran"
    _plant_index(private, probe, marker)

    control = _run(tmp, probe)
    assert marker.exists(), "the planted index was not loaded: the test plants it wrongly"
    assert _warnings(control) == []

    marker.unlink()
    shutil.rmtree(private)  # (the control run saved a real index and code there)
    private.mkdir()
    index = _plant_index(private, probe, marker)
    private.chmod(0o777)
    refused = _run(tmp, probe)
    assert not marker.exists(), "nnjit loaded an index file from a folder others can write"
    report = _report(refused)
    assert not report["add_one"]["cached"] and report["add_one"]["misses"] == 1
    [warning] = _warnings(refused)
    assert "0777" in warning and str(private) in warning and "not cached" in warning
    assert sorted(p.name for p in index.parent.iterdir()) == [index.name]  # nothing written


def test_private_folder_made_by_another_user_is_refused_unread(tmp):
    """(c) Two uids: another user (uid 65534) creates the private folder first in a shared
    cache home, mode 0777, with a planted index file; nnjit refuses it and never unpickles it."""
    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("needs root to act as a second user (os.setuid to 65534)")
    probe = _module_dir(tmp, "probe_mod", PROBE_SOURCE, cacheable=False)
    marker = tmp / "planted-code-ran"
    shared = Path(tempfile.mkdtemp(prefix="nnjit-shared-cache-"))  # under /tmp: others reach it
    try:
        shared.chmod(0o1777)
        _block_user_wide_locator(shared)
        private = shared / "nnjit" / "numba"
        pid = os.fork()
        if pid == 0:  # the other user: only os calls, then leave without running pytest's code
            try:
                os.setgid(65534)
                os.setuid(65534)
                os.umask(0)
                private.mkdir(parents=True, mode=0o777)
                index = _plant_index(private, probe, marker)
                index.chmod(0o666)
                os._exit(0)
            except BaseException:
                os._exit(1)
        assert os.waitpid(pid, 0)[1] == 0, "the second user could not plant its cache"
        assert private.stat().st_uid == 65534

        refused = _run(tmp, probe, XDG_CACHE_HOME=str(shared))
        assert not marker.exists(), "nnjit loaded an index file planted by another user"
        assert not _report(refused)["add_one"]["cached"]
        [warning] = _warnings(refused)
        assert "uid 65534" in warning and "not cached" in warning
    finally:
        shutil.rmtree(shared, ignore_errors=True)


FIT = """
import numpy as np
import nnjit as nn
import user_mod
print("nnjit from", nn.__file__)
rng = np.random.default_rng(0)
X = rng.standard_normal((32, 3)).astype(np.float32)
Y = X @ np.ones((3, 1), np.float32)
model = nn.Sequential(nn.DenseLayer(3, 1))
history = nn.JITCompiler(model, nn.SGD(learning_rate=0.05), nn.MSELoss()).fit(
    nn.DataLoader(X, Y, batch_size=8), epochs=3, verbose=False)
assert np.isfinite(history["train_loss"].iloc[-1]), history
user_mod.times_two(1)
print("fit done")
"""


def _copy_without_cache_folders(dest: Path) -> Path:
    """A copy of the nnjit package in which numba cannot cache in-tree (each ``__pycache__`` is
    a file), as in a read-only installation."""
    shutil.copytree(REPO / "nnjit", dest / "nnjit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.pyc"))
    for folder in [dest / "nnjit", *(dest / "nnjit").rglob("*")]:
        if folder.is_dir():
            (folder / "__pycache__").write_text("not a folder")
    return dest


def _make_unwritable(folder: Path) -> None:
    if os.getuid() != 0:
        folder.chmod(0o500)
        return
    if shutil.which("chattr") is None:
        pytest.skip("root writes into read-only folders and chattr is not installed")
    done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"root writes into read-only folders and chattr +i failed: {done.stderr}")


def test_unwritable_private_folder_runs_uncached(tmp):
    """(d) nnjit installed where numba cannot cache, and the private folder exists but cannot be
    written: import and a fit work, uncached, after one warning line; the compile notice says
    "not cached"; the user's own cached function still caches next to its source."""
    if not hasattr(os, "getuid"):
        pytest.skip("POSIX permissions")
    package = _copy_without_cache_folders(tmp / "site")
    user = _module_dir(tmp, "user_mod", USER_SOURCE, cacheable=True)
    _block_user_wide_locator(tmp / "cache")
    private = _own_private_folder(tmp / "cache")
    _make_unwritable(private)
    try:
        done = subprocess.run([sys.executable, "-c", FIT], env=_env(tmp, package, user),
                              cwd=tmp, capture_output=True, text=True, timeout=900)
    finally:
        if os.getuid() == 0:
            subprocess.run(["chattr", "-i", str(private)], check=True)
        private.chmod(0o700)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"nnjit from {package / 'nnjit'}" in done.stdout and "fit done" in done.stdout
    [warning] = _warnings(done)
    assert "not cached" in warning and str(private) in warning
    assert "nnjit: compiled in" in done.stderr and "(not cached" in done.stderr
    assert "cached for next time" not in done.stderr
    assert list(private.iterdir()) == []
    assert list((user / "__pycache__").glob("user_mod.times_two-*.nbi"))


def test_no_usable_folder_compiles_uncached_and_warns_once(monkeypatch, capsys):
    """In-process: when no locator can serve a function, ``jit`` still returns a working
    (uncached) dispatcher, and the reason is printed once per process, not once per function."""
    from nnjit.engine.compile_notice import end_message
    from nnjit.kernels import cache_locator
    from nnjit.kernels._jit import jit

    monkeypatch.setattr(cache_locator._NnjitCacheImpl, "_locator_classes",
                        [cache_locator.PrivateCacheLocator])
    monkeypatch.setattr(cache_locator, "_private_dir", [None])
    monkeypatch.setattr(cache_locator, "_problem", ["refused /nowhere: a test reason"])
    monkeypatch.setattr(cache_locator, "_warned", [False])

    def plus_one(x):
        return x + 1

    def plus_two(x):
        return x + 2

    first, second = jit(plus_one), jit(plus_two)
    assert (first(1), second(1)) == (2, 3)
    assert not cache_locator.caches_on_disk(first) and not cache_locator.caches_on_disk(second)
    assert capsys.readouterr().err.splitlines() == [
        "nnjit: warning: compiled code not cached (compiles in every process): refused "
        "/nowhere: a test reason; set NUMBA_CACHE_DIR to a folder of yours to cache it"]
    assert end_message(1.5, cached=False) == "nnjit: compiled in 1.5 s (not cached)"


def _as_other_user(action) -> None:
    """Run ``action()`` in a child process as uid/gid 65534 with umask 0 (root only)."""
    pid = os.fork()
    if pid == 0:  # only os calls, then leave without running pytest's code
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.umask(0)
            action()
            os._exit(0)
        except BaseException:  # noqa: BLE001 (never return into pytest from the child)
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0, "the second user could not plant its cache"


def _needs_root() -> None:
    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("needs root to act as a second user (os.setuid to 65534)")


# numba's user-wide folder ($XDG_CACHE_HOME/numba, ~/.cache/numba) under each set-up of the
# issue: (HOME, XDG_CACHE_HOME or None for unset, the working folder, where numba would look)
USER_WIDE_SETUPS = {
    "HOME a shared sticky folder": ("{shared}", None, "{tmp}", "{shared}/.cache/numba"),
    "XDG_CACHE_HOME empty, cwd shared": ("{tmp}/home", "", "{shared}", "{shared}/numba"),
    "XDG_CACHE_HOME relative, cwd shared": ("{tmp}/home", "rel", "{shared}",
                                            "{shared}/rel/numba"),
    "XDG_CACHE_HOME writable by another uid": ("{tmp}/home", "{shared}/xdg", "{tmp}",
                                               "{shared}/xdg/numba"),
    "~/.cache writable by another uid": ("{shared}/home", None, "{tmp}",
                                         "{shared}/home/.cache/numba"),
}


@pytest.mark.parametrize("setup", sorted(USER_WIDE_SETUPS))
def test_numba_user_wide_folder_planted_by_another_user_never_runs(tmp, setup):
    """(issue 24, item 2) numba's user-wide cache folder follows the environment unchecked; an
    index another uid planted there ran in the victim's process in every set-up. nnjit's
    functions no longer use that locator: the plant is never unpickled, the call works."""
    _needs_root()
    probe = _module_dir(tmp, "probe_mod", PROBE_SOURCE, cacheable=False)
    marker = tmp / "planted-code-ran"
    shared = Path(tempfile.mkdtemp(prefix="nnjit-shared-"))
    try:
        shared.chmod(0o1777)
        home, xdg, cwd, numba_dir = (None if v is None else v.format(tmp=tmp, shared=shared)
                                     for v in USER_WIDE_SETUPS[setup])
        Path(home).mkdir(exist_ok=True)
        if home == f"{shared}/home":  # the victim's HOME, with a ~/.cache the other user owns
            (Path(home) / ".cache").mkdir()
            os.chown(Path(home) / ".cache", 65534, 65534)
            (Path(home) / ".cache").chmod(0o777)
        _as_other_user(lambda: _plant_index(Path(numba_dir), probe, marker).chmod(0o666))
        env = _env(tmp, probe, HOME=home)
        if xdg is None:
            del env["XDG_CACHE_HOME"]
        else:
            env["XDG_CACHE_HOME"] = xdg
        done = subprocess.run([sys.executable, "-c", REPORT], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        assert not marker.exists(), f"an index planted in {numba_dir} ran ({setup})"
        report = _report(done)
        assert report["add_one"]["misses"] == 1
        assert not (report["add_one"]["path"] or "").startswith(numba_dir)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_in_tree_cache_folder_writable_by_another_user_is_not_read(tmp):
    """A ``__pycache__`` next to the source that another uid made (mode 0777) with a planted
    index: nnjit compiles into its private folder instead, never reading the plant. Control:
    the same plant in your own ``__pycache__`` (0755) IS loaded, so it is where numba looks."""
    _needs_root()
    shared = Path(tempfile.mkdtemp(prefix="nnjit-shared-"))  # (tmp is closed to other users)
    try:
        shared.chmod(0o755)
        probe = _module_dir(shared, "probe_mod", PROBE_SOURCE, cacheable=True)
        marker = tmp / "planted-code-ran"
        pycache = probe / "__pycache__"
        pycache.mkdir(mode=0o755)
        _plant_index(pycache, probe, marker, in_tree=True)
        control = _run(tmp, probe)
        assert marker.exists(), "the planted index was not loaded: the test plants it wrongly"
        assert _report(control)["add_one"]["path"] == str(pycache)

        marker.unlink()
        shutil.rmtree(pycache)
        probe.chmod(0o777)  # the other user can create the folder
        _as_other_user(lambda: _plant_index(pycache, probe, marker, in_tree=True).chmod(0o666))
        probe.chmod(0o755)
        assert pycache.stat().st_uid == 65534
        done = _run(tmp, probe)
        assert not marker.exists(), "nnjit loaded an index from a __pycache__ others can write"
        report = _report(done)
        assert report["add_one"]["misses"] == 1 and report["add_one"]["path"] != str(pycache)
        assert report["add_one"]["path"].startswith(str(tmp / "cache" / "nnjit" / "numba"))
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_numba_cache_dir_writable_by_others_is_refused_with_one_line(tmp):
    """``NUMBA_CACHE_DIR`` of mode 0777 holding a planted index: not read, one warning line,
    nnjit's private folder used instead."""
    probe = _module_dir(tmp, "probe_mod", PROBE_SOURCE, cacheable=False)
    marker = tmp / "planted-code-ran"
    chosen = tmp / "numba-cache-dir"
    chosen.mkdir()
    _plant_index(chosen, probe, marker)
    chosen.chmod(0o777)
    for folder in chosen.rglob("*"):
        folder.chmod(0o777 if folder.is_dir() else 0o666)
    done = _run(tmp, probe, NUMBA_CACHE_DIR=str(chosen))
    assert not marker.exists(), "nnjit loaded an index from a NUMBA_CACHE_DIR others can write"
    [warning] = _warnings(done)
    assert str(chosen) in warning and "0777" in warning, warning
    assert _report(done)["add_one"]["path"].startswith(str(tmp / "cache" / "nnjit" / "numba"))
