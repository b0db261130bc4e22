"""Opening a path the user (or a file) names, as a regular file only.

``open()`` on a FIFO blocks until a writer comes (``nnjit predict --data FIFO`` hung until
killed), and a device such as ``/dev/zero`` never ends. Every data path nnjit reads (CSV
tables, ``.nne`` files, ``encoding.json``, ``idps.csv``) is opened here: without blocking,
then refused unless it is a regular file.
"""

from __future__ import annotations

import errno
import os
import stat


def open_regular(path, mode: str = "rb", **kwargs):
    """``open(path, mode, **kwargs)`` for reading, refused with an OSError (``EINVAL``, naming
    the path) unless ``path`` is a regular file; a FIFO never blocks the call."""
    name = os.fspath(path)
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a folder)", name)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return open(fd, mode, closefd=True, **kwargs)  # (the caller closes it)
    except BaseException:
        os.close(fd)
        raise
