"""ONNX export: the file passes onnx's full check and onnxruntime reproduces nnjit's
``predict_outputs`` to 1e-5 for every activation, both dtypes and custom forwards; what has no
ONNX form is refused naming the layer (the ``export`` extra). The other layers:
test_onnx_layers.py."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

import nnjit as nn
from nnjit.export import ONNX_OPSET
from nnjit.export.trace import TRACE_BATCH
from tests.export.models import ACTIVATION_PAIRS, assert_every_activation_covered, compiled, inputs

onnx = pytest.importorskip("onnx", reason="the export extra is not installed")
ort = pytest.importorskip("onnxruntime", reason="the export extra is not installed")

DTYPES = [np.float32, np.float64]
EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "custom_op_seed.py"


def run_onnx(path, X) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"input": X})[0]


def check_file(path, n_features: int, n_outputs: int, dtype) -> None:
    """The full checker passes; opset 17; (batch, n) input and output of the model's dtype."""
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", ONNX_OPSET)]
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    for value, width in ((model.graph.input[0], n_features), (model.graph.output[0], n_outputs)):
        tensor = value.type.tensor_type
        assert tensor.elem_type == elem
        assert [d.dim_param or d.dim_value for d in tensor.shape.dim] == ["batch", width]


def test_the_activation_table_covers_every_activation():
    assert_every_activation_covered()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", list(ACTIVATION_PAIRS))
def test_onnxruntime_equals_predict_outputs(tmp_path, activation, dtype):
    nn.set_seed(4)
    make, _ = ACTIVATION_PAIRS[activation]
    model = nn.Sequential(nn.Linear(5, 7), make(), nn.Dropout(0.3), nn.Linear(7, 3))
    trainer = compiled(model, dtype, 5)
    path = tmp_path / "model.onnx"
    model.save_onnx(path)
    check_file(path, 5, 3, dtype)
    X = inputs(5, dtype)
    expected = trainer.predict_outputs(X)
    np.testing.assert_allclose(run_onnx(path, X), expected, rtol=1e-5, atol=1e-5)
    if dtype == np.float64 and activation != "GELU":  # exact to float64 rounding (GELU: erf32)
        np.testing.assert_allclose(run_onnx(path, X), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(run_onnx(path, X[3:4]), expected[3:4], rtol=1e-5, atol=1e-5)


def test_initializers_carry_pytorch_names_and_layouts(tmp_path):
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    model.save_onnx(tmp_path / "m.onnx")
    graph = onnx.load(str(tmp_path / "m.onnx")).graph
    found = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    assert set(found) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(found[name], value)
    assert [n.op_type for n in graph.node] == ["Gemm", "Relu", "Gemm"]


class Residual(nn.Module):
    """A custom forward with a skip connection and a gate: ``+`` and ``*`` between tensors."""

    def __init__(self):
        super().__init__()
        self.out = nn.Linear(6, 3)  # registered first, called last
        self.inp = nn.Linear(4, 6)
        self.block = nn.Linear(6, 6)
        self.gate = nn.Linear(6, 6)

    def forward(self, x):
        h = nn.functional.elu(self.inp(x), 0.5)
        h = h + nn.functional.gelu(self.block(h))
        h = h * nn.functional.sigmoid(self.gate(h))
        return self.out(nn.functional.dropout(h, 0.2))


class Plain(nn.Module):
    """A residual-free custom forward over functional activations, with an unused layer."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.unused = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(nn.functional.softplus(nn.functional.leaky_relu(self.fc1(x), 0.2)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("model_class", [Residual, Plain])
def test_custom_forward_modules_export_from_the_tape(tmp_path, model_class, dtype):
    nn.set_seed(5)
    model = model_class()
    trainer = compiled(model, dtype, 4)
    model.save_onnx(tmp_path / "m.onnx")  # the width comes from the compiled trainer
    check_file(tmp_path / "m.onnx", 4, trainer.program.output_cols, dtype)
    X = inputs(4, dtype)
    np.testing.assert_allclose(run_onnx(tmp_path / "m.onnx", X), trainer.predict_outputs(X),
                               rtol=1e-5, atol=1e-5)


def test_input_shape_names_the_width_of_an_uncompiled_model(tmp_path):
    """Residual registers its output layer first: the first Linear's width (6) does not trace,
    the error says to pass input_shape, and input_shape=(None, 4) exports."""
    model = Residual()
    with pytest.raises(ValueError, match=r"shape \(None, 6\) failed.*input_shape=\(None, "
                                         r"n_features\)"):
        model.save_onnx(tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
    for shape in [(None, 4), (4,), 4, (10, 4)]:
        model.save_onnx(tmp_path / "m.onnx", input_shape=shape)
        check_file(tmp_path / "m.onnx", 4, 3, np.float32)


@pytest.mark.parametrize("shape", [(None, None), (0,), (None, 4, 0), "4", (4.0,), (True, 4), -1,
                                   ()])
def test_bad_input_shape_is_named(tmp_path, shape):
    with pytest.raises(ValueError, match="input_shape"):
        nn.Sequential(nn.Linear(4, 2)).save_onnx(tmp_path / "m.onnx", input_shape=shape)


def load_example():
    spec = importlib.util.spec_from_file_location("custom_op_seed", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_python_op_is_refused_naming_the_layer_and_op(tmp_path):
    example = load_example()
    with pytest.raises(NotImplementedError, match=r"layer 'GatedMLP' \(GatedMLP\) runs the "
                                                  r"Python op MulOp"):
        example.GatedMLP(python_op=True).save_onnx(tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
    model = example.GatedMLP(python_op=False)  # the same model with the compiled product
    trainer = compiled(model, np.float32, 4)
    model.save_onnx(tmp_path / "m.onnx")
    X = inputs(4, np.float32)
    np.testing.assert_allclose(run_onnx(tmp_path / "m.onnx", X), trainer.predict_outputs(X),
                               rtol=1e-5, atol=1e-5)


def test_a_python_op_inside_a_sublayer_is_named_by_its_path(tmp_path):
    example = load_example()

    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return example.MulOp(x.tape, self.fc(x), x).out

    model = nn.Sequential(Gate(), nn.ReLU(), nn.Linear(4, 2))
    with pytest.raises(NotImplementedError, match=r"layer '0' \(Gate\) runs the Python op MulOp"):
        model.save_onnx(tmp_path / "m.onnx")


def test_a_batch_tensor_combined_with_a_parameter_is_refused(tmp_path):
    class Shift(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.offset = nn.Parameter(np.ones((TRACE_BATCH, 2), np.float32))

        def forward(self, x):
            return self.fc(x) + x.tape.parameter(self.offset, "offset")

    with pytest.raises(NotImplementedError, match=r"'Shift' \(Shift\) combines a batch tensor"):
        Shift().save_onnx(tmp_path / "m.onnx")


def test_missing_package_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r"'onnx' package.*pip install 'nnjit\[export\]'"):
        nn.Sequential(nn.Linear(2, 3)).save_onnx(tmp_path / "m.onnx")
