"""Expected failures of the command line: one line on stderr, exit status 2, no traceback.

A command raises :class:`CommandError` for a failure the user can fix (a missing file, a bad
config, a run that already exists...): ``main`` prints ``nnjit <command>: <what>: <why>; <what to
do>`` and returns :data:`EXIT_USAGE`. ``nnjit --debug ...`` re-raises it instead, so the
traceback (with the original exception chained) is shown. Any other exception is a bug and
keeps its traceback.
"""

from __future__ import annotations

import contextlib
import sys
import warnings

#: Exit status of an expected failure (argparse uses 2 for bad arguments too).
EXIT_USAGE = 2


#: The longest error line printed: messages quote ~200 characters of each value, so this cut
#: only ever shortens a message that quoted a file's content whole.
MAX_LINE = 2000


class CommandError(Exception):
    """An expected failure of a command; its message is the whole line shown to the user."""


def os_error_line(error: OSError, doing: str) -> str:
    """``"cannot <doing> <file>: <reason>"`` for an OSError (permission denied, no such file)."""
    name = error.filename if error.filename is not None else ""
    reason = error.strerror or str(error)
    return f"cannot {doing} {name}: {reason}".replace("  ", " ")


def report(command: str, error: CommandError) -> int:
    """Print ``error`` as one line on stderr; returns :data:`EXIT_USAGE`."""
    text = " ".join(str(error).split())  # one line, whatever the message held
    if len(text) > MAX_LINE:  # (a message quoting a file's content beyond its excerpts)
        text = f"{text[:MAX_LINE - 80]} ... ({len(text) - MAX_LINE + 80} more characters)"
    print(f"nnjit {command}: {text}", file=sys.stderr)
    return EXIT_USAGE


@contextlib.contextmanager
def one_line_warnings(command: str):
    """Show the warnings raised while a command runs as ``nnjit <command>: warning: <text>``
    lines (Python's default format adds the file, line and source line of the warn call)."""
    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        print(f"nnjit {command}: warning: {text}", file=file or sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield
