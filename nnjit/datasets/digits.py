"""UCI 8x8 handwritten digits (bundled): :func:`load_digits`."""

from __future__ import annotations

from nnjit.datasets.packaged import tabular_archive
from nnjit.datasets.tabular_dataset import Dataset


_DIGITS_DESCRIPTION = """\
Optical recognition of handwritten digits: 1797 8x8 images of the digits 0..9
(the test part, optdigits.tes, of the UCI dataset; ~180 per class).
X float32 (1797, 64), each value an integer count 0..16 of "on" pixels in a 4x4 block of
the original 32x32 bitmap (not rescaled); X.reshape(-1, 8, 8) gives upright images.
y int64 (1797,) in 0..9.
Source: the copy bundled with scikit-learn (sklearn/datasets/data/digits.csv.gz, BSD-3-Clause).
Licence: UCI Machine Learning Repository, CC BY 4.0 (doi:10.24432/C50P49).
Cite: E. Alpaydin, C. Kaynak, "Cascading classifiers", Kybernetika 34(4):369-374, 1998."""


def load_digits() -> Dataset:
    """8x8 handwritten digits: 1797 samples, 64 features, 10 classes.

    Returns a :class:`Dataset` with ``X`` float32 ``(1797, 64)`` holding the stored integer
    values ``0..16`` (not rescaled; divide by 16 for ``[0, 1]``), ``X.reshape(-1, 8, 8)``
    gives the images; ``y`` int64 ``(1797,)`` in ``0..9``; ``target_names`` are ``"0".."9"``,
    ``feature_names`` ``"pixel_<row>_<col>"``.

    Source: the test part of the UCI "Optical Recognition of Handwritten Digits" data, as
    bundled with scikit-learn (identical values to ``sklearn.datasets.load_digits()``).
    Licence: CC BY 4.0 (UCI Machine Learning Repository).
    Cite: E. Alpaydin, C. Kaynak, "Cascading classifiers", Kybernetika, 1998.

    Fresh writeable arrays on every call. ``X, y = load_digits()`` also works.
    """
    return tabular_archive("digits.npz", "digits", _DIGITS_DESCRIPTION)
