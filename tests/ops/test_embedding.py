"""nn.Embedding and the EMBEDDING op: PyTorch parity (float64, padding_idx, duplicate indices),
integer indices kept bit-exact, and the out-of-range index error of fit, evaluate and predict.

Models here read their indices from integer constants (``tape.constant(..., integer=True)``) so
that every test shares the float64 build of the core + embedding families (the op checker's);
the end-to-end table model at the bottom feeds them as an integer model input.
"""

from __future__ import annotations


import numpy as np
import pytest

import nnjit as nn
from nnjit.engine.status import BadInputError
from nnjit.nn import functional as F
from nnjit.tape.tape import Tensor

B, NUM, DIM = 6, 5, 3


class Lookup(nn.Module):
    """Embeds a fixed (B, K) table of indices; the data X only sets the batch."""

    def __init__(self, idx, num=NUM, dim=DIM, padding_idx=None):
        super().__init__()
        self.idx = np.asarray(idx)
        self.emb = nn.Embedding(num, dim, padding_idx=padding_idx)

    def forward(self, x):
        return self.emb(x.tape.constant(self.idx, "idx", integer=True))


def _trainer(model, lr=0.1):
    return nn.Trainer(model, nn.SGD(lr=lr), nn.MSELoss(), dtype=np.float64, seed=0)


def _torch_embedding(model, idx, Y):
    torch = pytest.importorskip("torch")
    emb = torch.nn.Embedding(model.emb.num_embeddings, model.emb.embedding_dim,
                             padding_idx=model.emb.padding_idx).double()
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(np.array(model.emb.weight.data, np.float64)))
    out = emb(torch.from_numpy(np.asarray(idx, np.int64))).reshape(len(idx), -1)
    torch.nn.functional.mse_loss(out, torch.from_numpy(Y)).backward()
    return out.detach().numpy(), emb.weight.grad.numpy()


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_forward_and_weight_gradient_match_torch_with_duplicates_and_padding(padding_idx):
    rng = np.random.default_rng(1)
    idx = np.array([[0, 2, 2], [4, 4, 4], [2, 1, 0], [3, 3, 2], [0, 0, 4], [1, 2, 3]])
    with nn.seeded(3):
        model = Lookup(idx, padding_idx=padding_idx)
    if padding_idx is not None:  # torch's init: the padding row is zeros
        assert not model.emb.weight.data[padding_idx].any()
        # make it non-zero: the row is still looked up as it is, and still gets no gradient
        model.emb.weight.data[padding_idx] = [0.5, -1.0, 2.0]
    X, Y = np.zeros((B, 1)), rng.normal(size=(B, 3 * DIM))
    trainer = _trainer(model)
    out = trainer.predict_outputs(X)
    grads = trainer.gradients(X, Y)
    t_out, t_grad = _torch_embedding(model, idx, Y)
    np.testing.assert_allclose(out, t_out, rtol=1e-13, atol=0)
    np.testing.assert_allclose(grads["emb.weight"], t_grad, rtol=1e-12, atol=1e-15)
    if padding_idx is not None:
        assert not grads["emb.weight"][padding_idx % NUM].any()
    assert model.emb.weight.shape == (NUM, DIM)


class SharedTable(nn.Module):
    """One table looked up twice: its gradient is the sum of both scatters."""

    def __init__(self, first, second):
        super().__init__()
        self.first, self.second = first, second
        self.emb = nn.Embedding(NUM, DIM, padding_idx=1)

    def forward(self, x):
        tape = x.tape
        a = self.emb(tape.constant(self.first, "first", integer=True))
        return a + self.emb(tape.constant(self.second, "second", integer=True))


def test_a_table_shared_by_two_lookups_sums_both_gradients():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    first, second = rng.integers(0, NUM, (B, 2)), rng.integers(0, NUM, (B, 2))
    with nn.seeded(1):
        model = SharedTable(first, second)
    Y = rng.normal(size=(B, 2 * DIM))
    grads = _trainer(model).gradients(np.zeros((B, 1)), Y)
    emb = torch.nn.Embedding(NUM, DIM, padding_idx=1).double()
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(np.array(model.emb.weight.data, np.float64)))
    out = emb(torch.from_numpy(first)) + emb(torch.from_numpy(second))
    torch.nn.functional.mse_loss(out.reshape(B, -1), torch.from_numpy(Y)).backward()
    np.testing.assert_allclose(grads["emb.weight"], emb.weight.grad.numpy(), rtol=1e-12,
                               atol=1e-15)


def test_padding_row_stays_zero_through_training_and_shapes_follow_torch():
    idx = np.array([[1, 0], [0, 0], [3, 1], [0, 4], [2, 2], [0, 1]])
    with nn.seeded(0):
        model = Lookup(idx, padding_idx=0)
        lookup_1d = nn.Embedding(NUM, DIM)
    before = np.array(model.emb.weight.data)
    trainer = nn.Trainer(model, nn.Adam(lr=0.05), nn.MSELoss(), dtype=np.float64, seed=0)
    trainer.fit(nn.DataLoader(np.zeros((B, 1)), np.ones((B, 2 * DIM)), batch_size=B),
                epochs=5, verbose=False)
    w = np.array(model.emb.weight.data)
    assert not w[0].any()  # never a gradient, so Adam never moves it
    assert not np.allclose(w[1:], before[1:])  # the other rows trained
    # (B,) indices give (B, dim), (B, K) give (B, K, dim); the init is N(0, 1)
    shapes = {}

    class Shapes(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = lookup_1d

        def forward(self, x):
            tape = x.tape
            k3 = self.emb(tape.constant(np.zeros((B, 3), np.int64), "k3", integer=True))
            one = tape.constant(np.zeros((B, 1), np.int64), "one", integer=True)
            one = Tensor(tape, one.slot, ())  # (B,): one index per row
            shapes["k3"], shapes["one"] = k3.shape, self.emb(one).shape
            return k3

    _trainer(Shapes()).predict_outputs(np.zeros((B, 1)))
    assert shapes == {"k3": (B, 3, DIM), "one": (B, DIM)}
    with nn.seeded(0):
        big = nn.Embedding(2000, 50).weight.data
    assert abs(float(big.mean())) < 0.01 and abs(float(big.std()) - 1.0) < 0.01
    assert repr(nn.Embedding(10, 4, padding_idx=-2)) == "Embedding(10, 4, padding_idx=8)"


def test_indices_are_read_as_integers_not_floats():
    """2**53 + 1 has no float64: a float round trip would read 2**53 (a valid-looking other
    index in a large table); the error names the exact value."""
    idx = np.array([[1], [2**53 + 1], [0], [1], [1], [2]])
    with pytest.raises(BadInputError, match=r"index 9007199254740993 is out of range"):
        _trainer(Lookup(idx)).predict_outputs(np.zeros((B, 1)))


@pytest.mark.parametrize("bad", [NUM, -1, 10**9])
def test_out_of_range_index_names_layer_value_and_range_in_fit_evaluate_and_predict(bad):
    idx = np.array([[1, 2], [0, 4], [3, bad], [1, 1], [0, 0], [2, 2]])
    model = Lookup(idx)
    trainer = _trainer(model)
    X, Y = np.zeros((B, 1)), np.ones((B, 2 * DIM))
    weights = np.array(model.emb.weight.data)
    message = rf"layer 'emb': embedding index {bad} is out of range: valid indices are 0\.\.4 "
    with pytest.raises(IndexError, match=message):
        trainer.predict(X)
    with pytest.raises(BadInputError, match=message):
        trainer.evaluate(X, Y)
    with pytest.raises(BadInputError, match=message):
        trainer.fit(nn.DataLoader(X, Y, batch_size=B), epochs=2, verbose=False)
    np.testing.assert_array_equal(model.emb.weight.data, weights)  # no step was taken
    model.idx[2, 1] = 3  # fixed data: the same trainer runs again
    trainer = _trainer(model)
    assert np.isfinite(trainer.evaluate(X, Y)["loss"])


def test_bad_arguments_name_the_layer():
    for kwargs, error, match in (
        (dict(num_embeddings=0, embedding_dim=2), ValueError, "num_embeddings"),
        (dict(num_embeddings=3, embedding_dim=2, padding_idx=3), ValueError, "padding_idx"),
        (dict(num_embeddings=3, embedding_dim=2, padding_idx=1.0), TypeError, "padding_idx"),
    ):
        with pytest.raises(error, match=match):
            nn.Embedding(**kwargs)

    class OnFloats(nn.Module):
        def __init__(self):
            super().__init__()
            self.cat_emb = nn.Embedding(4, 2)

        def forward(self, x):
            return self.cat_emb(x)

    with pytest.raises(TypeError, match="Embedding 'cat_emb': expected an integer tensor"):
        _trainer(OnFloats()).predict_outputs(np.zeros((2, 1)))


# -- end to end: a table with categorical columns (a model with two inputs)


class TableNet(nn.Module):
    """An embedding per categorical column, joined with the numeric columns, then an MLP."""

    def __init__(self, cardinalities, n_num, dim=3):
        super().__init__()
        self.emb0 = nn.Embedding(cardinalities[0], dim)
        self.emb1 = nn.Embedding(cardinalities[1], dim, padding_idx=0)
        self.hidden = nn.Linear(n_num + 2 * dim, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, x_num, x_cat):
        joined = F.cat([x_num, self.emb0(x_cat[:, 0]), self.emb1(x_cat[:, 1])], dim=1)
        return self.out(F.relu(self.hidden(joined)))


def _table(n, rng):
    """Class 1 when the two categories' effects plus a little of x0 are positive."""
    effects = (np.array([2.0, -2.0, 1.5, -1.0]), np.array([0.0, 1.0, -1.5, 2.0, -2.5, 0.5]))
    x_cat = np.stack([rng.integers(0, 4, n), rng.integers(0, 6, n)], axis=1)
    x_num = rng.normal(size=(n, 2))
    logit = effects[0][x_cat[:, 0]] + effects[1][x_cat[:, 1]] + 0.5 * x_num[:, 0]
    return x_num, x_cat, (logit > 0).astype(np.int64)


def test_table_with_categorical_columns_trains_and_a_bad_category_names_its_layer():
    rng = np.random.default_rng(0)
    (xn, xc, y), (xn_t, xc_t, y_t) = _table(480, rng), _table(200, rng)
    with nn.seeded(0):
        model = TableNet((4, 6), 2)
    trainer = nn.Trainer(model, nn.Adam(lr=0.02), nn.CrossEntropyLoss(), seed=0)
    trainer.fit(nn.DataLoader((xn, xc), y, batch_size=32), epochs=12, verbose=False)
    accuracy = float(np.mean(trainer.predict((xn_t, xc_t)) == y_t))
    assert accuracy >= 0.93, accuracy  # the categories carry most of the signal
    bad = xc_t.copy()
    bad[57, 1] = 6
    with pytest.raises(IndexError, match=r"layer 'emb1': embedding index 6 is out of range: "
                                         r"valid indices are 0\.\.5 \(num_embeddings=6\)"):
        trainer.predict((xn_t, bad))
