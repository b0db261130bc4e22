"""nnjit.checks: the declarative argument rules and the messages they give."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnjit.checks import ArgumentTypeError, Bool, Choice, Int, Real


def _message(rule, value, where="f: x"):
    with pytest.raises(ValueError) as info:
        rule.check(where, value)
    return type(info.value), str(info.value)


def test_rules_return_the_normalised_value():
    assert Int(min=1).check("f: n", np.int32(3)) == 3 and type(Int().check("f", np.int64(2))) is int
    assert Real(gt=0).check("f: lr", 1) == 1.0 and type(Real().check("f", 2)) is float
    assert Bool().check("f: b", np.bool_(True)) is True
    assert Choice("min", "max").check("f: mode", "max") == "max"
    assert Int(min=1, none_ok=True).check("f: n", None) is None


def test_range_errors_name_the_argument_and_the_range():
    assert _message(Int(min=1), 0) == (ValueError, "f: x must be an int >= 1, got 0")
    assert _message(Real(gt=0), -1) == (ValueError, "f: x must be > 0, got -1")
    assert _message(Real(min=0, lt=1), 1.0) == (ValueError, "f: x must be in [0, 1), got 1.0")
    assert _message(Real(gt=0, max=1), 0) == (ValueError, "f: x must be in (0, 1], got 0")
    assert _message(Int(min=0, max=9), 10)[1] == "f: x must be an int in [0, 9], got 10"
    assert _message(Int(min=0, none_ok=True), -1)[1] == "f: x must be None or an int >= 0, got -1"
    assert _message(Bool(), 1) == (ValueError, "f: x must be True or False, got 1")
    assert _message(Choice("a", "b"), "c") == (ValueError, "f: x must be one of 'a', 'b', got 'c'")


def test_wrong_types_are_argument_type_errors_that_add_the_type():
    assert _message(Int(min=1), "3") == (ArgumentTypeError,
                                         "f: x must be an int >= 1, got '3' (str)")
    assert _message(Int(min=1), 2.0)[1] == "f: x must be an int >= 1, got 2.0 (float)"
    assert _message(Real(gt=0), "0.1")[1] == "f: x must be a number > 0, got '0.1' (str)"
    assert _message(Real(), [1])[1] == "f: x must be a number, got [1] (list)"
    assert _message(Real(gt=0, none_ok=True), "1")[1] == \
        "f: x must be None or a number > 0, got '1' (str)"
    for rule in (Int(), Real()):  # a bool is not a number here
        assert _message(rule, True)[0] is ArgumentTypeError
    assert issubclass(ArgumentTypeError, TypeError)


def test_numbers_are_finite():
    assert _message(Real(min=0), math.nan)[1] == "f: x must be a finite number >= 0, got nan"
    assert _message(Real(), math.inf)[1] == "f: x must be a finite number, got inf"


def test_says_replaces_the_derived_words_in_every_message():
    rule = Int(min=1, says="a positive int")
    assert _message(rule, 0)[1] == "f: x must be a positive int, got 0"
    assert _message(rule, "1")[1] == "f: x must be a positive int, got '1' (str)"
    rule = Real(min=0, says="a finite number >= 0")
    assert _message(rule, math.nan)[1] == "f: x must be a finite number >= 0, got nan"
    assert _message(rule, -1)[1] == "f: x must be a finite number >= 0, got -1"


def test_real_takes_one_bound_per_side():
    with pytest.raises(TypeError, match="not both"):
        Real(min=0, gt=0)
