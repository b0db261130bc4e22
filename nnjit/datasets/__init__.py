"""Small built-in datasets, shipped inside the package (nothing is ever downloaded).

* ``"iris"`` -- :func:`load_iris`: X (150, 4), 3 classes (Fisher 1936, via scikit-learn).
* ``"digits"`` -- :func:`load_digits`: X (1797, 64), 10 classes (UCI optdigits, test part).
* ``"olivetti_faces"`` -- :func:`load_olivetti_faces`: X (400, 4096), 40 classes
  (AT&T / ORL faces, 64x64).
* ``"cora"`` -- :func:`load_cora`: a graph, x (2708, 1433), 10556 directed edges, 7 classes
  (Planetoid public split).

Every call reads the archive again and returns **fresh, writeable arrays** that nobody
else holds a reference to, so callers may modify them in place (normalise, shuffle, ...)
without affecting later calls. The archives are read with ``np.load(..., allow_pickle=False)``
through :mod:`importlib.resources`, so they also load from an installed wheel or zip.

Provenance, licences and checksums of the archives are in ``nnjit/datasets/README.md``;
``tools/make_datasets.py`` rebuilds them.

Helpers: :func:`train_test_split` (pure-NumPy, stratified by default) and :func:`standardize`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from nnjit.checks import is_int, is_real

__all__ = [
    "DATASET_NAMES",
    "Dataset",
    "GraphDataset",
    "load",
    "load_cora",
    "load_digits",
    "load_graph_npz",
    "load_iris",
    "load_olivetti_faces",
    "standardize",
    "train_test_split",
]


# ---------------------------------------------------------------------------------------------
# containers


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A tabular classification dataset.

    Attributes
    ----------
    X : np.ndarray
        float32, shape ``(n_samples, n_features)``.
    y : np.ndarray
        int64, shape ``(n_samples,)``, class ids ``0 .. len(target_names) - 1``.
    feature_names : tuple[str, ...]
        One name per column of ``X``.
    target_names : tuple[str, ...]
        ``target_names[k]`` is the name of class ``k``.
    name : str
        The name :func:`load` knows it by.
    description : str
        Shape, source, licence and citation.

    The dataclass is frozen (the attributes cannot be rebound) but the arrays are ordinary
    writeable arrays owned by the caller. ``X, y = dataset`` unpacks the two arrays.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    target_names: tuple[str, ...]
    name: str
    description: str

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.X
        yield self.y

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_classes(self) -> int:
        return len(self.target_names)

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, X={self.X.dtype}{self.X.shape}, "
            f"y={self.y.dtype}{self.y.shape}, n_classes={self.n_classes})"
        )


class GraphSizes:
    """``num_nodes``, ``num_edges`` and ``num_features`` of anything with ``x`` (N, F) and
    ``edge_index`` (2, E); shared by :class:`GraphDataset` and :class:`nnjit.data.graph.Graph`."""

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        """Number of *directed* edges (columns of ``edge_index``)."""
        return int(self.edge_index.shape[1])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])


@dataclass(frozen=True, eq=False, repr=False)
class GraphDataset(GraphSizes):
    """A node-classification graph (one graph, transductive split).

    Attributes
    ----------
    x : np.ndarray
        float32, shape ``(num_nodes, num_features)``, node features.
    y : np.ndarray
        int64, shape ``(num_nodes,)``, node classes.
    edge_index : np.ndarray
        int64, shape ``(2, num_edges)``: edge ``e`` goes from ``edge_index[0, e]`` to
        ``edge_index[1, e]`` (PyG convention; undirected graphs store both directions).
    train_mask, val_mask, test_mask : np.ndarray
        bool, shape ``(num_nodes,)``; pairwise disjoint.
    target_names : tuple[str, ...]
        ``target_names[k]`` is the name of class ``k``.
    name, description : str
        As for :class:`Dataset`.
    """

    x: np.ndarray
    y: np.ndarray
    edge_index: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    target_names: tuple[str, ...]
    name: str
    description: str

    @property
    def num_classes(self) -> int:
        return len(self.target_names)

    def __repr__(self) -> str:
        return (
            f"GraphDataset(name={self.name!r}, num_nodes={self.num_nodes}, "
            f"num_edges={self.num_edges}, num_features={self.num_features}, "
            f"num_classes={self.num_classes}, train/val/test="
            f"{int(self.train_mask.sum())}/{int(self.val_mask.sum())}/{int(self.test_mask.sum())})"
        )


# ---------------------------------------------------------------------------------------------
# reading the packaged archives


def _read_npz(filename: str) -> dict[str, np.ndarray]:
    """All arrays of ``data/<filename>``, fully read (fresh arrays on every call)."""
    ref = resources.files(__name__).joinpath("data", filename)
    if not ref.is_file():
        raise FileNotFoundError(
            f"packaged dataset file {filename!r} is missing from nnjit.datasets/data "
            "(rebuild it with tools/make_datasets.py, or reinstall nnjit)"
        )
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    # np.load decompresses into new arrays; copy only if some NumPy hands back a read-only one
    return {k: (a if a.flags.writeable else a.copy()) for k, a in arrays.items()}


def _names(arr: np.ndarray) -> tuple[str, ...]:
    return tuple(str(s) for s in arr.tolist())


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

_DIGITS_DESCRIPTION = """\
Optical recognition of handwritten digits: 1797 8x8 images of the digits 0..9
(the test part, optdigits.tes, of the UCI dataset; ~180 per class).
X float32 (1797, 64), each value an integer count 0..16 of "on" pixels in a 4x4 block of
the original 32x32 bitmap (not rescaled); X.reshape(-1, 8, 8) gives upright images.
y int64 (1797,) in 0..9.
Source: the copy bundled with scikit-learn (sklearn/datasets/data/digits.csv.gz, BSD-3-Clause).
Licence: UCI Machine Learning Repository, CC BY 4.0 (doi:10.24432/C50P49).
Cite: E. Alpaydin, C. Kaynak, "Cascading classifiers", Kybernetika 34(4):369-374, 1998."""

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

_CORA_DESCRIPTION = """\
Cora citation graph, Planetoid public split (the same data as PyG Planetoid('Cora')):
2708 papers, 5278 undirected citation links stored in both directions (10556 columns of
edge_index, no self-loops, no duplicates, sorted by (row, col)), 1433 binary bag-of-words
features (x float32 in {0, 1}, NOT row-normalised), 7 classes.
train_mask: 140 nodes (0..139, 20 per class); val_mask: 500 nodes (140..639);
test_mask: 1000 nodes (all in 1708..2707).
Source: kimiyoung/planetoid data/ind.cora.* converted with the steps of PyG's
read_planetoid_data.
Licence: Planetoid repository MIT, (c) 2016 Zhilin Yang. Cite: Z. Yang, W. W. Cohen,
R. Salakhutdinov, "Revisiting Semi-Supervised Learning with Graph Embeddings", ICML 2016;
underlying data: A. McCallum et al., Information Retrieval 2000, and P. Sen et al.,
"Collective classification in network data", AI Magazine 2008."""

#: Cora class names in Planetoid's label order. The raw Planetoid files carry no names; this
#: is the mapping commonly used with PyG's Planetoid('Cora'), and it matches the per-class
#: sizes of the LINQS ``cora.content`` (label 0..6 have 351, 217, 418, 818, 426, 298, 180 nodes).
_CORA_CLASSES = (
    "Theory",
    "Reinforcement_Learning",
    "Genetic_Algorithms",
    "Neural_Networks",
    "Probabilistic_Methods",
    "Case_Based",
    "Rule_Learning",
)


def _tabular(filename: str, name: str, description: str) -> Dataset:
    d = _read_npz(filename)
    return Dataset(
        X=d["X"].astype(np.float32, copy=False),
        y=d["y"].astype(np.int64, copy=False),
        feature_names=_names(d["feature_names"]),
        target_names=_names(d["target_names"]),
        name=name,
        description=description,
    )


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
    return _tabular("iris.npz", "iris", _IRIS_DESCRIPTION)


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
    return _tabular("digits.npz", "digits", _DIGITS_DESCRIPTION)


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
    d = _read_npz("olivetti_faces.npz")
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


def load_cora() -> GraphDataset:
    """Cora citation graph with the Planetoid public split (as PyG ``Planetoid('Cora')``).

    Returns a :class:`GraphDataset` with

    * ``x`` float32 ``(2708, 1433)``, binary bag-of-words, **not** row-normalised;
    * ``y`` int64 ``(2708,)`` in ``0..6`` (``target_names``: Theory, Reinforcement_Learning,
      Genetic_Algorithms, Neural_Networks, Probabilistic_Methods, Case_Based, Rule_Learning);
    * ``edge_index`` int64 ``(2, 10556)``: 5278 undirected edges stored in both directions,
      no self-loops, no duplicates, sorted by (row, col);
    * ``train_mask`` / ``val_mask`` / ``test_mask`` bool ``(2708,)`` with 140 / 500 / 1000 nodes.

    Source: ``kimiyoung/planetoid`` ``data/ind.cora.*``, converted like PyG's
    ``read_planetoid_data``. Licence: MIT (Planetoid repository, (c) 2016 Zhilin Yang).
    Cite: Z. Yang, W. W. Cohen, R. Salakhutdinov, "Revisiting Semi-Supervised Learning with
    Graph Embeddings", ICML 2016; P. Sen et al., "Collective classification in network
    data", AI Magazine 2008.

    Fresh writeable arrays on every call.
    """
    d = _read_npz("cora.npz")
    return GraphDataset(
        x=d["x"].astype(np.float32, copy=False),
        y=d["y"].astype(np.int64, copy=False),
        edge_index=d["edge_index"].astype(np.int64, copy=False),
        train_mask=d["train_mask"].astype(bool, copy=False),
        val_mask=d["val_mask"].astype(bool, copy=False),
        test_mask=d["test_mask"].astype(bool, copy=False),
        target_names=_CORA_CLASSES,
        name="cora",
        description=_CORA_DESCRIPTION,
    )


GRAPH_ARRAYS = ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask")


def load_graph_npz(path) -> GraphDataset:
    """A node-classification graph from any ``.npz`` with Cora's layout: arrays ``x`` (N, F),
    ``y`` (N,), ``edge_index`` (2, E), ``train_mask``, ``val_mask``, ``test_mask`` (N,), and
    optionally ``target_names`` (strings). Read without pickle; validate it with
    :meth:`nnjit.data.graph.Graph.from_dataset`.

    Raises:
        FileNotFoundError: no such file. ValueError: not an npz archive, or arrays missing
            (the message names the file and lists them).
    """
    import os

    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except FileNotFoundError:
        raise FileNotFoundError(f"load_graph_npz: no such file: {path}") from None
    except (ValueError, OSError) as e:
        raise ValueError(f"load_graph_npz: {path} is not a readable .npz archive ({e})") from None
    missing = [k for k in GRAPH_ARRAYS if k not in arrays]
    if missing:
        raise ValueError(f"load_graph_npz: {path} lacks {', '.join(missing)} (it has "
                         f"{', '.join(sorted(arrays)) or 'no arrays'}; expected "
                         f"{', '.join(GRAPH_ARRAYS)})")
    y = arrays["y"]
    names = arrays.get("target_names")
    if names is None:
        names = tuple(str(k) for k in range(int(y.max()) + 1 if y.size else 0))
    return GraphDataset(
        x=arrays["x"], y=y, edge_index=arrays["edge_index"], train_mask=arrays["train_mask"],
        val_mask=arrays["val_mask"], test_mask=arrays["test_mask"],
        target_names=tuple(str(n) for n in names),
        name=os.path.splitext(os.path.basename(path))[0], description=f"graph from {path}")


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

    Case and ``-``/``_`` are ignored (``"Olivetti-Faces"`` works). Raises ``TypeError`` for a
    non-string and ``ValueError``, listing the valid names, for an unknown name.
    """
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a str, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    try:
        loader = _LOADERS[key]
    except KeyError:
        valid = ", ".join(repr(n) for n in DATASET_NAMES)
        raise ValueError(f"unknown dataset {name!r}; valid names are: {valid}") from None
    return loader()


# ---------------------------------------------------------------------------------------------
# helpers


def _check_seed(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or is_int(seed):
        if seed is not None and int(seed) < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed}")
        return np.random.default_rng(None if seed is None else int(seed))
    raise TypeError(
        f"seed must be an int, None or a numpy.random.Generator, got {type(seed).__name__}"
    )


def _n_test(test_size: Any, n: int) -> int:
    if not is_real(test_size):
        raise TypeError(
            f"test_size must be a float in (0, 1) or an int count, got {type(test_size).__name__}"
        )
    if is_int(test_size):
        n_test = int(test_size)
        if not 1 <= n_test <= n - 1:
            raise ValueError(
                f"test_size={n_test} as a count must be between 1 and n_samples - 1 = {n - 1}"
            )
        return n_test
    ts = float(test_size)
    if not 0.0 < ts < 1.0:
        raise ValueError(f"test_size={test_size!r} as a fraction must be strictly between 0 and 1")
    n_test = math.ceil(ts * n)
    if not 1 <= n_test <= n - 1:
        raise ValueError(
            f"test_size={test_size!r} with n_samples={n} leaves {n_test} test and "
            f"{n - n_test} train samples; both must be at least 1"
        )
    return n_test


def _stratified_test_counts(
    counts: np.ndarray, n_test: int, rng: np.random.Generator
) -> np.ndarray:
    """Split ``n_test`` over classes proportionally to ``counts`` (largest remainder method,
    ties broken at random), so the totals are exact and each class is within 1 of its share."""
    counts = counts.astype(np.int64)
    n = int(counts.sum())
    take, remainder = np.divmod(counts * n_test, n)  # exact integer share: take + remainder / n
    left = n_test - int(take.sum())  # == remainder.sum() // n < number of classes
    if left:
        order = np.lexsort((rng.random(len(counts)), -remainder))
        take[order[:left]] += 1  # only classes with remainder > 0 get one more
    return take


_NOT_GIVEN = object()  # marks an argument the caller did not pass


def train_test_split(
    X: Any,
    y: Any,
    test_size: float = 0.2,
    seed: int | None | np.random.Generator = 0,
    stratify: bool = True,
    *,
    random_state: Any = _NOT_GIVEN,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle and split ``X`` and ``y`` into train and test parts (pure NumPy).

    Parameters
    ----------
    X : array-like, shape ``(n_samples, ...)``
        Features; any number of trailing dimensions (e.g. images ``(n, 64, 64)``).
    y : array-like, shape ``(n_samples,)``
        Labels (any dtype NumPy can sort).
    test_size : float in ``(0, 1)`` or int
        Fraction of samples for the test part (rounded up, like scikit-learn) or an exact count.
    seed : int, None or numpy.random.Generator
        The same int always gives the same split. ``None`` draws fresh entropy.
    stratify : bool
        If true (default), every class appears in the test part in (as nearly as integers
        allow) the same proportion as in ``y``: class ``c`` with ``n_c`` samples gets
        ``floor`` or ``ceil`` of ``n_c * n_test / n_samples`` test samples, totals exact.
        Needs at least 2 samples per class.
    random_state : int, None or numpy.random.Generator, keyword only
        scikit-learn's name for ``seed``, accepted so that ``random_state=0`` works; give one
        of the two.

    Returns
    -------
    X_train, X_test, y_train, y_test : np.ndarray
        New arrays (copies); rows are in random order. Together the two parts hold every
        sample exactly once.

    Raises
    ------
    ValueError
        Mismatched lengths, ``y`` not 1-D, fewer than 2 samples, a ``test_size`` that leaves
        an empty part, or (stratified) a class with a single sample.
    TypeError
        ``test_size``, ``seed`` or ``stratify`` of the wrong type, or both ``seed`` and
        ``random_state`` given.
    """
    if random_state is not _NOT_GIVEN:
        if not (is_int(seed) and seed == 0):
            raise TypeError("train_test_split: give seed or random_state (its scikit-learn "
                            f"name), not both (seed={seed!r}, random_state={random_state!r})")
        seed = random_state
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim == 0:
        raise ValueError("X must have at least one dimension (n_samples, ...)")
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,), got shape {y.shape}")
    n = X.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"X and y have different lengths: {n} != {y.shape[0]}")
    if n < 2:
        raise ValueError(f"need at least 2 samples to split, got {n}")
    if not isinstance(stratify, (bool, np.bool_)):
        raise TypeError(f"stratify must be True or False, got {type(stratify).__name__} "
                        "(True stratifies by y: scikit-learn's stratify=y)")
    n_test = _n_test(test_size, n)
    rng = _check_seed(seed)

    if not stratify:
        perm = rng.permutation(n)
        test_idx, train_idx = perm[:n_test], perm[n_test:]
    else:
        classes, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        if counts.min() < 2:
            bad = classes[counts < 2].tolist()
            raise ValueError(
                f"stratified split needs at least 2 samples per class; class(es) {bad} have 1 "
                "(pass stratify=False)"
            )
        take = _stratified_test_counts(counts, n_test, rng)
        by_class = np.argsort(inverse, kind="stable")
        starts = np.concatenate(([0], np.cumsum(counts)))
        test_parts, train_parts = [], []
        for c in range(len(classes)):
            members = rng.permutation(by_class[starts[c] : starts[c + 1]])
            test_parts.append(members[: take[c]])
            train_parts.append(members[take[c] :])
        test_idx = rng.permutation(np.concatenate(test_parts))
        train_idx = rng.permutation(np.concatenate(train_parts))

    return X[train_idx], X[test_idx], y[train_idx], y[test_idx]


def standardize(X_train: Any, *X_other: Any) -> np.ndarray | tuple[np.ndarray, ...]:
    """Standardise features with the **training** mean and standard deviation.

    Every input is transformed as ``(X - mean) / std`` with ``mean`` and ``std`` (population,
    ``ddof=0``) computed per feature over axis 0 of ``X_train`` only, so no statistic leaks
    from validation/test data. Features whose training std is 0 get std 1 (they become 0 in
    ``X_train``). Statistics are computed in float64; results are new arrays of
    ``X_train``'s floating dtype (float32 stays float32; integer input gives float64).

    Returns the standardised ``X_train`` alone when no other array is given, else a tuple
    ``(X_train_std, *X_other_std)`` in argument order::

        X_train, X_test = standardize(X_train, X_test)
        X_train, X_val, X_test = standardize(X_train, X_val, X_test)

    Raises ``ValueError`` if ``X_train`` has no rows, contains NaN/inf, or another array's
    trailing shape (``shape[1:]``) differs from ``X_train``'s; ``TypeError`` for
    non-numeric input.
    """
    Xt = np.asarray(X_train)
    if Xt.dtype.kind not in "biuf":
        raise TypeError(f"X_train must be numeric, got dtype {Xt.dtype}")
    if Xt.ndim == 0 or Xt.shape[0] == 0:
        raise ValueError(f"X_train must have at least one row, got shape {Xt.shape}")
    if not np.all(np.isfinite(Xt)):
        raise ValueError("X_train contains NaN or infinite values")
    dtype = Xt.dtype if Xt.dtype.kind == "f" else np.dtype(np.float64)

    x64 = Xt.astype(np.float64)
    mean = x64.mean(axis=0)
    std = x64.std(axis=0)
    std = np.where(std == 0.0, 1.0, std)  # constant features: divide by 1, not 0

    out = [((x64 - mean) / std).astype(dtype)]
    for i, other in enumerate(X_other, start=1):
        Xo = np.asarray(other)
        if Xo.dtype.kind not in "biuf":
            raise TypeError(f"argument {i} must be numeric, got dtype {Xo.dtype}")
        if Xo.ndim != Xt.ndim or Xo.shape[1:] != Xt.shape[1:]:
            want = "(n, " + ", ".join(map(str, Xt.shape[1:])) + ")" if Xt.ndim > 1 else "(n,)"
            raise ValueError(
                f"argument {i} has shape {Xo.shape}; expected {want} like X_train {Xt.shape}"
            )
        out.append(((Xo.astype(np.float64) - mean) / std).astype(dtype))
    return out[0] if not X_other else tuple(out)
