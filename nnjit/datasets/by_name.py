"""Loading a built-in data set by its name: :func:`load` and :data:`DATASET_NAMES`."""

from __future__ import annotations

from nnjit.datasets.cora import load_cora
from nnjit.datasets.digits import load_digits
from nnjit.datasets.graph_dataset import GraphDataset
from nnjit.datasets.iris import load_iris
from nnjit.datasets.olivetti_faces import load_olivetti_faces
from nnjit.datasets.tabular_dataset import Dataset

_LOADERS = {
    "iris": load_iris,
    "digits": load_digits,
    "olivetti_faces": load_olivetti_faces,
    "cora": load_cora,
}

#: The names :func:`load` accepts.
DATASET_NAMES: tuple[str, ...] = tuple(_LOADERS)


def load(name: str) -> Dataset | GraphDataset:
    """Load a built-in dataset by name: one of ``"iris"``, ``"digits"``, ``"olivetti_faces"``
    (each a :class:`Dataset`) or ``"cora"`` (a :class:`GraphDataset`).

    Only the bundled data sets have names; data read from your files has its own loader
    (:func:`~nnjit.datasets.load_fashion_mnist`). Case and ``-``/``_`` are ignored
    (``"Olivetti-Faces"`` works). Raises ``TypeError`` for a non-string and ``ValueError``,
    listing the valid names, for an unknown name.
    """
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a str, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    try:
        loader = _LOADERS[key]
    except KeyError:
        valid = ", ".join(repr(n) for n in DATASET_NAMES)
        hint = (" (Fashion-MNIST is not bundled: load_fashion_mnist(path) reads your copy)"
                if key == "fashion_mnist" else "")
        raise ValueError(f"unknown dataset {name!r}; valid names are: {valid}{hint}") from None
    return loader()
