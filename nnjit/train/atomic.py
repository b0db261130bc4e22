"""Atomic writes of small text files: temporary file in the same folder, fsync, ``os.replace``.

A reader (or a process started after a crash) sees either the old file or the new one, never a
mix. ``.nne`` files have their own atomic writer, :func:`nnjit.train.nne.save_nne`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nnjit.train.nne import _file_mode, _fsync_dir


def atomic_write_text(path, text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` atomically; on any error ``path`` is left as it was."""
    target = Path(os.fspath(path))
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name[:64]}.", suffix=".tmp",
                                    dir=target.parent)
    tmp = Path(tmp_name)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, _file_mode(target))
        with os.fdopen(fd, "w", encoding=encoding, newline="") as fh:
            fd = -1
            fh.write(text)
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
