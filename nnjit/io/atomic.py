"""Atomic file replacement: temporary file in the same folder, fsync, ``os.replace``.

A reader (or a process started after a crash) sees either the old file or the new one, never a
mix. Both the ``.nne`` writer (:func:`nnjit.io.nne.save_nne`) and the text files of a run
(``idps.csv``, ``run.yaml``) go through :func:`atomic_replace`.

A process killed mid-write (SIGKILL, power loss) leaves its temporary file behind, named
``.<target name>.<8 random characters>.tmp`` next to the target; :func:`remove_stale_temp_files`
deletes exactly those of given targets (a run does it when it starts again).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path


#: The random part ``tempfile.mkstemp`` puts between our prefix and suffix: 8 characters of
#: ``tempfile._RandomNameSequence.characters`` (a test checks a real temporary name against it).
_TEMP_RANDOM = re.compile(r"[a-z0-9_]{8}")
_TEMP_SUFFIX = ".tmp"


def _temp_prefix(target_name: str) -> str:
    return f".{target_name[:64]}."


def is_temp_file_of(name: str, target_name: str) -> bool:
    """Whether the file name ``name`` is a temporary file :func:`atomic_replace` makes while it
    writes a file named ``target_name`` (in the same folder)."""
    prefix = _temp_prefix(target_name)
    return (name.startswith(prefix) and name.endswith(_TEMP_SUFFIX)
            and _TEMP_RANDOM.fullmatch(name[len(prefix):-len(_TEMP_SUFFIX)]) is not None)


def remove_stale_temp_files(folder, target_names) -> list[Path]:
    """Delete the temporary files that :func:`atomic_replace` left in ``folder`` while writing
    one of ``target_names`` (a process killed mid-write); returns the paths removed.

    Only regular files whose names match that pattern exactly are touched (never a symlink, a
    folder or any other file). Call it only when no other process writes those targets.
    """
    folder = Path(os.fspath(folder))
    targets = tuple(target_names)
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:  # no folder (yet): nothing to clean
        return removed
    for entry in entries:
        if not any(is_temp_file_of(entry.name, t) for t in targets):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        removed.append(Path(entry.path))
    return removed


def _file_mode(target: Path) -> int:
    """Permission bits for the new file: the existing target's, else 0o666 minus the umask."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        pass
    try:  # Linux >= 4.7 exposes the umask without the racy os.umask() set-and-restore dance.
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


def _fsync_dir(directory: Path) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse to fsync a directory; the rename itself has happened
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_replace(path, mode: str = "wb", encoding: str | None = None):
    """Yield a file to write; on success it replaces ``path``, on any error ``path`` is untouched
    and the temporary file is removed. The file is fsync'ed before the rename."""
    target = Path(os.fspath(path))
    fd, tmp_name = tempfile.mkstemp(prefix=_temp_prefix(target.name), suffix=_TEMP_SUFFIX,
                                    dir=target.parent)
    tmp = Path(tmp_name)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, _file_mode(target))
        newline = "" if "b" not in mode else None
        with os.fdopen(fd, mode, encoding=encoding, newline=newline) as fh:
            fd = -1  # owned by fh now
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    _fsync_dir(target.parent)


def atomic_write_text(path, text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` atomically; on any error ``path`` is left as it was."""
    with atomic_replace(path, "w", encoding=encoding) as fh:
        fh.write(text)
