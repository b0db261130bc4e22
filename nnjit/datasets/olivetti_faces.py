"""Olivetti / AT&T faces (bundled): :func:`load_olivetti_faces`."""

from __future__ import annotations

import numpy as np

from nnjit.datasets.packaged import read_npz
from nnjit.datasets.tabular_dataset import Dataset


_OLIVETTI_DESCRIPTION = """\
Olivetti faces (AT&T Laboratories Cambridge / ORL face database, 1992-1994): 400 grey
64x64 images, 10 of each of 40 people, in sklearn's unshuffled order (y[i] == i // 10).
X float32 (400, 4096) in [0, 1] (exactly sklearn.datasets.fetch_olivetti_faces().data);
X.reshape(-1, 64, 64) gives upright images. y int64 (400,) in 0..39.
Feature names "pixel_<i>" and class names "person_<k>" are synthetic.
Source: Sam Roweis's olivettifaces.mat (the file scikit-learn downloads), converted with
scikit-learn's steps.
Licence: no formal licence; "When using these images, please give credit to AT&T
Laboratories Cambridge." Cite: F. Samaria, A. Harter, "Parameterisation of a stochastic
model for human face identification", IEEE WACV 1994."""


def load_olivetti_faces() -> Dataset:
    """Olivetti / AT&T faces: 400 images of 64x64 pixels, 40 people with 10 images each.

    Returns a :class:`Dataset` with ``X`` float32 ``(400, 4096)`` in ``[0, 1]`` (exactly
    ``sklearn.datasets.fetch_olivetti_faces().data``, unshuffled), ``X.reshape(-1, 64, 64)``
    gives upright images; ``y`` int64 ``(400,)`` with ``y[i] == i // 10``;
    synthetic names ``feature_names = ("pixel_0", ..., "pixel_4095")`` and
    ``target_names = ("person_0", ..., "person_39")``.

    Source: Sam Roweis's 64x64 ``olivettifaces.mat`` (the file scikit-learn downloads),
    converted with scikit-learn's steps; bundled, never downloaded.
    Licence: none given; credit "AT&T Laboratories Cambridge". Cite: F. Samaria, A. Harter,
    "Parameterisation of a stochastic model for human face identification", IEEE WACV 1994.

    Fresh writeable arrays on every call. ``X, y = load_olivetti_faces()`` also works.
    """
    d = read_npz("olivetti_faces.npz")
    X = d["data"].astype(np.float32, copy=False)
    y = d["target"].astype(np.int64, copy=False)
    return Dataset(
        X=X,
        y=y,
        feature_names=tuple(f"pixel_{i}" for i in range(X.shape[1])),
        target_names=tuple(f"person_{k}" for k in range(int(y.max()) + 1)),
        name="olivetti_faces",
        description=_OLIVETTI_DESCRIPTION,
    )
