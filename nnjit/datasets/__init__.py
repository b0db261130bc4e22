"""Small built-in datasets, shipped inside the package (nothing is ever downloaded).

* ``"iris"`` -- :func:`load_iris`: X (150, 4), 3 classes (Fisher 1936, via scikit-learn).
* ``"digits"`` -- :func:`load_digits`: X (1797, 64), 10 classes (UCI optdigits, test part).
* ``"olivetti_faces"`` -- :func:`load_olivetti_faces`: X (400, 4096), 40 classes
  (AT&T / ORL faces, 64x64).
* ``"cora"`` -- :func:`load_cora`: a graph, x (2708, 1433), 10556 directed edges, 7 classes
  (Planetoid public split).

Not bundled, read from the user's files: :func:`load_fashion_mnist` (a folder of the standard IDX
files or an ``.npz``; a :class:`TrainTest` with its own train / test split).

Every call reads the archive again and returns **fresh, writeable arrays** that nobody
else holds a reference to, so callers may modify them in place (normalise, shuffle, ...)
without affecting later calls. The archives are read with ``np.load(..., allow_pickle=False)``
through :mod:`importlib.resources`, so they also load from an installed wheel or zip.

Provenance, licences and checksums of the archives are in ``nnjit/datasets/README.md``;
``tools/make_datasets.py`` rebuilds them.

Helpers: :func:`train_test_split` (pure-NumPy, stratified by default) and :func:`standardize`,
from :mod:`nnjit.data.split` and :mod:`nnjit.data.standardize`.

One file per concept: the containers (``tabular_dataset.py``, ``graph_dataset.py``), reading the
packaged archives (``packaged.py``), one loader per data set (``iris.py``, ``digits.py``,
``olivetti_faces.py``, ``cora.py``), a user's graph file (``graph_npz.py``), Fashion-MNIST from
the user's files (``fashion_mnist.py``, ``idx.py``, ``train_test.py``) and loading by name
(``by_name.py``). This module only re-exports them.
"""


from nnjit.data.split import train_test_split
from nnjit.data.standardize import standardize
from nnjit.datasets.by_name import DATASET_NAMES, load
from nnjit.datasets.cora import load_cora
from nnjit.datasets.digits import load_digits
from nnjit.datasets.fashion_mnist import load_fashion_mnist
from nnjit.datasets.graph_dataset import GraphDataset
from nnjit.datasets.graph_npz import load_graph_npz
from nnjit.datasets.iris import load_iris
from nnjit.datasets.olivetti_faces import load_olivetti_faces
from nnjit.datasets.tabular_dataset import Dataset
from nnjit.datasets.train_test import TrainTest

__all__ = [
    "DATASET_NAMES",
    "Dataset",
    "GraphDataset",
    "TrainTest",
    "load",
    "load_cora",
    "load_digits",
    "load_fashion_mnist",
    "load_graph_npz",
    "load_iris",
    "load_olivetti_faces",
    "standardize",
    "train_test_split",
]
