"""Models with several inputs (``forward(self, x_num, x_cat)``), image-shaped inputs and integer
inputs, end to end: DataLoader, fit, evaluate, predict, gradients, Module.predict, summary, and
the errors for inputs that do not match the traced ones."""

import numpy as np
import pytest

import nnjit as nn
from nnjit.data.inputs import InputSpec

F64 = np.float64


class TwoBranch(nn.Module):
    """``a(x_num) + b(x_more)``: the same function as one Linear on the concatenated columns."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 6)
        self.b = nn.Linear(2, 6, bias=False)  # (one bias: the sum's, as the single Linear's)
        self.out = nn.Linear(6, 3)

    def forward(self, x_num, x_more):
        return self.out(nn.functional.relu(self.a(x_num) + self.b(x_more)))


class OneBranch(nn.Module):
    def __init__(self, two: TwoBranch):
        super().__init__()
        self.ab = nn.Linear(5, 6)
        self.out = nn.Linear(6, 3)
        self.ab.weight.data[...] = np.concatenate([two.a.weight.data, two.b.weight.data], axis=1)
        self.ab.bias.data[...] = two.a.bias.data
        self.out.load_state_dict({"weight": two.out.weight.data, "bias": two.out.bias.data})

    def forward(self, x):
        return self.out(nn.functional.relu(self.ab(x)))


def _data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = (X[:, 0] + X[:, 3] > 0).astype(np.int64) + (X[:, 1] > 1)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    """A two-input model and the equivalent one-input model, both fitted the same way."""
    X, y = _data()
    Xv, yv = _data(16, seed=1)
    two = TwoBranch()
    one = OneBranch(two)
    t2 = nn.Trainer(two, nn.Adam(lr=0.01), dtype=F64, seed=3)
    t1 = nn.Trainer(one, nn.Adam(lr=0.01), dtype=F64, seed=3)
    h2 = t2.fit(nn.DataLoader((X[:, :3], X[:, 3:]), y, batch_size=8),
                epochs=4, val=((Xv[:, :3], Xv[:, 3:]), yv), verbose=False)
    h1 = t1.fit(nn.DataLoader(X, y, batch_size=8), epochs=4, val=(Xv, yv), verbose=False)
    return X, y, t2, t1, h2, h1


def test_two_inputs_train_and_predict_as_the_concatenated_single_input(fitted):
    X, y, t2, t1, h2, h1 = fitted
    np.testing.assert_allclose(h2[["train_loss", "val_loss"]].to_numpy(),
                               h1[["train_loss", "val_loss"]].to_numpy(), rtol=1e-12)
    parts = (X[:, :3], X[:, 3:])
    np.testing.assert_allclose(t2.predict_outputs(parts), t1.predict_outputs(X), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_array_equal(t2.predict(parts), t1.predict(X))
    np.testing.assert_allclose(t2.predict_proba(list(parts)), t1.predict_proba(X), rtol=1e-12)
    e2, e1 = t2.evaluate(parts, y), t1.evaluate((X, y))
    assert e2["accuracy"] == e1["accuracy"]
    np.testing.assert_allclose(e2["loss"], e1["loss"], rtol=1e-12)
    g2, g1 = t2.gradients(parts, y), t1.gradients(X, y)
    np.testing.assert_allclose(np.concatenate([g2["a.weight"], g2["b.weight"]], axis=1),
                               g1["ab.weight"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(g2["out.weight"], g1["out.weight"], rtol=1e-10, atol=1e-14)
    # the model itself runs on data with one array per input (its trainer's compiled forward)
    np.testing.assert_array_equal(t2.model.predict(parts), t2.predict_outputs(parts))
    np.testing.assert_array_equal(t2.model(*parts), t2.predict_outputs(parts))
    program = t2.program
    from nnjit.engine import fields

    entries = program.layout[fields.LAYOUT_HEAD:].reshape(-1, fields.INPUT_ENTRY_WIDTH)
    assert program.layout[fields.L_N_INPUTS] == 2
    assert entries[:, fields.INPUT_FIRST_COLUMN].tolist() == [0, 3]
    assert entries[:, fields.INPUT_COLUMNS].tolist() == [3, 2]


def test_inputs_that_differ_from_the_traced_ones_are_refused(fitted):
    X, y, t2, _, _, _ = fitted
    parts = (X[:, :3], X[:, 3:])
    with pytest.raises(ValueError, match=r"^predict: input 1 has 3 columns, the model was traced "
                                         r"with 2$"):
        t2.predict((X[:, :3], X[:, 2:]))
    with pytest.raises(ValueError, match=r"^predict_outputs: the model was traced with 2 inputs "
                                         r"\(\(None, 3\) float, \(None, 2\) float\), got 1 input"):
        t2.predict_outputs(X[:, :3])
    with pytest.raises(ValueError, match=r"^evaluate: input 1 holds integers, the model was "
                                         r"traced with \(None, 2\) float"):
        t2.evaluate((parts[0], np.ones((len(X), 2), np.int32)), y)
    with pytest.raises(ValueError, match=r"^gradients: input 0 has rows of shape \(3, 1\), the "
                                         r"model was traced with \(3,\)"):
        t2.gradients((parts[0][:, :, None], parts[1]), y)
    with pytest.raises(ValueError, match=r"^fit: val X: input 1 has 1 column, train X has 2"):
        t2.fit((parts, y), epochs=1, val=((parts[0], parts[1][:, :1]), y), verbose=False)
    with pytest.raises(ValueError, match=r"^fit: val X: train X has 2 inputs .*got 1 input"):
        t2.fit((parts, y), epochs=1, val=(X, y), verbose=False)


def test_bad_tuples_name_the_input():
    X, y = _data(10)
    with pytest.raises(ValueError, match=r"^DataLoader: X: the inputs have different numbers of "
                                         r"rows \(X\[0\]: 10, X\[1\]: 9\)"):
        nn.DataLoader((X[:, :3], X[:-1, 3:]), y)
    with pytest.raises(ValueError, match=r"^DataLoader: X\[0\] is empty \(0 samples\)"):
        nn.DataLoader((X[:0, :3], X[:0, 3:]), y[:0])
    kinds = nn.DataLoader((X, X > 0, (X * 4).astype(np.int16)), y).input_specs
    assert [spec.integer for spec in kinds] == [False, False, True]  # (bool is a float input)
    with pytest.raises(ValueError, match=r"^DataLoader: X is an empty tuple"):
        nn.DataLoader((), y)
    with pytest.raises(ValueError, match=r"^DataLoader: X\[1\] must be 2-D .*a column of indices "
                                         r"is X\[:, None\]"):
        nn.DataLoader((X, y), y)
    bad = X.copy()
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"^DataLoader: X\[1\] contains NaN or inf \(first at "
                                         r"row 4, column 1\)"):
        nn.DataLoader((X, bad), y)
    with pytest.raises(ValueError, match=r"^predict: TwoBranch.forward\(x_num, x_more\) takes 2 "
                                         r"inputs, the data has 3 arrays"):
        nn.Trainer(TwoBranch(), dtype=F64).predict((X[:, :3], X[:, 3:], X))
    with pytest.raises(ValueError, match=r"^predict: X\[1\] holds the integer 2147483648, beyond "
                                         r"int32's range .*Trainer\(dtype=np.float64\)"):
        nn.Trainer(TwoBranch()).predict((X[:, :3], np.full((10, 2), 2**31, np.int64)))
    with pytest.raises(ValueError, match=r"Expected 'x' to be one \(N, F\) array of node "
                                         r"features, got a tuple of 2"):
        nn.Graph.from_arrays((X, X), np.array([[0, 1], [1, 2]]), y)

    class Gnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.GCNConv(5, 3)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index)

    # graph models take a Graph: a tuple of arrays is not read as (features, edges)
    with pytest.raises(ValueError, match=r"^fit: Gnn is a graph model \(layer GCNConv 'conv'\); "
                                         r"pass the Graph"):
        nn.Trainer(Gnn()).fit(((X, X), y), epochs=1, verbose=False)


class ImageNet(nn.Module):
    """Records the shape its forward receives; flattens it into a Linear."""

    def __init__(self, cols):
        super().__init__()
        self.fc = nn.Linear(cols, 2)
        self.seen = None

    def forward(self, x):
        self.seen = (x.shape[1:], x.ndim)
        return self.fc(x.flatten(1))


@pytest.mark.parametrize("shape", [(6, 2, 3, 4), (6, 3, 4)])
def test_image_arrays_reach_the_model_in_their_own_shape(shape):
    X = np.random.default_rng(0).normal(size=shape)
    loader = nn.DataLoader(X, np.zeros(len(X), np.int64), batch_size=4)
    packed = loader.features(F64)
    assert packed.shape == (6, int(np.prod(shape[1:]))) and np.shares_memory(packed, X)  # (a view)
    model = ImageNet(packed.shape[1])
    trainer = nn.Trainer(model, dtype=F64)
    out = trainer.predict_outputs(X)
    assert model.seen == (shape[1:], len(shape))  # (B, C, H, W) / (B, H, W), as PyTorch gives it
    reference = X.reshape(len(X), -1) @ model.fc.weight.data.T + model.fc.bias.data
    np.testing.assert_allclose(out, reference, rtol=1e-12)
    trainer.fit((X, np.arange(6) % 2), epochs=1, verbose=False)  # the training loader too
    with pytest.raises(ValueError, match=rf"^predict: the input has rows of shape "
                                         rf"\({packed.shape[1]},\), the model was traced with"):
        trainer.predict(X.reshape(len(X), -1))
    text = model.summary_str(input_shape=(None, *shape[1:]))
    assert f"(None, {2})" in text and "Input: (None, " + ", ".join(map(str, shape[1:])) in text


class WithIndices(nn.Module):
    """A float branch and an integer input the model does not read (its slot is still loaded)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x, idx):
        assert idx.is_integer and not x.is_integer
        return self.fc(x)


@pytest.mark.parametrize("dtype, int_type", [(np.float32, np.int32), (F64, np.int64)])
def test_integer_inputs_arrive_bit_exact_in_the_arena(dtype, int_type):
    info = np.iinfo(int_type)
    special = [2**24 + 1, -(2**24) - 3, info.max, info.min, 0x7FA00001, 0x7FC00001, -1, 2**53 + 1
               if int_type == np.int64 else 123456789]  # (NaN patterns as floats, beyond 2**24)
    idx = np.array(special * 3, dtype=np.int64).reshape(-1, 2)
    x = np.random.default_rng(0).normal(size=(len(idx), 2))
    trainer = nn.Trainer(WithIndices(), loss=nn.MSELoss(), dtype=dtype)
    trainer.predict((x, idx))  # one batch: the slot holds every row afterwards
    program = trainer.program
    slot = program.input_slots[1]
    assert program.slots[slot, 2] == 2 and program.input_specs[1].integer
    np.testing.assert_array_equal(program.view(slot).view(int_type), idx)
    # the training loader copies the same bits (batches via the shuffled permutation)
    trainer.fit(((x, idx), x), epochs=1, verbose=False)
    loaded = program.view(slot).view(int_type)
    assert all(row.tolist() in idx.tolist() for row in loaded)
    assert trainer.program.input_specs[1] == InputSpec((2,), True)


def test_summary_with_a_tuple_of_shapes_and_export_of_several_inputs(tmp_path, fitted):
    text = TwoBranch().summary_str(input_shape=((None, 3), (None, 2)))
    assert "Input: (None, 3) float, (None, 2) float" in text
    assert "(None, 6)" in text and "(None, 3)" in text
    _, _, t2, _, _, _ = fitted
    assert "Input: (None, 3) float, (None, 2) float" in t2.model.summary_str()  # (as laid out)
    pytest.importorskip("safetensors")
    saved = TwoBranch()
    saved.save_safetensors(tmp_path / "m.safetensors")  # (weights only: any inputs)
    loaded = TwoBranch()
    loaded.load_safetensors(tmp_path / "m.safetensors")
    for name, value in saved.state_dict().items():
        np.testing.assert_array_equal(loaded.state_dict()[name], value)
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    t2.model.save_onnx(tmp_path / "m.onnx")  # one ONNX input per argument of forward
    X, _ = _data(6, seed=2)
    feeds = {"x_num": X[:, :3], "x_more": X[:, 3:]}
    got = ort.InferenceSession(str(tmp_path / "m.onnx"),
                               providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, t2.predict_outputs((X[:, :3], X[:, 3:])), rtol=1e-10,
                               atol=1e-10)
    with pytest.raises(ValueError, match=r"TwoBranch.forward\(x_num, x_more\) takes 2 inputs"):
        TwoBranch().save_onnx(tmp_path / "m.onnx", input_shape=(None, 5))


def test_zero_nrt_allocations_per_epoch_with_several_inputs():
    from tests.helpers import count_allocations

    rng = np.random.default_rng(0)
    x, idx = rng.normal(size=(40, 2)), rng.integers(-5, 5, (40, 2))
    trainer = nn.Trainer(WithIndices(), loss=nn.MSELoss(), dtype=F64)
    loader = nn.DataLoader((x, idx), x, batch_size=8)

    def fit(epochs):
        trainer.fit(loader, epochs=epochs, val=((x, idx), x), verbose=False,
                    n_iter_no_change=None)

    fit(1)
    two, twelve = count_allocations(fit, repeats=(2, 12))
    assert twelve == two, f"{twelve - two} NRT allocations over 10 extra epochs"
