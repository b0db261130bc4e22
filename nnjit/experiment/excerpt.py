"""Bounded quoting of user values in error messages.

A message quotes what the user gave (``got 'rleu'``) so they can find it, but a value can be a
64 KiB string or a list of 100,000 items; :func:`excerpt` quotes at most about
:data:`EXCERPT_CHARS` characters of it, whatever its size, without building its whole ``repr``.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["EXCERPT_CHARS", "bounded_message", "excerpt"]

#: Longest quote of a user value in a message.
EXCERPT_CHARS = 200

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxtuple = _REPR.maxlist = _REPR.maxarray = _REPR.maxdict = 8
_REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 8
_REPR.maxstring = _REPR.maxlong = _REPR.maxother = EXCERPT_CHARS


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """``repr(value)``, or when that is longer than ``limit`` characters its start and the
    value's size: ``'aaaa...' (70000 characters)``, ``[1, 2, 3, ...] (100000 items)``."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    try:
        text = _REPR.repr(value)
    except ValueError:  # an int beyond Python's int-to-str digit limit
        return f"an int of {value.bit_length()} bits"
    if len(text) <= limit:
        return text
    try:
        size = f" ({len(value)} items)" if not isinstance(value, (str, bytes)) else ""
    except TypeError:
        size = ""
    return f"{text[:limit]}...{size}"


def bounded_message(message: str, value: Any, limit: int = 2 * EXCERPT_CHARS) -> str:
    """``message`` with ``repr(value)`` in it replaced by :func:`excerpt` when the message is
    longer than ``limit`` (for messages formatted elsewhere with ``{value!r}``); a message
    still too long is cut at ``4 * limit`` characters."""
    if len(message) <= limit:
        return message
    try:
        message = message.replace(repr(value), excerpt(value))
    except ValueError:  # repr of an int beyond the digit limit
        pass
    return message if len(message) <= 4 * limit else message[:4 * limit] + "..."
