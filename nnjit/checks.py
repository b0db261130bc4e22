"""Type checks of numeric arguments: a value of the wrong type is an error naming the argument.

``float("1")`` and ``int("1")`` accept strings, and ``math.isfinite("1")`` fails with "must be
real number, not str", naming nothing: every public numeric argument goes through
:func:`check_int` or :func:`check_real` before any arithmetic.
"""

from __future__ import annotations

import numpy as np


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type (a str where a number belongs, a float where an int does).

    A TypeError, as Python raises for wrong types; also a ValueError, which nnjit raised for some
    of these before, so existing ``except ValueError`` code keeps working.
    """


def is_int(value) -> bool:
    """An int or NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value) -> bool:
    """An int, float or NumPy number, not a bool."""
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_)))


def wrong_type(name: str, expected: str, value) -> ArgumentTypeError:
    """The error for argument ``name`` (e.g. ``"fit: epochs"``), expected to be ``expected``."""
    return ArgumentTypeError(f"{name} must be {expected}, got {value!r} "
                             f"({type(value).__name__})")


def check_int(value, name: str, expected: str = "an int", none_ok: bool = False):
    """``value`` as an int (or None when ``none_ok``); else :class:`ArgumentTypeError`."""
    if value is None and none_ok:
        return None
    if not is_int(value):
        raise wrong_type(name, expected, value)
    return int(value)


def check_real(value, name: str, expected: str = "a number", none_ok: bool = False):
    """``value`` as a float (or None when ``none_ok``); else :class:`ArgumentTypeError`."""
    if value is None and none_ok:
        return None
    if not is_real(value):
        raise wrong_type(name, expected, value)
    return float(value)
