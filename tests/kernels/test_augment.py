"""Training-batch augmentation kernels: random crop with zero padding and horizontal flip.

Checked against a NumPy reference (zero-pad, crop, mirror: torchvision's RandomCrop and
RandomHorizontalFlip for given draws), for every shift of small images, in place on a batch with
the draws replayed from a copy of the generator state; their statistics; no allocation.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from nnjit.kernels import augment as ka
from nnjit.kernels import rng
from nnjit.kernels._jit import jit
from tests.helpers import count_allocations

needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="inspects compiled code")


def _replayed_draws(state, n, pad, flip):
    """The (dy, dx, flipped) that ``augment_rows`` draws for n rows from ``state`` (a copy)."""
    state = state.copy()
    return [ka.draw_augmentation(state, pad, flip) for _ in range(n)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 4, 5), (3, 5, 4), (2, 1, 1), (2, 3, 3)])
def test_augment_image_matches_the_padded_crop_and_mirror(dtype, shape):
    """Every shift in [-6, 6]^2 (beyond the image too) with and without the flip."""
    C, H, W = shape
    image = np.random.default_rng(0).standard_normal(shape).astype(dtype) + 2.0  # (no zeros)
    for dy in range(-6, 7):
        for dx in range(-6, 7):
            for flipped in (False, True):
                row = image.reshape(-1).copy()
                ka.augment_image(row, C, H, W, dy, dx, flipped)
                expected = ka.augment_reference(image, dy, dx, flipped)
                np.testing.assert_array_equal(row.reshape(shape), expected,
                                              err_msg=f"dy={dy} dx={dx} flipped={flipped}")


def test_reference_is_torchvision_crop_of_the_zero_padded_image():
    """The reference itself, on a hand-checked case: shift down-right by one, zero fill."""
    image = np.arange(1.0, 10.0).reshape(1, 3, 3)
    np.testing.assert_array_equal(ka.augment_reference(image, 1, 1, False)[0],
                                  [[5, 6, 0], [8, 9, 0], [0, 0, 0]])
    np.testing.assert_array_equal(ka.augment_reference(image, -1, 0, True)[0],
                                  [[0, 0, 0], [3, 2, 1], [6, 5, 4]])


@pytest.mark.parametrize("pad, flip", [(2, True), (3, False), (0, True)])
def test_augment_rows_gives_each_row_its_own_draws(pad, flip):
    C, H, W, n = 2, 5, 6, 40
    images = np.random.default_rng(1).random((n, C, H, W)) + 1.0
    state = rng.seed_state(7)
    draws = _replayed_draws(state, n, pad, flip)
    batch = images.reshape(n, -1).copy()
    ka.augment_rows(batch, n, C, H, W, pad, flip, state)
    for r, (dy, dx, flipped) in enumerate(draws):
        assert abs(dy) <= pad and abs(dx) <= pad and (flip or not flipped)
        np.testing.assert_array_equal(batch[r].reshape(C, H, W),
                                      ka.augment_reference(images[r], dy, dx, flipped))
    # the state advanced by exactly the replayed draws
    replayed = rng.seed_state(7)
    for _ in range(n):
        ka.draw_augmentation(replayed, pad, flip)
    np.testing.assert_array_equal(state, replayed)


def test_augment_rows_only_touches_the_batch_rows():
    """A batch shorter than the slot leaves the rows after it alone."""
    batch = np.ones((6, 1 * 3 * 3), dtype=np.float32)
    ka.augment_rows(batch, 4, 1, 3, 3, 3, True, rng.seed_state(0))
    np.testing.assert_array_equal(batch[4:], 1.0)
    assert (batch[:4] == 0.0).any()  # (a shift by up to 3 on a 3x3 image zeroes something)


def test_same_seed_same_augmentation():
    images = np.random.default_rng(2).random((16, 3 * 4 * 4)).astype(np.float32)
    a, b = images.copy(), images.copy()
    ka.augment_rows(a, 16, 3, 4, 4, 2, True, rng.seed_state(3))
    ka.augment_rows(b, 16, 3, 4, 4, 2, True, rng.seed_state(3))
    np.testing.assert_array_equal(a, b)
    c = images.copy()
    ka.augment_rows(c, 16, 3, 4, 4, 2, True, rng.seed_state(4))
    assert not np.array_equal(a, c)


def test_draw_statistics():
    """About half the images flipped; every shift in [-pad, pad] about equally often."""
    state, n, pad = rng.seed_state(11), 6000, 2
    draws = np.array(_replayed_draws(state, n, pad, True), dtype=np.int64)
    flipped = draws[:, 2].mean()
    assert abs(flipped - 0.5) < 0.03  # (6 standard deviations: 0.0065 each)
    for column in (0, 1):
        counts = np.bincount(draws[:, column] + pad, minlength=2 * pad + 1)
        assert counts.size == 2 * pad + 1
        assert np.all(np.abs(counts / n - 1 / (2 * pad + 1)) < 0.03), counts
    # flip only: no shift drawn, the state moves by one draw per image
    only_flip = np.array(_replayed_draws(state, 1000, 0, True))
    assert not only_flip[:, :2].any() and 0.4 < only_flip[:, 2].mean() < 0.6


@jit(cache=False)
def _augment_steps(batch, state, k):
    for _ in range(k):
        ka.augment_rows(batch, batch.shape[0], 2, 4, 4, 1, True, state)
    return batch[0, 0]


@needs_jit
def test_no_nrt_allocations():
    batch = np.random.default_rng(0).random((8, 2 * 4 * 4))
    state = rng.seed_state(0)
    _augment_steps(batch, state, 1)  # compile outside the measured region
    counts = count_allocations(lambda k: _augment_steps(batch, state, k), repeats=(1, 200))
    assert counts[0] == counts[1], f"{counts[1] - counts[0]} NRT allocations over 199 calls"
