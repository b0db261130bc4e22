"""Argument checks: one declarative rule per argument, and an error naming the argument.

A rule says what an argument may hold (:func:`Int`, :func:`Real`, :func:`Bool`, :func:`Choice`,
each optionally ``None``), and ``rule.check(where, value)`` returns the value normalised
(``int``, ``float``, ``bool``, ``str``) or raises an error that names ``where``::

    epochs = Int(min=1).check("fit: epochs", epochs)
    # ValueError: fit: epochs must be an int >= 1, got 0

- A value in the wrong range: ``ValueError("<where> must be <allowed>, got <value!r>")``.
- A value of the wrong type (``"3"``, ``2.5`` for an int, ``True`` for a number):
  :class:`ArgumentTypeError`, a TypeError that is also a ValueError, whose message adds the type:
  ``"... got '3' (str)"``. ``float("1")`` and ``int("1")`` accept strings, and
  ``math.isfinite("1")`` fails with a message that names nothing, so every public numeric argument
  goes through a rule (or :func:`check_int`/:func:`check_real`) before any arithmetic.
- A float is always finite (``nan``/``inf`` are refused).

``<allowed>`` is derived from the rule (``"an int >= 1"``, ``"> 0"``, ``"in [0, 1)"``,
``"None or an int >= 0"``, ``"True or False"``, ``"one of 'min', 'max'"``); ``says=`` replaces
it where an established message words it otherwise (``"a positive int"``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

_INT64 = 2 ** 63  # ints the compiled config rows can hold

__all__ = ["ArgumentTypeError", "Bool", "Choice", "Int", "Param", "Real", "check_int",
           "check_real", "is_int", "is_real", "wrong_type"]


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


# -- declarative rules ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Param:
    """The type and allowed range of one argument, hyperparameter or config field.

    Build one with :func:`Int`, :func:`Real`, :func:`Bool` or :func:`Choice`.
    ``check(where, value)`` returns the normalised value (``int``, ``float``, ``bool`` or a choice
    string) or raises ``ValueError("<where> must be <range>, got <value>")``, e.g.
    ``"OptimizerConfig.lr must be > 0, got -1"`` (:class:`ArgumentTypeError` for a wrong type).

    Args:
        kind: ``"int"``, ``"float"``, ``"bool"`` or ``"choice"``.
        low, high: bounds (``None``: unbounded), inclusive unless ``low_open``/``high_open``.
        choices: the allowed strings of a ``"choice"``.
        none_ok: ``None`` is allowed too (its meaning is documented where the argument is).
        says: the allowed values in words for every message of this rule, instead of the
            derived :meth:`describe` (for a message worded otherwise, e.g. ``"a positive int"``).
    """

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    none_ok: bool = False
    says: str | None = None

    def describe(self) -> str:
        """The allowed values in words: ``"> 0"``, ``"in [0, 1)"``, ``"an int >= 1"``..."""
        if self.says is not None:
            return self.says
        if self.kind == "bool":
            text = "True or False"
        elif self.kind == "choice":
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        else:
            text = self._bounds()
            if self.kind == "int":
                text = "an int" if text == "finite" else f"an int {text}"
        return f"None or {text}" if self.none_ok else text

    def _bounds(self) -> str:
        lo, hi = _num(self.low), _num(self.high)
        if self.low is not None and self.high is not None:
            return (f"in {'(' if self.low_open else '['}{lo}, {hi}"
                    f"{')' if self.high_open else ']'}")
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {lo}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {hi}"
        return "finite"

    def check(self, where: str, value: Any):
        """Validate ``value`` for the argument named ``where``; return it normalised."""
        if value is None and self.none_ok:
            return None
        kind = self.kind
        if (kind == "int" and type(value) is int and -_INT64 <= value < _INT64) or (
                kind == "float" and type(value) is float and math.isfinite(value)):
            # the common case, without building the message of a failure (an int past int64
            # takes the slow path, whose message cannot even repr it: refused as before)
            low, high = self.low, self.high
            if (low is None or (value > low if self.low_open else value >= low)) and (
                    high is None or (value < high if self.high_open else value <= high)):
                return value
        fail = ValueError(f"{where} must be {self.describe()}, got {value!r}")
        if self.kind == "bool":
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
            raise fail
        if self.kind == "choice":
            if isinstance(value, str) and value in self.choices:
                return str(value)
            raise fail
        if isinstance(value, (bool, np.bool_)):
            raise ArgumentTypeError(str(fail))
        if self.kind == "int":
            value = check_int(value, where, self.describe())
        else:
            if not is_real(value):
                raise wrong_type(where, self._number(), value)
            value = float(value)
            if not math.isfinite(value):
                if self.says is not None:
                    raise fail
                bound = self._bounds()
                raise ValueError(f"{where} must be a finite number"
                                 f"{'' if bound == 'finite' else ' ' + bound}, got {value!r}")
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            raise fail
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            raise fail
        return value

    def _number(self) -> str:
        """What a float rule expects, in the words of a wrong-type error: ``"a number > 0"``."""
        if self.says is not None:
            return self.says
        bound = self._bounds()
        return (f"{'None or ' if self.none_ok else ''}a number"
                f"{'' if bound == 'finite' else ' ' + bound}")


def _num(x) -> str:
    return "" if x is None else (str(int(x)) if float(x).is_integer() else repr(x))


def Int(min: int | None = None, max: int | None = None, *, none_ok: bool = False,
        says: str | None = None) -> Param:
    """An int (not a bool) in ``[min, max]`` (either bound may be left out)."""
    return Param("int", low=min, high=max, none_ok=none_ok, says=says)


def Real(min: float | None = None, max: float | None = None, *, gt: float | None = None,
         lt: float | None = None, none_ok: bool = False, says: str | None = None) -> Param:
    """A finite number (int or float, not a bool), bounded by ``min``/``max`` (inclusive) or
    ``gt``/``lt`` (exclusive): ``Real(gt=0)`` is ``> 0``, ``Real(min=0, lt=1)`` is ``[0, 1)``."""
    if min is not None and gt is not None or max is not None and lt is not None:
        raise TypeError("Real: give min or gt, and max or lt, not both")
    return Param("float", low=min if gt is None else gt, high=max if lt is None else lt,
                 low_open=gt is not None, high_open=lt is not None, none_ok=none_ok, says=says)


def Bool(*, none_ok: bool = False, says: str | None = None) -> Param:
    """``True`` or ``False`` (NumPy bools too; not 0 or 1)."""
    return Param("bool", none_ok=none_ok, says=says)


def Choice(*choices: str, none_ok: bool = False, says: str | None = None) -> Param:
    """One of the strings ``choices``."""
    return Param("choice", choices=tuple(choices), none_ok=none_ok, says=says)
