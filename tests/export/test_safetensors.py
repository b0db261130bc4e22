"""safetensors files with PyTorch's names and layouts: round trips against torch and PyG, and
every kind of bad file rejected with the problem named (the ``export`` extra)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import nnjit as nn
from nnjit.export import SafetensorsFileError, SafetensorsMismatchError
from tests.export.models import (
    ACTIVATION_PAIRS,
    assert_every_activation_covered,
    compiled,
    inputs,
    mlp_pair,
    torch_outputs,
)

safetensors_numpy = pytest.importorskip("safetensors.numpy",
                                        reason="the export extra is not installed")
torch = pytest.importorskip("torch", reason="the parity extra (torch) is not installed")
safetensors_torch = pytest.importorskip("safetensors.torch")

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def deep_pair(dtype):
    """Every activation in one Sequential: Linear, act, Linear, act, ..., Dropout, Linear."""
    ours, theirs = [], []
    width = 4
    for make, make_torch in ACTIVATION_PAIRS.values():
        ours += [nn.Linear(width, 6), make()]
        theirs += [torch.nn.Linear(width, 6), make_torch(torch)]
        width = 6
    ours += [nn.Dropout(0.5), nn.Linear(width, 3)]
    theirs += [torch.nn.Dropout(0.5), torch.nn.Linear(width, 3)]
    theirs = torch.nn.Sequential(*theirs).to(
        torch.float64 if dtype == np.float64 else torch.float32)
    return nn.Sequential(*ours), theirs.eval()


def test_the_activation_table_covers_every_activation():
    assert_every_activation_covered()


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_sequential_file_loads_into_nnjit_with_equal_outputs(tmp_path, dtype):
    torch.manual_seed(0)
    ours, theirs = deep_pair(dtype)
    path = tmp_path / "torch.safetensors"
    safetensors_torch.save_file(theirs.state_dict(), path)
    trainer = compiled(ours, dtype, 4)  # float64 parameters need a float64 model
    ours.load_safetensors(path)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    X = inputs(4, dtype)
    np.testing.assert_allclose(trainer.predict_outputs(X), torch_outputs(torch, theirs, X),
                               **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_nnjit_file_loads_into_torch_with_equal_outputs(tmp_path, dtype):
    nn.set_seed(1)
    ours, theirs = deep_pair(dtype)
    trainer = compiled(ours, dtype, 4)
    path = tmp_path / "nnjit.safetensors"
    ours.save_safetensors(path)
    state = safetensors_torch.load_file(path)
    assert {k: v.dtype for k, v in state.items()} == {
        k: torch.float64 if dtype == np.float64 else torch.float32 for k in ours.state_dict()}
    theirs.load_state_dict(state)  # strict: same names and shapes
    X = inputs(4, dtype)
    np.testing.assert_allclose(torch_outputs(torch, theirs, X), trainer.predict_outputs(X),
                               **TOL[dtype])


class TwoLayer(nn.Module):
    """A custom forward (not Sequential): registration order differs from call order."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(8, 2)
        self.body = nn.Linear(5, 8)

    def forward(self, x):
        return self.head(nn.functional.tanh(self.body(x)))


def test_custom_module_round_trips_through_its_torch_twin(tmp_path):
    class TorchTwoLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(8, 2)
            self.body = torch.nn.Linear(5, 8)

        def forward(self, x):
            return self.head(torch.tanh(self.body(x)))

    torch.manual_seed(2)
    theirs = TorchTwoLayer()
    safetensors_torch.save_file(theirs.state_dict(), tmp_path / "t.safetensors")
    ours = TwoLayer()
    ours.load_safetensors(tmp_path / "t.safetensors")
    trainer = compiled(ours, np.float32, 5)
    X = inputs(5, np.float32)
    np.testing.assert_allclose(trainer.predict_outputs(X), torch_outputs(torch, theirs, X),
                               rtol=1e-5, atol=1e-5)
    ours.save_safetensors(tmp_path / "n.safetensors")  # and back into a fresh torch twin
    again = TorchTwoLayer()
    again.load_state_dict(safetensors_torch.load_file(tmp_path / "n.safetensors"))
    np.testing.assert_allclose(torch_outputs(torch, again, X), torch_outputs(torch, theirs, X))


def test_every_mismatch_is_listed_in_one_error_and_nothing_is_loaded(tmp_path):
    path = tmp_path / "bad.safetensors"
    safetensors_numpy.save_file({
        "0.weight": np.zeros((6, 4), np.float32),  # expected (6, 5)
        "0.bias": np.zeros(6, np.int64),  # not a float
        "2.weight": np.zeros((3, 6), np.float32),
        "extra.weight": np.zeros(2, np.float32),
    }, path)
    model = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3))
    before = model.state_dict()
    with pytest.raises(SafetensorsMismatchError) as info:
        model.load_safetensors(path)
    err = info.value
    assert isinstance(err, nn.StateMismatchError)
    assert err.missing == ["2.bias"] and err.unexpected == ["extra.weight"]
    assert err.mismatched == [("0.weight", (6, 5), (6, 4))]
    assert err.bad_dtypes == [("0.bias", "float32", "I64")]
    message = str(err)
    for part in (str(path), "'2.bias'", "'extra.weight'", "(6, 5)", "(6, 4)", "I64"):
        assert part in message
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_a_float64_file_into_a_float32_model_is_refused(tmp_path):
    model = nn.Sequential(nn.Linear(2, 3))
    safetensors_numpy.save_file({"0.weight": np.ones((3, 2)), "0.bias": np.ones(3)},
                                tmp_path / "f64.safetensors")
    with pytest.raises(SafetensorsMismatchError, match=r"'0.weight': expected dtype float32, "
                                                       r"got float64"):
        model.load_safetensors(tmp_path / "f64.safetensors")


def test_float16_widens_exactly_and_bfloat16_is_refused(tmp_path):
    model = nn.Sequential(nn.Linear(2, 3))
    w = np.array([[0.5, -1.25], [2.0, 3.0], [0.0, 1e-3]], np.float16)
    safetensors_numpy.save_file({"0.weight": w, "0.bias": np.ones(3, np.float16)},
                                tmp_path / "f16.safetensors")
    model.load_safetensors(tmp_path / "f16.safetensors")
    np.testing.assert_array_equal(model.state_dict()["0.weight"], w.astype(np.float32))
    safetensors_torch.save_file({"0.weight": torch.ones(3, 2, dtype=torch.bfloat16),
                                 "0.bias": torch.ones(3)}, tmp_path / "bf16.safetensors")
    with pytest.raises(SafetensorsMismatchError, match="'0.weight': expected dtype float32, "
                                                       "got BF16"):
        model.load_safetensors(tmp_path / "bf16.safetensors")


def test_non_finite_values_are_refused(tmp_path):
    model = nn.Sequential(nn.Linear(2, 3))
    before = model.state_dict()
    w = np.ones((3, 2), np.float32)
    w[1, 1] = np.nan
    b = np.array([0, np.inf, 0], np.float32)
    safetensors_numpy.save_file({"0.weight": w, "0.bias": b}, tmp_path / "nan.safetensors")
    with pytest.raises(SafetensorsMismatchError) as info:
        model.load_safetensors(tmp_path / "nan.safetensors")
    assert sorted(info.value.nonfinite) == ["0.bias", "0.weight"]
    assert "NaN or infinite" in str(info.value)
    np.testing.assert_array_equal(model.state_dict()["0.weight"], before["0.weight"])


@pytest.mark.parametrize("content", [b"", b"not a safetensors file at all",
                                     b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":1}xx",
                                     b"\xff" * 8 + b"{}"])
def test_a_file_that_is_not_safetensors_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "weights.safetensors"
    path.write_bytes(content)
    with pytest.raises(SafetensorsFileError, match="weights.safetensors: not a valid safetensors"):
        nn.Sequential(nn.Linear(2, 3)).load_safetensors(path)


def test_a_truncated_file_is_refused(tmp_path):
    path = tmp_path / "cut.safetensors"
    nn.Sequential(nn.Linear(20, 30)).save_safetensors(path)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(SafetensorsFileError, match="cut.safetensors"):
        nn.Sequential(nn.Linear(20, 30)).load_safetensors(path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.safetensors"):
        nn.Sequential(nn.Linear(2, 3)).load_safetensors(tmp_path / "nowhere.safetensors")


def test_saving_replaces_a_file_only_when_complete(tmp_path, monkeypatch):
    path = tmp_path / "w.safetensors"
    model = nn.Sequential(nn.Linear(2, 3))
    model.save_safetensors(path)
    saved = path.read_bytes()

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(safetensors_numpy, "save", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        nn.Sequential(nn.Linear(2, 3)).save_safetensors(path)
    assert path.read_bytes() == saved
    assert [p.name for p in tmp_path.iterdir()] == ["w.safetensors"]


def test_missing_package_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(ImportError, match=r"pip install 'nnjit\[export\]'"):
        nn.Sequential(nn.Linear(2, 3)).save_safetensors(tmp_path / "w.safetensors")


# -- graph layers: PyG's names and layouts -------------------------------------------------------

@pytest.mark.parametrize("kind", ["gcn", "sage_mean", "gat_concat", "gat_mean"])
def test_pyg_layer_file_loads_into_nnjit_with_equal_outputs(tmp_path, kind):
    pyg = pytest.importorskip("torch_geometric.nn", reason="the pyg extra is not installed")
    from tests.gnn.graphs import OneLayer, make_layer

    rng = np.random.default_rng(3)
    n, f_in, f_out = 20, 5, 4
    edge_index = rng.integers(0, n, (2, 60))
    graph = nn.Graph.from_arrays(rng.normal(size=(n, f_in)), edge_index, rng.integers(0, 3, n))
    torch.manual_seed(3)
    if kind == "gcn":
        theirs = pyg.GCNConv(f_in, f_out)
    elif kind == "sage_mean":
        theirs = pyg.SAGEConv(f_in, f_out)
    else:
        theirs = pyg.GATConv(f_in, f_out, heads=2, concat=kind == "gat_concat")
    theirs = theirs.double()
    with torch.no_grad():  # non-zero biases so every tensor matters
        for p in theirs.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    safetensors_torch.save_file({"conv." + k: v for k, v in theirs.state_dict().items()},
                                tmp_path / "pyg.safetensors")
    model = OneLayer(make_layer(kind, f_in, f_out))
    trainer = nn.Trainer(model, dtype=np.float64, seed=0)
    trainer.predict_outputs(graph)  # lays the model out in float64
    model.load_safetensors(tmp_path / "pyg.safetensors")
    with torch.no_grad():
        expected = theirs(torch.from_numpy(graph.x.astype(np.float64)),
                          torch.from_numpy(edge_index)).numpy()
    np.testing.assert_allclose(trainer.predict_outputs(graph), expected, rtol=1e-9, atol=1e-10)
    model.save_safetensors(tmp_path / "back.safetensors")  # and back, in PyG's shapes
    back = safetensors_torch.load_file(tmp_path / "back.safetensors")
    theirs.load_state_dict({k.removeprefix("conv."): v for k, v in back.items()})
