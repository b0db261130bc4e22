"""Tests for the built-in datasets (nnjit.datasets) and the split/standardise helpers."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnjit.datasets as ds
from nnjit.datasets import (
    DATASET_NAMES,
    Dataset,
    GraphDataset,
    load,
    load_cora,
    load_digits,
    load_iris,
    load_olivetti_faces,
    standardize,
    train_test_split,
)

DATA_FILES = ("iris.npz", "digits.npz", "olivetti_faces.npz", "cora.npz")

#: sha256 of the packaged archives (nnjit/datasets/README.md). Olivetti and Cora are the
#: byte-for-byte copies of the shared archives, so theirs equal the shared README's.
FILE_SHA256 = {
    "olivetti_faces.npz": "0831bb0a17aa733d2217e7fabb34d06bae5da03a37a04d973eaea0ae9481f7d7",
    "cora.npz": "1d3dcd8ba2b53fc923c20822bbebbe47f0c73cddd00b0f0e6f0aca5dc02a717e",
}
#: sha256 of the C-order bytes of the main arrays: independent of numpy/zlib zip details.
ARRAY_SHA256 = {
    ("iris.npz", "X"): "2374923a3acd29a63001946c3c216e2a5581864f01041c86c4b5211ec93885c2",
    ("iris.npz", "y"): "734737f11162991213afc3a96aa5e8823b2d9cdcfb8992df1e85a0bae44b2395",
    ("digits.npz", "X"): "a627aed550b0b29bf76a981bc1ecbab5ef775aac454c94154f20ec9f61a04c83",
    ("digits.npz", "y"): "a3c91c262eddcf7ba8f0e37507c30284493c9b20412ffe4af30d536401f7ba21",
}


def _data_path(name: str) -> Path:
    return Path(str(resources.files("nnjit.datasets").joinpath("data", name)))


@pytest.fixture(scope="module")
def iris():
    return load_iris()


@pytest.fixture(scope="module")
def digits():
    return load_digits()


@pytest.fixture(scope="module")
def faces():
    return load_olivetti_faces()


@pytest.fixture(scope="module")
def cora():
    return load_cora()


# ------------------------------------------------------------------------------------------
# packaged files


@pytest.mark.parametrize("name", DATA_FILES)
def test_file_packaged_and_loads_without_pickle(name):
    path = _data_path(name)
    assert path.is_file()
    with np.load(path, allow_pickle=False) as z:
        assert z.files
        for key in z.files:
            a = z[key]  # would raise ValueError if an object array needed pickle
            assert not a.dtype.hasobject, (name, key)


@pytest.mark.parametrize("name", sorted(FILE_SHA256))
def test_copied_files_match_shared_checksums(name):
    digest = hashlib.sha256(_data_path(name).read_bytes()).hexdigest()
    assert digest == FILE_SHA256[name]


@pytest.mark.parametrize(("name", "key"), sorted(ARRAY_SHA256))
def test_built_array_checksums(name, key):
    with np.load(_data_path(name), allow_pickle=False) as z:
        digest = hashlib.sha256(np.ascontiguousarray(z[key]).tobytes()).hexdigest()
    assert digest == ARRAY_SHA256[(name, key)]


def test_loaders_use_allow_pickle_false(monkeypatch):
    calls = []
    real_load = np.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("allow_pickle"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    for name in DATASET_NAMES:
        load(name)
    assert calls == [False] * len(DATASET_NAMES)


def test_loads_from_a_zipped_package(tmp_path):
    """importlib.resources path: the loaders also work when the package is inside a zip."""
    src = Path(ds.__file__).parent
    zpath = tmp_path / "nnjit_zipped.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("nnjit/__init__.py", "")
        for package in (src, src.parent / "data"):  # nnjit.datasets and the data helpers it uses
            for module in package.glob("*.py"):
                zf.write(module, f"nnjit/{package.name}/{module.name}")
        for name in DATA_FILES:
            zf.write(src / "data" / name, f"nnjit/datasets/data/{name}")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import nnjit.datasets as d;"
        "assert d.__file__.startswith(sys.argv[1]), d.__file__;"
        "X, y = d.load_iris(); g = d.load('cora');"
        "print(X.shape, int(y.sum()), g.num_edges)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(zpath)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["(150,", "4)", "150", "10556"]


# ------------------------------------------------------------------------------------------
# tabular datasets


def test_iris(iris):
    assert isinstance(iris, Dataset)
    assert iris.name == "iris"
    assert iris.X.shape == (150, 4) and iris.X.dtype == np.float32
    assert iris.y.shape == (150,) and iris.y.dtype == np.int64
    assert np.bincount(iris.y).tolist() == [50, 50, 50]
    assert iris.target_names == ("setosa", "versicolor", "virginica")
    assert iris.feature_names == (
        "sepal length (cm)",
        "sepal width (cm)",
        "petal length (cm)",
        "petal width (cm)",
    )
    np.testing.assert_array_equal(iris.X[0], np.float32([5.1, 3.5, 1.4, 0.2]))
    assert (iris.n_samples, iris.n_features, iris.n_classes) == (150, 4, 3)


def test_digits(digits):
    assert digits.name == "digits"
    assert digits.X.shape == (1797, 64) and digits.X.dtype == np.float32
    assert digits.y.shape == (1797,) and digits.y.dtype == np.int64
    assert digits.X.min() == 0 and digits.X.max() == 16
    np.testing.assert_array_equal(digits.X, np.round(digits.X))  # integer counts, not rescaled
    counts = np.bincount(digits.y)
    assert len(counts) == 10 and counts.sum() == 1797 and counts.min() >= 170
    assert digits.target_names == tuple(str(i) for i in range(10))
    assert len(digits.feature_names) == 64
    assert digits.feature_names[:2] == ("pixel_0_0", "pixel_0_1")


def test_olivetti(faces):
    assert faces.name == "olivetti_faces"
    assert faces.X.shape == (400, 4096) and faces.X.dtype == np.float32
    assert faces.y.shape == (400,) and faces.y.dtype == np.int64
    np.testing.assert_array_equal(faces.y, np.arange(400) // 10)
    assert np.bincount(faces.y).tolist() == [10] * 40
    assert faces.X.min() == 0.0 and faces.X.max() == 1.0
    # first values as listed in the shared data README (sklearn's own output)
    np.testing.assert_allclose(
        faces.X[0, :4], [0.30991736, 0.3677686, 0.41735536, 0.44214877], rtol=0, atol=1e-7
    )
    np.testing.assert_allclose(faces.X[0, -3:], [0.15289256, 0.16115703, 0.1570248], atol=1e-7)
    np.testing.assert_allclose(faces.X[1, :3], [0.45454547, 0.47107437, 0.5123967], atol=1e-7)
    np.testing.assert_allclose(faces.X[2, :3], [0.3181818, 0.40082645, 0.49173555], atol=1e-7)
    assert abs(float(faces.X.astype(np.float64).mean()) - 0.54704247) < 1e-7
    assert len(faces.feature_names) == 4096 and faces.feature_names[-1] == "pixel_4095"
    assert faces.target_names == tuple(f"person_{k}" for k in range(40))
    # values are k/242 (sklearn's min-max scaling of 0..242)
    np.testing.assert_allclose(faces.X * 242, np.round(faces.X * 242), atol=2e-4)


def test_sklearn_parity_iris_digits():
    skd = pytest.importorskip("sklearn.datasets")
    for ours, theirs in ((load_iris(), skd.load_iris()), (load_digits(), skd.load_digits())):
        np.testing.assert_array_equal(ours.X, np.asarray(theirs.data, dtype=np.float32))
        np.testing.assert_array_equal(ours.y, theirs.target)
        assert ours.feature_names == tuple(theirs.feature_names)
        assert ours.target_names == tuple(str(t) for t in theirs.target_names)


def test_unpacking_and_frozen(iris):
    X, y = iris
    assert X is iris.X and y is iris.y
    X2, y2 = load_digits()
    assert X2.shape == (1797, 64) and y2.shape == (1797,)
    # it reads as the pair (X, y), as scikit-learn's return_X_y tuples do (issue 25, item 8)
    digits = load_digits()
    assert len(digits) == 2 and digits[0] is digits.X and digits[1] is digits.y
    assert digits[-1] is digits.y
    with pytest.raises(IndexError):
        digits[2]
    with pytest.raises(dataclasses.FrozenInstanceError):
        iris.X = None  # type: ignore[misc]
    assert "iris" in repr(iris) and "(150, 4)" in repr(iris)
    assert "Fisher" in iris.description and "CC BY 4.0" in iris.description


@pytest.mark.parametrize("loader", [load_iris, load_digits, load_olivetti_faces])
def test_fresh_writeable_arrays(loader):
    a = loader()
    assert a.X.flags.writeable and a.y.flags.writeable
    a.X[...] = -1.0
    a.y[...] = -1
    b = loader()
    assert b.X.min() >= 0 and b.y.min() == 0
    assert not np.shares_memory(a.X, b.X)


# ------------------------------------------------------------------------------------------
# Cora


def test_cora_shapes_and_dtypes(cora):
    assert isinstance(cora, GraphDataset)
    assert cora.name == "cora"
    assert cora.x.shape == (2708, 1433) and cora.x.dtype == np.float32
    assert cora.y.shape == (2708,) and cora.y.dtype == np.int64
    assert cora.edge_index.shape == (2, 10556) and cora.edge_index.dtype == np.int64
    for m in (cora.train_mask, cora.val_mask, cora.test_mask):
        assert m.shape == (2708,) and m.dtype == np.bool_
    assert (cora.num_nodes, cora.num_edges, cora.num_features, cora.num_classes) == (
        2708,
        10556,
        1433,
        7,
    )


def test_cora_split_and_labels(cora):
    tr, va, te = cora.train_mask, cora.val_mask, cora.test_mask
    assert (tr.sum(), va.sum(), te.sum()) == (140, 500, 1000)
    assert not (tr & va).any() and not (tr & te).any() and not (va & te).any()
    np.testing.assert_array_equal(np.flatnonzero(tr), np.arange(140))
    np.testing.assert_array_equal(np.flatnonzero(va), np.arange(140, 640))
    assert np.flatnonzero(te).min() >= 1708
    assert np.bincount(cora.y[tr], minlength=7).tolist() == [20] * 7
    assert np.bincount(cora.y).tolist() == [351, 217, 418, 818, 426, 298, 180]
    assert np.bincount(cora.y[te], minlength=7).tolist() == [130, 91, 144, 319, 149, 103, 64]
    assert cora.target_names[3] == "Neural_Networks" and len(cora.target_names) == 7


def test_cora_graph_structure(cora):
    src, dst = cora.edge_index
    n = cora.num_nodes
    assert src.min() >= 0 and max(src.max(), dst.max()) < n
    assert not (src == dst).any()
    keys = src * n + dst
    assert len(np.unique(keys)) == keys.size
    assert np.all(np.diff(keys) > 0)  # sorted by (row, col)
    np.testing.assert_array_equal(np.sort(dst * n + src), keys)  # symmetric
    assert np.bincount(src, minlength=n).min() >= 1
    assert set(np.unique(cora.x).tolist()) == {0.0, 1.0}
    assert int(cora.x.sum()) == 49216


def test_cora_fresh_arrays():
    a = load_cora()
    a.x[:] = 5
    a.train_mask[:] = True
    b = load_cora()
    assert b.x.max() == 1 and b.train_mask.sum() == 140
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.x = None  # type: ignore[misc]


# ------------------------------------------------------------------------------------------
# load(name)


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_load_by_name(name):
    d = load(name)
    assert d.name == name
    assert isinstance(d, GraphDataset if name == "cora" else Dataset)


def test_load_name_normalisation():
    assert load("IRIS").name == "iris"
    assert load("Olivetti-Faces").name == "olivetti_faces"


def test_load_unknown_name_lists_valid_names():
    assert set(DATASET_NAMES) == {"iris", "digits", "olivetti_faces", "cora"}
    with pytest.raises(ValueError) as exc:
        load("mnist")
    msg = str(exc.value)
    assert "mnist" in msg
    for name in DATASET_NAMES:
        assert repr(name) in msg
    with pytest.raises(TypeError):
        load(3)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# train_test_split


def _check_partition(n, y, y_tr, y_te, X_tr, X_te):
    idx = np.concatenate([X_tr[:, 0], X_te[:, 0]]).astype(np.int64)
    assert np.array_equal(np.sort(idx), np.arange(n))  # disjoint and complete
    np.testing.assert_array_equal(y_tr, y[X_tr[:, 0].astype(np.int64)])  # rows stay paired
    np.testing.assert_array_equal(y_te, y[X_te[:, 0].astype(np.int64)])


def test_split_iris_stratified(iris):
    X_tr, X_te, y_tr, y_te = train_test_split(iris.X, iris.y, test_size=0.2, seed=0)
    assert X_tr.shape == (120, 4) and X_te.shape == (30, 4)
    assert X_tr.dtype == np.float32 and y_tr.dtype == np.int64
    assert np.bincount(y_te).tolist() == [10, 10, 10]
    assert np.bincount(y_tr).tolist() == [40, 40, 40]


def test_split_disjoint_complete_and_paired(digits):
    n = digits.n_samples
    X = np.column_stack([np.arange(n), digits.X]).astype(np.float64)
    for stratify in (True, False):
        X_tr, X_te, y_tr, y_te = train_test_split(X, digits.y, 0.25, seed=3, stratify=stratify)
        assert len(X_te) == int(np.ceil(0.25 * n)) and len(X_tr) + len(X_te) == n
        _check_partition(n, digits.y, y_tr, y_te, X_tr, X_te)


def test_split_stratified_proportions(digits):
    n_test = 360
    _, _, _, y_te = train_test_split(digits.X, digits.y, test_size=n_test, seed=1)
    counts = np.bincount(digits.y)
    expected = counts * n_test / counts.sum()
    got = np.bincount(y_te, minlength=10)
    assert got.sum() == n_test
    assert np.all(got >= np.floor(expected)) and np.all(got <= np.ceil(expected))


def test_split_deterministic_for_seed(iris):
    a = train_test_split(iris.X, iris.y, seed=42)
    b = train_test_split(iris.X, iris.y, seed=42)
    c = train_test_split(iris.X, iris.y, seed=43)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])


def test_split_returns_copies_and_multidim_X(faces):
    images = faces.X.reshape(-1, 64, 64)
    X_tr, X_te, _, y_te = train_test_split(images, faces.y, test_size=0.3, seed=0)
    assert X_tr.shape == (280, 64, 64) and X_te.shape == (120, 64, 64)
    assert np.bincount(y_te).tolist() == [3] * 40
    assert not np.shares_memory(X_tr, images)
    X_tr[...] = 0
    assert faces.X.max() == 1.0


def test_split_string_labels():
    y = np.array(["a", "b"] * 10)
    X = np.arange(20)[:, None]
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.5, seed=0)
    assert sorted(y_te.tolist()) == ["a"] * 5 + ["b"] * 5
    _check_partition(20, y, y_tr, y_te, X_tr, X_te)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"test_size": 0.0}, ValueError, "between 0 and 1"),
        ({"test_size": 1.0}, ValueError, "between 0 and 1"),
        ({"test_size": -0.5}, ValueError, "between 0 and 1"),
        ({"test_size": float("nan")}, ValueError, "between 0 and 1"),
        ({"test_size": 0}, ValueError, "between 1 and"),
        ({"test_size": 10}, ValueError, "between 1 and"),
        ({"test_size": True}, TypeError, "test_size"),
        ({"test_size": "0.2"}, TypeError, "test_size"),
        ({"seed": 1.5}, TypeError, "seed"),
        ({"seed": -1}, ValueError, "seed"),
        ({"stratify": "yes"}, TypeError, "stratify"),
    ],
)
def test_split_argument_errors(kwargs, exc, match):
    X = np.zeros((10, 2))
    y = np.array([0, 1] * 5)
    with pytest.raises(exc, match=match):
        train_test_split(X, y, **kwargs)


def test_split_accepts_scikit_learns_random_state():
    X, y = np.arange(40.0)[:, None], np.array([0, 1] * 20)
    for seed in (0, 7, np.random.default_rng(3)):
        expected = train_test_split(X, y, 0.25, seed=seed if not hasattr(seed, "random")
                                    else np.random.default_rng(3))
        got = train_test_split(X, y, 0.25, random_state=seed)
        for a, b in zip(expected, got):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(train_test_split(X, y, random_state=1)[1],
                              train_test_split(X, y, random_state=2)[1])
    with pytest.raises(TypeError, match="give seed or random_state"):
        train_test_split(X, y, seed=1, random_state=1)
    with pytest.raises(ValueError, match="seed"):
        train_test_split(X, y, random_state=-1)
    with pytest.raises(TypeError, match="scikit-learn's stratify=y"):
        train_test_split(X, y, stratify=y)


def test_split_shape_errors():
    with pytest.raises(ValueError, match="different lengths"):
        train_test_split(np.zeros((10, 2)), np.zeros(9))
    with pytest.raises(ValueError, match="1-D"):
        train_test_split(np.zeros((10, 2)), np.zeros((10, 1)))
    with pytest.raises(ValueError, match="at least 2 samples"):
        train_test_split(np.zeros((1, 2)), np.zeros(1))
    with pytest.raises(ValueError, match="leaves"):
        train_test_split(np.zeros((2, 1)), np.array([0, 1]), test_size=0.9, stratify=False)
    y = np.array([0, 0, 0, 1])
    with pytest.raises(ValueError, match="at least 2 samples per class"):
        train_test_split(np.zeros((4, 1)), y)
    X_tr, X_te, _, _ = train_test_split(np.zeros((4, 1)), y, test_size=1, stratify=False)
    assert (len(X_tr), len(X_te)) == (3, 1)


@given(
    labels=st.lists(st.integers(0, 4), min_size=2, max_size=60),
    frac=st.floats(0.05, 0.95),
    seed=st.integers(0, 2**32 - 1),
)
def test_split_properties(labels, frac, seed):
    y = np.array(labels, dtype=np.int64)
    n = len(y)
    X = np.arange(n, dtype=np.float64)[:, None]
    n_test = int(np.ceil(frac * n))
    counts = np.bincount(y)
    stratify = bool(counts[counts > 0].min() >= 2)
    if not 1 <= n_test <= n - 1:
        with pytest.raises(ValueError):
            train_test_split(X, y, test_size=frac, seed=seed, stratify=stratify)
        return
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=frac, seed=seed, stratify=stratify)
    assert len(X_te) == n_test
    _check_partition(n, y, y_tr, y_te, X_tr, X_te)
    if stratify:
        expected = counts * n_test / n
        got = np.bincount(y_te, minlength=len(counts))
        assert np.all(got >= np.floor(expected)) and np.all(got <= np.ceil(expected))
    again = train_test_split(X, y, test_size=frac, seed=seed, stratify=stratify)
    np.testing.assert_array_equal(again[1], X_te)


# ------------------------------------------------------------------------------------------
# standardize


def test_standardize_uses_train_statistics():
    rng = np.random.default_rng(0)
    X_tr = rng.normal(3.0, 2.0, size=(200, 5)).astype(np.float32)
    X_tr[:, 2] = 7.0  # constant column
    X_te = rng.normal(3.0, 2.0, size=(50, 5)).astype(np.float32)
    tr_copy, te_copy = X_tr.copy(), X_te.copy()
    A, B = standardize(X_tr, X_te)
    assert A.dtype == np.float32 and B.dtype == np.float32
    np.testing.assert_allclose(A.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(A.std(0)[[0, 1, 3, 4]], 1.0, atol=1e-5)
    assert np.all(A[:, 2] == 0) and np.all(np.isfinite(B))
    mean = X_tr.astype(np.float64).mean(0)
    std = X_tr.astype(np.float64).std(0)
    std[2] = 1.0
    np.testing.assert_allclose(B, (X_te - mean) / std, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(B[:, 2], X_te[:, 2] - 7.0, rtol=1e-5)
    np.testing.assert_array_equal(X_tr, tr_copy)  # inputs untouched
    np.testing.assert_array_equal(X_te, te_copy)


def test_standardize_return_forms_and_dtypes():
    X = np.arange(12).reshape(6, 2)
    single = standardize(X)
    assert isinstance(single, np.ndarray) and single.dtype == np.float64
    three = standardize(X, X[:2], X[2:])
    assert isinstance(three, tuple) and len(three) == 3
    np.testing.assert_allclose(three[1], single[:2])
    v = standardize(np.array([1.0, 2.0, 3.0]), np.array([2.0]))  # 1-D: a single feature
    np.testing.assert_allclose(v[1], [0.0])
    np.testing.assert_allclose(standardize(np.full(3, 5.0)), 0.0)
    images = np.random.default_rng(1).random((10, 4, 4))
    out = standardize(images)
    assert out.shape == (10, 4, 4)
    np.testing.assert_allclose(out.mean(0), 0.0, atol=1e-12)


def test_standardize_errors():
    X = np.ones((4, 3))
    with pytest.raises(ValueError, match=r"expected \(n, 3\)"):
        standardize(X, np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"expected \(n,\)"):
        standardize(np.ones(4), np.ones((4, 1)))
    with pytest.raises(ValueError, match="at least one row"):
        standardize(np.ones((0, 3)))
    with pytest.raises(ValueError, match="NaN"):
        standardize(np.array([[1.0, np.nan]]))
    with pytest.raises(TypeError, match="numeric"):
        standardize(np.array([["a"]]))
    with pytest.raises(TypeError, match="numeric"):
        standardize(X, np.array([["a", "b", "c"]]))


def test_end_to_end_iris_workflow():
    X, y = load("iris")
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, seed=0)
    X_tr, X_te = standardize(X_tr, X_te)
    # nearest class mean on standardised features separates iris well
    means = np.stack([X_tr[y_tr == c].mean(0) for c in range(3)])
    pred = np.argmin(((X_te[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (pred == y_te).mean() >= 0.8
