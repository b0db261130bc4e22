"""Borrowed arena views: same data as slices, no reference counting, no allocation."""

from __future__ import annotations

import numpy as np

from nnjit.kernels._jit import jit
from nnjit.kernels.views import borrow, view1d, view2d
from tests.helpers import count_allocations


@jit(cache=False)
def _views(buf, off, rows, cols):
    a = view2d(buf, off, rows, cols)
    b = view1d(buf, off, rows * cols)
    c = borrow(buf)
    a[rows - 1, cols - 1] += 1.0  # writes through
    return a.copy(), b.copy(), c.size


def test_views_match_slices_and_write_through():
    buf = np.arange(40, dtype=np.float32)
    a, b, size = _views(buf, 5, 3, 4)
    np.testing.assert_array_equal(a, np.arange(5, 17, dtype=np.float32).reshape(3, 4) +
                                  np.eye(1, 12, 11, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(b, a.ravel())
    assert size == 40
    assert buf[16] == 17.0


@jit(cache=False)
def _many_views(buf, n):
    total = 0.0
    for i in range(n):
        v = view2d(borrow(buf), i % 8, 2, 3)
        total += v[1, 2] + view1d(buf, i % 8, 6)[5]
    return total


def test_views_do_not_allocate():
    buf = np.arange(64, dtype=np.float64)
    _many_views(buf, 1)
    one, many = count_allocations(lambda k: _many_views(buf, k), repeats=(1, 1000))
    assert one == many
