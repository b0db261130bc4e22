"""Where nnjit's compiled functions are cached on disk, with a private folder as the last resort.

Numba caches a function next to its source file (``__pycache__``), in ``NUMBA_CACHE_DIR`` or in
the user's ``~/.cache/numba``, and unpickles what it finds there: whoever can write into the
cache folder runs code in the process that loads it. nnjit keeps numba's own locators, in
numba's order, for its functions (the user's own ``cache=True`` functions are not touched: the
global ``numba.config.CACHE_DIR`` is never set). When none of them works for a file (a read-only
installation, no writable home cache), nnjit's functions go to one private folder,
``$XDG_CACHE_HOME/nnjit/numba`` (``~/.cache/nnjit/numba``), which nnjit creates with mode 0700
and uses only while it is owned by the current user, not accessible to group or others, and
reached through folders nobody else can rename; its state is checked once per process. A folder
that fails the check is never read: nnjit then compiles in every process, after one line on
stderr saying why.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from numba.core import caching

#: Set by the private locator when it refused or could not use its folder (the warning's text).
_problem: list[str] = []
_warned: list[bool] = [False]


def cache_home() -> str:
    """``$XDG_CACHE_HOME`` when it is an absolute path, else ``~/.cache`` (XDG base dirs)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return xdg
    return os.path.join(os.path.expanduser("~"), ".cache")


def private_cache_dir() -> str:
    """The folder nnjit's compiled code is cached in when numba's own locators all fail."""
    return os.path.join(cache_home(), "nnjit", "numba")


def _unsafe_reason(path: str, uid: int) -> str | None:
    """Why ``path`` (an existing folder) could be written by someone other than ``uid``, or
    None. The folder itself must be ``uid``'s and closed to group and others; each folder above
    it must belong to ``uid`` or root and be closed to group and others' writes, or be sticky
    (as /tmp is: others can add entries there but not rename ours)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return "it is not a folder (a symbolic link or a file)"
    if info.st_uid != uid:
        return f"it is owned by uid {info.st_uid}, not by you (uid {uid})"
    if info.st_mode & 0o077:
        return f"its mode {stat.S_IMODE(info.st_mode):04o} lets group or others in (expected 0700)"
    parent = os.path.dirname(os.path.realpath(path))
    while True:
        info = os.stat(parent)
        if info.st_uid not in (uid, 0):
            return f"{parent} above it is owned by uid {info.st_uid}, not by you or root"
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return (f"{parent} above it has mode {stat.S_IMODE(info.st_mode):04o}: others could "
                    f"replace the folder")
        above = os.path.dirname(parent)
        if above == parent:
            return None
        parent = above


def _make_private_dir(path: str) -> None:
    """Create ``path`` and the missing folders above it, each with mode 0700 (``os.makedirs``
    would give the folders above the umask's default mode)."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:  # another process made it meanwhile; the check judges it
            pass


def _prepare_private_dir() -> str | None:
    """The private folder, created (0700) if missing and checked; None after recording why it
    cannot be used."""
    path = private_cache_dir()
    try:
        _make_private_dir(path)
        uid = getattr(os, "getuid", lambda: None)()
        reason = None if uid is None else _unsafe_reason(path, uid)  # (no uids on Windows)
    except OSError as error:
        _problem.append(f"cannot create or inspect {path} ({error.strerror or error})")
        return None
    if reason is not None:
        _problem.append(f"refused {path}: {reason}")
        return None
    return path


_private_dir: list[str | None] = []  # the verdict, once per process


def _checked_private_dir() -> str | None:
    if not _private_dir:
        _private_dir.append(_prepare_private_dir())
    return _private_dir[0]


class PrivateCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Numba cache locator for :func:`private_cache_dir`, tried after numba's own locators.

    The folder is checked (owner, mode, the folders above it) before its first use in a process
    and never used when the check fails; one sub-folder per source folder, as numba's
    ``UserWideCacheLocator`` does.
    """

    def __init__(self, py_func, py_file, root: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self):
        return self._cache_path

    def ensure_cache_path(self):
        os.makedirs(self._cache_path, mode=0o700, exist_ok=True)
        tempfile.TemporaryFile(dir=self._cache_path).close()  # writable? (as numba checks)

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.exists(py_file):
            return None
        root = _checked_private_dir()
        if root is None:
            return None
        locator = cls(py_func, py_file, root)
        try:
            locator.ensure_cache_path()
        except OSError as error:
            if not _problem:
                _problem.append(f"cannot write in {root} ({error.strerror or error})")
            return None
        return locator


class _NnjitCacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [*caching.CompileResultCacheImpl._locator_classes, PrivateCacheLocator]


class _ReachStamp:
    """The cache index's freshness stamp: numba's (the function's own file) plus the digest of
    every file its code reaches (:func:`nnjit.kernels.source_reach.reach_digest`), so an edited
    kernel in another file makes the entry stale instead of running its old machine code.
    Computed when the index is first read or written, not at import; saved as a plain tuple."""

    __hash__ = None

    def __init__(self, own, py_func):
        self._own = own
        self._py_func = py_func
        self._value = None

    def value(self) -> tuple:
        if self._value is None:
            from nnjit.kernels.source_reach import reach_digest

            self._value = (self._own, reach_digest(self._py_func))
        return self._value

    def __eq__(self, other):
        return self.value() == (other.value() if isinstance(other, _ReachStamp) else other)

    def __reduce__(self):
        return tuple, (self.value(),)


class NnjitFunctionCache(caching.FunctionCache):
    """numba's per-function cache with :class:`PrivateCacheLocator` after numba's locators, and
    entries stamped with the sources the function reaches (:class:`_ReachStamp`)."""

    _impl_class = _NnjitCacheImpl

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file._source_stamp = _ReachStamp(self._cache_file._source_stamp, py_func)


def enable_caching(dispatcher) -> bool:
    """Give ``dispatcher`` (a numba dispatcher made without ``cache=True``) an on-disk cache;
    False, after one line on stderr per process, when no safe writable folder exists for it."""
    try:
        dispatcher._cache = NnjitFunctionCache(dispatcher.py_func)
        return True
    except RuntimeError as error:  # numba: "cannot cache function ...: no locator available"
        _warn_uncached(_problem[0] if _problem else str(error))
        return False


def caches_on_disk(dispatcher) -> bool:
    """Whether ``dispatcher`` saves what it compiles to disk (for the compile notice)."""
    return isinstance(getattr(dispatcher, "_cache", None), caching.Cache)


def _warn_uncached(reason: str) -> None:
    if _warned[0]:
        return
    _warned[0] = True
    text = (f"nnjit: warning: compiled code not cached (compiles in every process): {reason}; "
            f"set NUMBA_CACHE_DIR to a folder of yours to cache it")
    try:
        print(text.replace("\n", " "), file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # stderr closed or None (pythonw)
        pass
