"""A sparse X (CSR, CSC) is fitted without densifying: the first layer is a SparseLinear reading
each batch row's non-zeros from the program's graph data (nnjit.graph.csr_rows). Its results
equal the dense fit of the same data and scikit-learn's own sparse fit; the compiled loop a dense
fit runs is the one a sparse fit runs (only the sparse family is compiled for it)."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
import scipy.sparse as sp
from sklearn import neural_network as sk

import nnjit as nn
import nnjit.sklearn as nks
from nnjit.engine import fields
from nnjit.engine import interpreter as it
from nnjit.engine.loop_arrays import StepArrays
from nnjit.engine.run_options import RunOptions
from nnjit.engine.status import BadInputError
from nnjit.graph.csr_rows import pack_rows, row_ids
from nnjit.nn.sparse_linear import SparseLinear
from nnjit.ops import sparse as sparse_ops
from nnjit.sklearn.compiled_mlp import CompiledMLP, Structure
from nnjit.sklearn.targets import engine_targets
from nnjit.train.threads import dense_forward_mode

F64 = np.dtype(np.float64)


def _tfidf_like(n=120, f=300, nnz_per_row=6, seed=0):
    """A CSR matrix with a few non-zeros per row, an empty row, a duplicate entry (stored twice:
    a dense copy sums it) and unsorted column indices."""
    rng = np.random.default_rng(seed)
    indptr, indices, data = [0], [], []
    for r in range(n):
        k = 0 if r == 3 else nnz_per_row
        cols = rng.choice(f, k, replace=False)
        if r == 5:
            cols = np.append(cols, cols[0])  # (duplicate)
        indices += cols.tolist()
        data += rng.random(len(cols)).tolist()
        indptr.append(len(indices))
    X = sp.csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=(n, f))
    assert not X.has_canonical_format
    return X


def _quiet(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (ConvergenceWarning)
        return fit()


# -- the op, through the compiled loop ------------------------------------------------------------
def _loss_and_gradient(X, ids, y, coefs, intercepts):
    """Loss and packed gradient of one GRADIENT task (all rows one batch) of a tanh/softmax MLP
    on rows ``ids`` of X (sparse: X's rows by number; dense: X[ids])."""
    units = (X.shape[1], *(c.shape[1] for c in coefs))
    sparse = sp.issparse(X)
    net = CompiledMLP(Structure(units, "tanh", "softmax", F64, len(ids), sparse=sparse))
    if sparse:
        net.use_rows(pack_rows(X))
        X_run = row_ids(0, X.shape[0], F64)[ids]
    else:
        X_run = np.ascontiguousarray(X[ids])
    net.load(coefs, intercepts)
    onehot = np.eye(units[-1])[y[ids]]
    Y = engine_targets(onehot, "softmax", F64)
    state = np.zeros(fields.STATE_WIDTH)
    state[fields.ST_JOB] = -1
    options = RunOptions(task=fields.TASK_GRADIENT, batch=len(ids), eval_batch=len(ids),
                         dense_mode=dense_forward_mode())
    step = StepArrays(np.zeros(0), np.zeros((2, 0)), net.reg_spans, np.zeros(0), np.zeros(0),
                      np.zeros(0))
    net.program.run(options, (X_run, Y, X_run, Y, np.arange(len(ids))), step, state, net.best,
                    np.zeros((1, len(fields.HISTORY_COLUMNS))), np.zeros((0, 1)))
    loss = state[fields.ST_BATCH_LOSS] / state[fields.ST_BATCH_COUNT]
    return loss, net.program.grads[net.packed_order()].copy()


def test_sparse_linear_matches_linear():
    """SPARSE_LINEAR's forward and weight / bias gradients through the interpreter equal a dense
    Linear's on the densified rows (an empty row, a duplicate entry, unsorted indices, rows
    taken out of order and twice)."""
    X = _tfidf_like()
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, X.shape[0])
    coefs = [rng.normal(size=(300, 7)), rng.normal(size=(7, 3))]
    intercepts = [rng.normal(size=7), rng.normal(size=3)]
    ids = np.concatenate([rng.permutation(X.shape[0]), [5, 3, 5]])
    loss, grad = _loss_and_gradient(X, ids, y, coefs, intercepts)
    dense_loss, dense_grad = _loss_and_gradient(X.toarray(), ids, y, coefs, intercepts)
    assert loss == pytest.approx(dense_loss, rel=1e-13)
    np.testing.assert_allclose(grad, dense_grad, rtol=1e-11, atol=1e-14)
    assert np.count_nonzero(grad[:300 * 7]) > 0


def test_sparse_linear_without_sparse_rows_is_refused_naming_the_layer():
    """A SparseLinear traced through a Trainer has no CSR matrix to read (the Trainer's
    DataLoader takes dense arrays): the run stops with a message saying so, never reading out
    of bounds."""
    model = nn.Sequential(SparseLinear(10, 2))
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    with pytest.raises(BadInputError, match="no sparse input"):
        trainer.gradients(np.zeros((4, 1), dtype=np.int64), np.zeros((4, 2)))


def test_sparse_rows_of_another_width_are_refused():
    X = _tfidf_like(n=10, f=30)
    net = CompiledMLP(Structure((31, 4, 2), "relu", "softmax", F64, 10, sparse=True))
    net.use_rows(pack_rows(X))
    state = np.zeros(fields.STATE_WIDTH)
    state[fields.ST_JOB] = -1
    ids = row_ids(0, 10, F64)
    Y = np.zeros((10, 1))
    step = StepArrays(np.zeros(0), np.zeros((2, 0)), net.reg_spans, np.zeros(0), np.zeros(0),
                      np.zeros(0))
    with pytest.raises(BadInputError, match="30 columns, the layer takes 31"):
        net.program.run(RunOptions(task=fields.TASK_GRADIENT, batch=10, eval_batch=10,
                                   dense_mode=dense_forward_mode()),
                        (ids, Y, ids, Y, np.arange(10)), step, state, net.best,
                        np.zeros((1, len(fields.HISTORY_COLUMNS))), np.zeros((0, 1)))


def test_pack_rows_checks_column_indices():
    bad = sp.csr_matrix((np.ones(1), np.array([7]), np.array([0, 1])), shape=(1, 5))
    with pytest.raises(ValueError, match=r"column indices outside \[0, 5\)"):
        pack_rows(bad)


# -- the estimators ----------------------------------------------------------------------------
CASES = {
    "adam": {},
    "sgd_adaptive": {"solver": "sgd", "learning_rate": "adaptive", "momentum": 0.5},
    "early_stopping": {"early_stopping": True, "validation_fraction": 0.2},
    "lbfgs": {"solver": "lbfgs"},
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparse_fit_equals_the_dense_fit(case, dtype):
    X = _tfidf_like()
    y = np.random.default_rng(2).integers(0, 3, X.shape[0])
    kw = dict(hidden_layer_sizes=(9,), max_iter=15, batch_size=32, random_state=0, dtype=dtype,
              **CASES[case])
    ours = _quiet(lambda: nks.MLPClassifier(**kw).fit(X, y))
    dense = _quiet(lambda: nks.MLPClassifier(**kw).fit(X.toarray(), y))
    # Another summation order only: float64 ~1e-16 per step; float32's rounding compounds over
    # the steps (measured: loss curves 1e-8, weights 2e-6 apart).
    rtol, wtol = (1e-12, 1e-12) if dtype == np.float64 else (1e-6, 2e-5)
    assert ours.n_iter_ == dense.n_iter_
    if case != "lbfgs":
        np.testing.assert_allclose(ours.loss_curve_, dense.loss_curve_, rtol=rtol)
    assert ours.loss_ == pytest.approx(dense.loss_, rel=rtol)
    for a, b in zip(ours.coefs_ + ours.intercepts_, dense.coefs_ + dense.intercepts_):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=wtol, atol=wtol)
    np.testing.assert_array_equal(ours.predict(X), dense.predict(X.toarray()))


def test_sparse_regression_csc_and_partial_fit_equal_scikit_learns():
    X = sp.csc_matrix(_tfidf_like(seed=3))
    y = X @ np.random.default_rng(4).normal(size=X.shape[1])
    kw = {"hidden_layer_sizes": (6,), "max_iter": 12, "random_state": 0}
    ours = _quiet(lambda: nks.MLPRegressor(dtype=np.float64, **kw).fit(X, y))
    theirs = _quiet(lambda: sk.MLPRegressor(**kw).fit(X, y))
    np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-12)
    for a, b in zip(ours.coefs_ + ours.intercepts_, theirs.coefs_ + theirs.intercepts_):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
    ours.partial_fit(X, y)
    theirs.partial_fit(X, y)
    np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-12)


def test_sparse_x_is_never_densified(monkeypatch):
    """No dense copy of X is made: the sparse classes' densifying methods are made to fail."""
    X = _tfidf_like()
    y = np.arange(X.shape[0]) % 2

    def refusing(original):
        def method(self, *args, **kwargs):
            if self.shape[1] == X.shape[1]:  # (X, or rows of it; not scikit-learn's labels)
                raise AssertionError("X was densified")
            return original(self, *args, **kwargs)
        return method

    for cls in (sp.csr_matrix, sp.csc_matrix, sp.csr_array, sp.csc_array):
        for name in ("toarray", "todense"):
            monkeypatch.setattr(cls, name, refusing(getattr(cls, name)))
    for kw in ({}, {"early_stopping": True}, {"solver": "lbfgs"}):
        est = _quiet(lambda kw=kw: nks.MLPClassifier((5,), max_iter=3, random_state=0,
                                                    **kw).fit(X, y))
        assert est.coefs_[0].dtype == np.float32  # (the float32 default, not float64)


def test_a_sparse_fit_runs_the_dense_fits_compiled_loop():
    """The compiled loop (its one overload per dtype) and its batch loader serve dense and sparse
    fits alike, and the sparse family's files are outside what the loop's cache entry reads:
    adding the sparse input compiles nothing again for dense users."""
    from nnjit.kernels.source_reach import source_files

    X = _tfidf_like(n=40)
    y = np.arange(40) % 3
    _quiet(lambda: nks.MLPClassifier((4,), max_iter=2, random_state=0).fit(X.toarray(), y))
    overloads = set(it.execute.signatures)
    _quiet(lambda: nks.MLPClassifier((4,), max_iter=2, random_state=0).fit(X, y))
    assert set(it.execute.signatures) == overloads
    reached = {p.replace("\\", "/") for p in source_files(it.execute)}
    for module in (sparse_ops, SparseLinear, pack_rows):
        path = (getattr(module, "__file__", None)
                or __import__(module.__module__, fromlist=["_"]).__file__)
        assert path.replace("\\", "/") not in reached, path
