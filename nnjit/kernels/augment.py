"""Training-batch image augmentation, in place on the loaded rows of an input slot.

Each row holds one image of ``C*H*W`` values (NCHW, row-major). :func:`augment_rows` gives every
image of the batch its own random crop with zero padding and random horizontal flip, as
torchvision's ``RandomCrop(size=(H, W), padding=pad)`` (zero fill) followed by
``RandomHorizontalFlip(p=0.5)``:

- the crop of the zero-padded image at offset ``(pad + dy, pad + dx)`` is the image shifted by
  ``(dy, dx)``: ``out[c, y, x] = img[c, y + dy, x + dx]``, zero where that falls outside, with
  ``dy`` and ``dx`` uniform on ``[-pad, pad]``;
- then, with probability 1/2, ``out[c, y, x] = out[c, y, W - 1 - x]``.

Draws come from the model's RNG (:mod:`nnjit.kernels.rng`), row by row, in the order ``dy, dx``
(when ``pad > 0``) then the flip (when enabled), so a seed fixes every image's augmentation
whatever thread runs the fit. Nothing is allocated: the shift works in place, visiting rows and
columns in the order that reads every source value before it is overwritten.
"""

import numpy as np

from nnjit.kernels._jit import jit
from nnjit.kernels.rng import next_below


@jit
def draw_augmentation(state, pad, flip):
    """The next image's ``(dy, dx, flipped)``: shifts uniform on [-pad, pad] (0 without a
    crop), flipped with probability 1/2 when ``flip`` (else False). state: the model's RNG."""
    dy = 0
    dx = 0
    if pad > 0:
        dy = next_below(state, 2 * pad + 1) - pad
        dx = next_below(state, 2 * pad + 1) - pad
    flipped = False
    if flip:
        flipped = next_below(state, 2) == 1
    return dy, dx, flipped


@jit
def shift_image(row, C, H, W, dy, dx):
    """``row[c, y, x] = row[c, y + dy, x + dx]`` in place on one flat (C*H*W,) image, zero where
    the source is outside the image.

    Destination rows are visited in the direction the source lies (ascending for dy > 0, so row
    y + dy is read before it is written); within a row (dy == 0 reads the row itself) columns
    likewise by the sign of dx, and the zero fill comes after the copy. The loops have no
    per-pixel test: each row is one straight copy of columns [x_lo, x_hi) and a fill.
    """
    x_lo = max(0, -dx)  # the columns whose source x + dx is inside the image
    x_hi = min(W, W - dx)
    y_first, y_stop, y_step = (0, H, 1) if dy >= 0 else (H - 1, -1, -1)
    for c in range(C):
        plane = c * H * W
        for y in range(y_first, y_stop, y_step):
            dst = plane + y * W
            sy = y + dy
            if sy < 0 or sy >= H or x_lo >= x_hi:
                for x in range(W):
                    row[dst + x] = 0.0
                continue
            src = plane + sy * W + dx
            if dx >= 0:
                for x in range(x_lo, x_hi):
                    row[dst + x] = row[src + x]
                for x in range(x_hi, W):
                    row[dst + x] = 0.0
            else:
                for x in range(x_hi - 1, x_lo - 1, -1):
                    row[dst + x] = row[src + x]
                for x in range(x_lo):
                    row[dst + x] = 0.0


@jit
def flip_image(row, C, H, W):
    """Mirror one flat (C*H*W,) image left to right in place."""
    for line in range(C * H):
        left = line * W
        right = left + W - 1
        while left < right:
            tmp = row[left]
            row[left] = row[right]
            row[right] = tmp
            left += 1
            right -= 1


@jit
def augment_image(row, C, H, W, dy, dx, flipped):
    """Shift one flat image by ``(dy, dx)`` with zero fill, then mirror it when ``flipped``."""
    if dy != 0 or dx != 0:
        shift_image(row, C, H, W, dy, dx)
    if flipped:
        flip_image(row, C, H, W)


@jit
def augment_rows(x, rows, C, H, W, pad, flip, state):
    """Augment the first ``rows`` rows of ``x`` (rows, C*H*W) in place, each with its own draws
    (:func:`draw_augmentation`) from ``state``. Allocates nothing."""
    for r in range(rows):
        dy, dx, flipped = draw_augmentation(state, pad, flip)
        augment_image(x[r], C, H, W, dy, dx, flipped)


def augment_reference(image: np.ndarray, dy: int, dx: int, flipped: bool) -> np.ndarray:
    """NumPy reference of :func:`augment_image` on one (C, H, W) image: zero-pad by the largest
    shift, crop at ``(pad + dy, pad + dx)``, then mirror (torchvision's RandomCrop and
    RandomHorizontalFlip for given draws). Returns a new array."""
    _, H, W = image.shape
    pad = max(abs(dy), abs(dx))
    padded = np.pad(image, ((0, 0), (pad, pad), (pad, pad)))
    out = padded[:, pad + dy : pad + dy + H, pad + dx : pad + dx + W]
    return np.ascontiguousarray(out[:, :, ::-1] if flipped else out)
