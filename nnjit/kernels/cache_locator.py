"""Where nnjit's compiled functions are cached on disk, checked before any file there is read.

Numba caches a function next to its source file (``__pycache__``), in ``NUMBA_CACHE_DIR`` or in
the user's ``~/.cache/numba``, and unpickles what it finds there: whoever can write into the
cache folder runs code in the process that loads it. nnjit's functions use, in this order:
``NUMBA_CACHE_DIR`` and the source's ``__pycache__`` (numba's own locators, each used only while
the folder passes :func:`write_unsafe_reason`: owned by you or root, not writable by group or
others, no symbolic link, every folder above it as safe or sticky), then one private folder,
``$XDG_CACHE_HOME/nnjit/numba`` (``~/.cache/nnjit/numba``), which nnjit creates with mode 0700
and uses only while it is owned by the current user, not accessible to group or others, and
reached through folders nobody else can rename. numba's user-wide locator (``~/.cache/numba``,
which follows ``XDG_CACHE_HOME`` even when it is empty or relative) is not used for nnjit's
functions. Each folder's verdict is taken once per process. A refused ``NUMBA_CACHE_DIR`` or
private folder is never read: one line on stderr says why (nnjit then uses the next folder, or
compiles in every process). The user's own ``cache=True`` functions are not touched (the global
``numba.config.CACHE_DIR`` is never set).

nnjit's cache files carry a SHA-256 of their content (and, for code, of their own name), so an
entry damaged by a kill or a full disk during its write, a bad disk, or copied from another
function is discarded with one warning line and compiled again, instead of failing (or running
the wrong code) in every later process: :class:`NnjitFunctionCache`.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from typing import ClassVar

from numba.core import caching, config

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


def _uid() -> int | None:
    return getattr(os, "getuid", lambda: None)()  # (no uids on Windows: no checks)


def _parents_reason(path: str, uid: int) -> str | None:
    """Why someone other than ``uid`` or root could rename or replace a folder on the way to
    ``path``, or None: each folder above it, as written (a symbolic link there must be
    ``uid``'s or root's) and as resolved, must belong to ``uid`` or root and be closed to group
    and others' writes, or be sticky (as /tmp is: others can add entries there but not rename
    ours)."""
    chains = []
    for start in (os.path.abspath(path), os.path.realpath(path)):
        parents, parent = [], os.path.dirname(start)
        while True:
            parents.append(parent)
            above = os.path.dirname(parent)
            if above == parent:
                break
            parent = above
        chains.append(parents)
    for i, parents in enumerate(chains):
        for parent in parents:
            info = os.lstat(parent) if i == 0 else os.stat(parent)
            if info.st_uid not in (uid, 0):
                return f"{parent} above it is owned by uid {info.st_uid}, not by you or root"
            if stat.S_ISLNK(info.st_mode):
                continue  # (a link's own mode means nothing; the resolved chain is checked)
            if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
                return (f"{parent} above it has mode {stat.S_IMODE(info.st_mode):04o}: others "
                        f"could replace the folder")
    return None


def _unsafe_reason(path: str, uid: int) -> str | None:
    """Why ``path`` (an existing folder) could be read or written by someone other than
    ``uid``, or None: the private folder must be ``uid``'s and closed to group and others, and
    the folders above it safe (:func:`_parents_reason`)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return "it is not a folder (a symbolic link or a file)"
    if info.st_uid != uid:
        return f"it is owned by uid {info.st_uid}, not by you (uid {uid})"
    if info.st_mode & 0o077:
        return f"its mode {stat.S_IMODE(info.st_mode):04o} lets group or others in (expected 0700)"
    return _parents_reason(path, uid)


def write_unsafe_reason(path: str, uid: int) -> str | None:
    """Why someone other than ``uid`` or root could write files into ``path`` (an existing
    folder of numba's locators: ``NUMBA_CACHE_DIR``, a ``__pycache__``), or None. The folder
    must not be a symbolic link, must be owned by ``uid`` or root and closed to group and
    others' writes (reading is harmless), and the folders above it safe."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return "it is not a folder (a symbolic link or a file)"
    if info.st_uid not in (uid, 0):
        return f"it is owned by uid {info.st_uid}, not by you (uid {uid}) or root"
    if info.st_mode & 0o022:
        return (f"its mode {stat.S_IMODE(info.st_mode):04o} lets group or others write "
                f"(they could plant code)")
    return _parents_reason(path, uid)


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
        uid = _uid()
        reason = None if uid is None else _unsafe_reason(path, uid)
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


_verdicts: dict[str, str | None] = {}  # folder -> why refused (None: safe), once per process


def _verdict(path: str, uid: int) -> str | None:
    if path not in _verdicts:
        try:
            _verdicts[path] = write_unsafe_reason(path, uid)
        except OSError as error:
            _verdicts[path] = f"cannot inspect it ({error.strerror or error})"
    return _verdicts[path]


def _checked(locator, warn: bool):
    """``locator`` when its folder (made if missing) passes :func:`write_unsafe_reason`, else
    None, after one warning line if ``warn``. The folders that exist are judged before anything
    is made below them."""
    path = os.path.abspath(locator.get_cache_path())
    uid = _uid()
    try:
        if uid is not None:
            existing = path
            while not os.path.lexists(existing):
                existing = os.path.dirname(existing)
            # a folder still to be made is judged by the folders it will be made in
            reason = (_verdict(existing, uid) if existing == path
                      else _parents_reason(os.path.join(existing, "-"), uid))
            if reason is not None:
                if warn:
                    _warn_refused(existing, reason)
                return None
        locator.ensure_cache_path()
    except OSError:  # cannot be made or written: the next locator, as numba does
        return None
    reason = None if uid is None else _verdict(path, uid)
    if reason is not None:
        if warn:
            _warn_refused(path, reason)
        return None
    return locator


class CheckedUserProvidedLocator(caching.UserProvidedCacheLocator):
    """numba's ``NUMBA_CACHE_DIR`` locator, used only while the folder passes
    :func:`write_unsafe_reason` (refused with one warning line)."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not config.CACHE_DIR or not os.path.exists(py_file):
            return None
        return _checked(cls(py_func, py_file), warn=True)


class CheckedInTreeLocator(caching.InTreeCacheLocator):
    """numba's ``__pycache__``-next-to-the-source locator, used only while the folder passes
    :func:`write_unsafe_reason` (else, silently, the private folder is next)."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.exists(py_file):
            return None
        return _checked(cls(py_func, py_file), warn=False)


class _NnjitCacheImpl(caching.CompileResultCacheImpl):
    # numba's user-wide locator is left out: it follows XDG_CACHE_HOME unchecked (even empty or
    # relative, so the working folder) and its folders are shared by every user of a HOME
    _locator_classes: ClassVar[list] = [
        CheckedUserProvidedLocator, CheckedInTreeLocator, PrivateCacheLocator]


#: Ends every nnjit cache file, followed by the SHA-256 of the file's name and the bytes before
#: it (numba's own content: its unpickler stops before this trailer).
_SEAL = b"nnjit-sealed-1"
_DIGEST = 32  # sha256
#: Appended to numba's version in nnjit's index files: an index in numba's own format (an nnjit
#: before sealed files) is another version to numba, so stale, and rewritten on the next save.
_VERSION_MARK = "+" + _SEAL.decode()


class DamagedCacheFile(ValueError):
    """A cache file that cannot be what nnjit wrote (checksum, format or unpickling failed)."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def _seal(name: str, body: bytes) -> bytes:
    return body + _SEAL + hashlib.sha256(name.encode() + body).digest()


def _check_seal(path: str) -> None:
    """Raise :class:`DamagedCacheFile` unless the file at ``path`` ends with a valid seal."""
    with open(path, "rb") as f:
        raw = f.read()
    end = len(raw) - _DIGEST
    body, seal, digest = raw[:end - len(_SEAL)], raw[end - len(_SEAL):end], raw[end:]
    if not raw:
        raise DamagedCacheFile(path, "empty")
    if seal != _SEAL or hashlib.sha256(os.path.basename(path).encode() + body).digest() != digest:
        raise DamagedCacheFile(path, "checksum mismatch (truncated, altered or another "
                                     "function's file)")


class _SealedCacheFile(caching.IndexDataCacheFile):
    """numba's index and data files, each followed by a seal (:data:`_SEAL` and a SHA-256 of the
    file's name and content, so another function's file fails too), checked before numba
    unpickles the file. A damaged index reads as empty after one warning line (the next save
    rewrites it); a damaged data file raises :class:`DamagedCacheFile`, which
    :meth:`NnjitFunctionCache.load_overload` turns into a warning and a compile."""

    def _load_index(self):
        path = self._index_path
        try:
            with open(path, "rb") as f:
                head = f.read(64)
        except FileNotFoundError:
            return {}
        if _VERSION_MARK.encode() not in head and head[:1] == b"\x80":
            return {}  # numba's own format (an nnjit before sealed files): stale, not read
        try:
            _check_seal(path)
            return super()._load_index()
        except FileNotFoundError:
            return {}
        except Exception as error:  # noqa: BLE001 (any unreadable index is a stale one)
            _warn_discarded(error if isinstance(error, DamagedCacheFile)
                            else DamagedCacheFile(path, f"{type(error).__name__}: {error}"))
            return {}

    def _save_index(self, overloads):
        body = self._dump(self._version) + self._dump((self._source_stamp, overloads))
        with self._open_for_write(self._index_path) as f:
            f.write(_seal(self._index_name, body))

    def _load_data(self, name):
        path = self._data_path(name)
        _check_seal(path)
        try:
            return super()._load_data(name)
        except OSError:
            raise
        except Exception as error:  # e.g. a module of another checkout: ModuleNotFoundError
            raise DamagedCacheFile(path, f"{type(error).__name__}: {error}") from error

    def _save_data(self, name, data):
        with self._open_for_write(self._data_path(name)) as f:
            f.write(_seal(name, self._dump(data)))

    def save(self, key, data):
        """numba's save, but the data file is named by a digest of the entry's key, not by the
        next number free in the index this process read: two processes saving different
        overloads of one function at once took the same number, and the index then named the
        other overload's machine code for this key (compiled for other argument types: memory
        corruption when called, seen as a hung or aborted test worker). The data is written
        before the index names it."""
        data_name = self._data_name(int(hashlib.sha256(repr(key).encode()).hexdigest()[:15], 16))
        self._save_data(data_name, data)
        overloads = self._load_index()
        if overloads.get(key) != data_name:
            overloads[key] = data_name
            self._save_index(overloads)


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
    """numba's per-function cache with nnjit's checked locators (:class:`_NnjitCacheImpl`),
    sealed files (:class:`_SealedCacheFile`) and entries stamped with the sources the function
    reaches (:class:`_ReachStamp`). An entry that fails to load is discarded with one warning
    line and compiled again (the save overwrites it)."""

    _impl_class = _NnjitCacheImpl

    def __init__(self, py_func):
        chosen = getattr(config, "CACHE_LOCATOR_CLASSES", None)
        if chosen:  # (NUMBA_CACHE_LOCATOR_CLASSES would replace the checked locators)
            config.CACHE_LOCATOR_CLASSES = ""
        try:
            super().__init__(py_func)
        finally:
            if chosen:
                config.CACHE_LOCATOR_CLASSES = chosen
        cache_file = self._cache_file
        cache_file.__class__ = _SealedCacheFile
        cache_file._version += _VERSION_MARK
        cache_file._source_stamp = _ReachStamp(cache_file._source_stamp, py_func)

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as error:  # noqa: BLE001 (a failed load is a miss, not a failed call)
            _warn_discarded(error if isinstance(error, DamagedCacheFile) else DamagedCacheFile(
                self._cache_file._index_path, f"{type(error).__name__}: {error}"))
            return None


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


_discarded: set[str] = set()  # files already reported in this process


def _warn_discarded(error: DamagedCacheFile) -> None:
    if error.path in _discarded:
        return
    _discarded.add(error.path)
    _say(f"nnjit: warning: discarded a damaged compiled-code cache file {error.path} "
         f"({error.reason[:200]}); compiling it again")


_refused: list[str] = []


def _warn_refused(path: str, reason: str) -> None:
    if _refused:
        return
    _refused.append(path)
    _say(f"nnjit: warning: NUMBA_CACHE_DIR folder {path} not used for nnjit's compiled code: "
         f"{reason}; using nnjit's private cache folder")


def _say(text: str) -> None:
    try:
        print(text.replace("\n", " "), file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # stderr closed or None (pythonw)
        pass


def _warn_uncached(reason: str) -> None:
    if _warned[0]:
        return
    _warned[0] = True
    _say(f"nnjit: warning: compiled code not cached (compiles in every process): {reason}; "
         f"set NUMBA_CACHE_DIR to a folder of yours to cache it")
