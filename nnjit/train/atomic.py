"""Atomic file replacement: temporary file in the same folder, fsync, ``os.replace``.

A reader (or a process started after a crash) sees either the old file or the new one, never a
mix. Both the ``.nne`` writer (:func:`nnjit.train.nne.save_nne`) and the text files of a run
(``idps.csv``, ``run.yaml``) go through :func:`atomic_replace`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


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
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name[:64]}.", suffix=".tmp",
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
