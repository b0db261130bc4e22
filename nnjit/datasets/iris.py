"""Fisher's Iris data (bundled): :func:`load_iris`."""

from __future__ import annotations

from nnjit.datasets.packaged import tabular_archive
from nnjit.datasets.tabular_dataset import Dataset


_IRIS_DESCRIPTION = """\
Iris plants (R. A. Fisher, 1936): 150 flowers, 50 of each of 3 species
(setosa, versicolor, virginica); 4 features in cm: sepal length, sepal width,
petal length, petal width.
X float32 (150, 4), y int64 (150,) in 0..2, rows ordered by class.
Source: the copy bundled with scikit-learn (sklearn/datasets/data/iris.csv, BSD-3-Clause),
which follows Fisher's paper (the UCI copy has two wrong data points).
Licence: UCI Machine Learning Repository, CC BY 4.0 (doi:10.24432/C56C76).
Cite: R. A. Fisher, "The use of multiple measurements in taxonomic problems",
Annals of Eugenics 7(2):179-188, 1936."""


def load_iris() -> Dataset:
    """Fisher's Iris data: 150 samples, 4 features, 3 classes of 50.

    Returns a :class:`Dataset` with ``X`` float32 ``(150, 4)`` (sepal length, sepal width,
    petal length, petal width, in cm, values exactly as stored: one decimal), ``y`` int64
    ``(150,)`` in ``0..2`` (setosa, versicolor, virginica; rows ordered by class).

    Source: the copy bundled with scikit-learn (identical values to
    ``sklearn.datasets.load_iris()``, which follows Fisher's paper).
    Licence: CC BY 4.0 (UCI Machine Learning Repository).
    Cite: R. A. Fisher, "The use of multiple measurements in taxonomic problems",
    Annals of Eugenics 7, 1936.

    Fresh writeable arrays on every call. ``X, y = load_iris()`` also works.
    """
    return tabular_archive("iris.npz", "iris", _IRIS_DESCRIPTION)
