"""ONNX export of every built-in layer: images (Conv2d, pooling, BatchNorm2d), normalisation,
embeddings, cat and column slices, residual ``+``, and the graph layers over an edge_index
input. onnxruntime reproduces nnjit's ``predict_outputs`` within 1e-5 in float32 and 1e-10 in
float64; the trained CNN, embedding model and GNN round trip."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.export import ONNX_OPSET
from nnjit.ops.opcodes import Opcode

onnx = pytest.importorskip("onnx", reason="the export extra is not installed")
ort = pytest.importorskip("onnxruntime", reason="the export extra is not installed")

F = nn.functional
DTYPES = [np.float32, np.float64]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-10}


def session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def run_onnx(path, feeds) -> np.ndarray:
    return session(path).run(None, feeds)[0]


def assert_close(actual, expected, dtype) -> None:
    tol = TOLERANCE[np.dtype(dtype).type]
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)


def io_shapes(path) -> tuple[list, list, int]:
    """(input shapes, output shapes, opset) of an ONNX file, after the full check."""
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)

    def shapes(values):
        return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
                for v in values]

    return shapes(model.graph.input), shapes(model.graph.output), model.opset_import[0].version


def op_types(path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def images(shape, dtype, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def randomize_batch_norm(model, seed=1) -> None:
    """Running statistics and affine parameters away from their 0/1 defaults."""
    rng = np.random.default_rng(seed)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = m.num_features
            if m.track_running_stats:
                m.running_mean.data[...] = rng.normal(size=c)
                m.running_var.data[...] = rng.uniform(0.5, 2.0, size=c)
            if m.affine:
                m.weight.data[...] = rng.uniform(0.5, 1.5, size=c)
                m.bias.data[...] = rng.normal(size=c)
        if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
            m.weight.data[...] = rng.uniform(0.5, 1.5, size=m.weight.data.shape)
            if "bias" in m._parameters:
                m.bias.data[...] = rng.normal(size=m.bias.data.shape)


class Viewed(nn.Module):
    """Flat rows read as images by the model itself (``view``), then a layer, then flattened."""

    def __init__(self, layer, dims):
        super().__init__()
        self.layer = layer
        self.dims = dims

    def forward(self, x):
        return self.layer(x.view(-1, *self.dims)).flatten(1)


class Residual(nn.Module):
    """A residual block on images: ``conv2(relu(conv1(x))) + x``, pooled, flattened, Linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 3, 3, padding=1)
        self.conv2 = nn.Conv2d(3, 3, 3, padding="same", bias=False)
        self.pool = nn.AvgPool2d(2)
        self.head = nn.Linear(3 * 3 * 3, 2)

    def forward(self, x):
        h = self.conv2(F.relu(self.conv1(x))) + x
        return self.head(self.pool(h).flatten(1))


#: name -> (model factory, input row shape)
LAYERS = {
    "conv": (lambda: nn.Conv2d(2, 4, 3), (2, 6, 5)),
    "conv_groups_stride_dilation_padding": (
        lambda: nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                          groups=2), (4, 7, 6)),
    "conv_same_even_kernel_no_bias": (lambda: nn.Conv2d(2, 3, 4, padding="same", bias=False),
                                      (2, 5, 6)),
    "conv_depthwise_strided": (lambda: nn.Conv2d(3, 3, 3, stride=2, padding=1, groups=3),
                               (3, 8, 7)),
    # (16 -> 17 channels, 3x3, stride 1: the recorder runs it by Winograd, CONV2D_WINOGRAD)
    "conv_winograd_odd_size": (lambda: nn.Conv2d(16, 17, 3, padding=1), (16, 7, 6)),
    "max_pool": (lambda: nn.MaxPool2d(2), (2, 6, 6)),
    "max_pool_ceil_padding": (lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
                              (2, 8, 7)),
    "max_pool_dilated": (lambda: nn.MaxPool2d(2, stride=1, dilation=2), (2, 6, 5)),
    "avg_pool": (lambda: nn.AvgPool2d(2), (2, 6, 6)),
    "avg_pool_exclude_pad": (lambda: nn.AvgPool2d(3, stride=2, padding=1,
                                                  count_include_pad=False), (2, 7, 8)),
    "avg_pool_ceil": (lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), (2, 8, 7)),
    "avg_pool_ceil_exclude_pad": (lambda: nn.AvgPool2d(2, padding=1, ceil_mode=True,
                                                       count_include_pad=False), (2, 5, 6)),
    "avg_pool_divisor_override": (lambda: nn.AvgPool2d(2, stride=1, padding=1,
                                                       divisor_override=3), (2, 5, 5)),
    "adaptive_global": (lambda: nn.AdaptiveAvgPool2d(1), (3, 5, 4)),
    "adaptive_uneven_windows": (lambda: nn.AdaptiveAvgPool2d((3, 2)), (2, 7, 5)),
    "batch_norm2d": (lambda: nn.BatchNorm2d(3), (3, 4, 5)),
    "batch_norm1d": (lambda: nn.BatchNorm1d(6), (6,)),
    "batch_norm1d_length_no_affine": (lambda: Viewed(nn.BatchNorm1d(3, affine=False), (3, 4)),
                                      (12,)),
    "batch_norm_without_running_stats": (
        lambda: nn.BatchNorm2d(2, track_running_stats=False), (2, 3, 3)),
    "layer_norm": (lambda: nn.LayerNorm(6), (6,)),
    "layer_norm_images_no_bias": (lambda: nn.LayerNorm([4, 5], bias=False), (3, 4, 5)),
    "flatten_view_linear": (lambda: nn.Sequential(Viewed(nn.MaxPool2d(2), (2, 4, 4)),
                                                  nn.Linear(8, 3)), (32,)),
    "residual_add": (lambda: Residual(), (3, 6, 6)),
}


def layer_model(name: str):
    """(model, input row shape) of a LAYERS case; a layer without parameters gets a 1x1
    convolution (a Linear for flat rows) in front, to have a dtype and a trainer."""
    make, dims = LAYERS[name]
    nn.set_seed(3)
    model = make()
    if not model.parameters():
        first = nn.Conv2d(dims[0], dims[0], 1) if len(dims) == 3 else nn.Linear(dims[0], dims[0])
        model = nn.Sequential(first, model)
    return model, dims


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(LAYERS))
def test_each_layer_matches_onnxruntime(tmp_path, name, dtype):
    model, dims = layer_model(name)
    randomize_batch_norm(model)
    X = images((9, *dims), dtype)
    trainer = nn.Trainer(model, dtype=dtype, seed=0)
    expected = trainer.predict_outputs(X)
    path = tmp_path / "m.onnx"
    model.save_onnx(path)  # the input's shape comes from the compiled trainer
    inputs, outputs, opset = io_shapes(path)
    assert inputs == [["batch", *dims]] and outputs == [["batch", expected.shape[1]]]
    assert opset == ONNX_OPSET
    assert_close(run_onnx(path, {"input": X}), expected, dtype)
    one = X[4:5]  # (a batch norm without running statistics normalises each batch alone)
    assert_close(run_onnx(path, {"input": one}), trainer.predict_outputs(one), dtype)


@pytest.mark.parametrize("name, ops", [
    ("conv", {"Conv"}), ("max_pool_ceil_padding", {"MaxPool"}), ("avg_pool", {"AveragePool"}),
    ("avg_pool_ceil", {"MatMul"}), ("adaptive_global", {"GlobalAveragePool"}),
    ("batch_norm2d", {"BatchNormalization"}), ("layer_norm", {"LayerNormalization"})])
def test_float32_layers_use_the_onnx_op_of_the_layer(tmp_path, name, ops):
    model, dims = layer_model(name)
    model.save_onnx(tmp_path / "m.onnx", input_shape=(None, *dims))
    assert ops <= set(op_types(tmp_path / "m.onnx"))


class CNN(nn.Sequential):
    """The network of issue 25: Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten, Linear."""

    def __init__(self):
        super().__init__(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 2 * 2, 3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_trained_cnn_round_trips(tmp_path, dtype):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(48, 1, 8, 8)).astype(dtype)
    y = (X[:, 0, :4].sum(axis=(1, 2)) > 0).astype(np.int64) + (X[:, 0, 4:, :4].mean(
        axis=(1, 2)) > 0)
    nn.set_seed(0)
    model = CNN()
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss(), dtype=dtype, seed=0)
    trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=3, verbose=False)
    assert model[1].running_var.data.min() != 1.0  # (the running statistics moved)
    model.save_onnx(tmp_path / "cnn.onnx")  # no input_shape: the trainer's (None, 1, 8, 8)
    inputs, outputs, _ = io_shapes(tmp_path / "cnn.onnx")
    assert inputs == [["batch", 1, 8, 8]] and outputs == [["batch", 3]]
    expected = trainer.predict_outputs(X)
    assert_close(run_onnx(tmp_path / "cnn.onnx", {"input": X}), expected, dtype)
    if dtype == np.float32:
        assert op_types(tmp_path / "cnn.onnx") == [  # (one Reshape: Flatten)
            "Conv", "BatchNormalization", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Reshape",
            "Gemm"]
        fresh = CNN()  # the same weights in a model never compiled: input_shape says the images'
        fresh.load_state_dict(model.state_dict())
        fresh.save_onnx(tmp_path / "fresh.onnx", input_shape=(None, 1, 8, 8))
        assert_close(run_onnx(tmp_path / "fresh.onnx", {"input": X}), expected, dtype)


def test_an_uncompiled_image_model_asks_for_the_image_shape(tmp_path):
    """Issue 25: the first Linear's 64 features used to be traced and input_shape=(None, C, H,
    W) refused; the error now names the Conv2d and the shape to pass."""
    with pytest.raises(ValueError, match=r"the first layer, Conv2d '0', takes images: pass "
                                         r"input_shape=\(None, 1, H, W\)"):
        CNN().save_onnx(tmp_path / "m.onnx")
    with pytest.raises(ValueError, match=r"on inputs of shape \(None, 1, 12, 12\) failed"):
        CNN().save_onnx(tmp_path / "m.onnx", input_shape=(None, 1, 12, 12))
    assert not (tmp_path / "m.onnx").exists()


def test_a_relu_folded_into_a_max_pool_is_kept(tmp_path):
    """A max pool whose geometry block says RELU (nnjit.engine.fusion) gets a Relu after it."""
    from nnjit.export import onnx_export as oe
    from nnjit.export.trace import export_input, trace_model
    from nnjit.ops.pooling import G_RELU

    model = nn.Sequential(nn.MaxPool2d(2), nn.Flatten())
    inp = export_input(model, (None, 2, 4, 4), "test")
    trace = trace_model(model, inp, np.dtype(np.float32), "test")
    (pool,) = [n for n in trace.tape.nodes if n.opcode == Opcode.MAXPOOL2D]
    trace.tape.hyper[pool.aux[0] + G_RELU] = 1.0
    proto = oe._build(onnx, trace, model, np.dtype(np.float32), inp)
    (tmp_path / "m.onnx").write_bytes(proto.SerializeToString())
    X = images((3, 2, 4, 4), np.float32)
    pooled = X.reshape(3, 2, 2, 2, 2, 2).max(axis=(3, 5)).reshape(3, 8)
    np.testing.assert_array_equal(run_onnx(tmp_path / "m.onnx", {"input": X}),
                                  np.maximum(pooled, 0))


@pytest.mark.parametrize("opcode, shown", [(int(Opcode.CSR_DENSE), "CSR_DENSE"),
                                           (250, "OPCODE 250")])
def test_an_op_without_onnx_form_is_refused_naming_the_layer_and_the_op(tmp_path, opcode,
                                                                        shown):
    """Every built-in op a forward records has an ONNX form (CSR_DENSE, sparse graph features,
    is traced dense): a node's opcode is swapped for one without, as a user op family's."""
    from nnjit.export import onnx_export as oe
    from nnjit.export.trace import export_input, trace_model

    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.Flatten(), nn.Linear(3 * 2 * 2, 2))
    inp = export_input(model, (None, 2, 4, 4), "test")
    trace = trace_model(model, inp, np.dtype(np.float32), "test")
    trace.tape.nodes[0].opcode = opcode
    with pytest.raises(NotImplementedError, match=rf"layer '0' \(Conv2d\) records the op "
                                                  rf"{shown}, which has no ONNX export"):
        oe._build(onnx, trace, model, np.dtype(np.float32), inp)


# -- embeddings, cat, columns --------------------------------------------------------------------
class Tabular(nn.Module):
    """Two embedded category columns (``x[:, j]``), joined with ``cat``, and a Linear."""

    def __init__(self):
        super().__init__()
        self.colour = nn.Embedding(5, 3)
        self.size = nn.Embedding(4, 2, padding_idx=0)
        self.both = nn.Embedding(9, 2)
        self.head = nn.Linear(3 + 2 + 2 * 2, 2)

    def forward(self, x):
        return self.head(F.cat([self.colour(x[:, 0]), self.size(x[:, 1]),
                                self.both(x).flatten(1)]))


def categories(rows: int, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, 5, rows), rng.integers(0, 4, rows)], axis=1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_trained_embedding_model_round_trips(tmp_path, dtype):
    X = categories(40)
    y = (X[:, 0] + X[:, 1]) % 2
    nn.set_seed(1)
    model = Tabular()
    trainer = nn.Trainer(model, nn.Adam(lr=0.05), nn.CrossEntropyLoss(), dtype=dtype, seed=0)
    trainer.fit(nn.DataLoader(X, y, batch_size=8), epochs=3, verbose=False)
    model.save_onnx(tmp_path / "tab.onnx")
    graph = onnx.load(str(tmp_path / "tab.onnx")).graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert {"Gather", "Concat", "Slice"} <= set(op_types(tmp_path / "tab.onnx"))
    expected = trainer.predict_outputs(X)
    assert_close(run_onnx(tmp_path / "tab.onnx", {"input": X.astype(np.int64)}), expected, dtype)


def test_an_uncompiled_embedding_model_traces_on_integers(tmp_path):
    model = nn.Sequential(nn.Embedding(6, 3), nn.Flatten(), nn.Linear(6, 2))
    with pytest.raises(ValueError, match=r"Embedding '0', takes integer indices: pass "
                                         r"input_shape=\(None, K\)"):
        model.save_onnx(tmp_path / "m.onnx")
    model.save_onnx(tmp_path / "m.onnx", input_shape=(None, 2))
    X = np.array([[0, 5], [3, 3], [1, 0]])
    expected = nn.Trainer(model, seed=0).predict_outputs(X)
    assert_close(run_onnx(tmp_path / "m.onnx", {"input": X}), expected, np.float32)


class NumAndCat(nn.Module):
    """docs/layers.md's EmbeddingMLP: float features and integer categories, two inputs."""

    def __init__(self):
        super().__init__()
        self.emb0, self.emb1 = nn.Embedding(5, 3), nn.Embedding(4, 2)
        self.fc = nn.Linear(3 + 3 + 2, 2)

    def forward(self, x_num, x_cat):
        return self.fc(F.cat([x_num, self.emb0(x_cat[:, 0]), self.emb1(x_cat[:, 1])]))


def test_a_model_with_float_and_integer_inputs_exports_both(tmp_path):
    X_num, X_cat = images((30, 3), np.float32), categories(30)
    nn.set_seed(2)
    model = NumAndCat()
    with pytest.raises(TypeError, match=r"run the model once on its arrays"):
        model.save_onnx(tmp_path / "m.onnx", input_shape=((None, 3), (None, 2)))
    trainer = nn.Trainer(model, seed=0)
    expected = trainer.predict_outputs((X_num, X_cat))
    model.save_onnx(tmp_path / "m.onnx")
    graph = onnx.load(str(tmp_path / "m.onnx")).graph
    assert [(i.name, i.type.tensor_type.elem_type) for i in graph.input] == [
        ("x_num", onnx.TensorProto.FLOAT), ("x_cat", onnx.TensorProto.INT64)]
    assert_close(run_onnx(tmp_path / "m.onnx", {"x_num": X_num, "x_cat": X_cat}), expected,
                 np.float32)


# -- graph layers -------------------------------------------------------------------------------
def random_graph(n: int, edges: int, seed: int, features=5):
    from nnjit.data.graph import Graph

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    ei = rng.integers(0, n - 1, size=(2, edges))  # node n - 1 has no edges
    ei[:, :2] = [[1, 2], [1, 2]]  # self loops (GCN and GAT replace them by their own)
    ei[:, 2] = ei[:, 3]  # a duplicate edge
    return Graph.from_arrays(x, ei, rng.integers(0, 3, n), train_mask=np.ones(n, bool))


GNNS = {
    "gcn": (nn.GCNConv, {}, ONNX_OPSET),
    "sage_mean": (nn.SAGEConv, {}, ONNX_OPSET),
    "sage_sum": (nn.SAGEConv, {"aggr": "sum"}, ONNX_OPSET),
    "sage_max": (nn.SAGEConv, {"aggr": "max"}, 18),
    "gat": (nn.GATConv, {"heads": 2}, 18),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(GNNS))
def test_a_trained_gnn_round_trips_on_any_graph(tmp_path, name, dtype):
    from nnjit.nn.gnn.net import GraphNet

    conv, options, opset = GNNS[name]
    graph = random_graph(24, 70, seed=0)
    nn.set_seed(2)
    model = GraphNet(conv, [5, 8, 3], nn.ELU(), dropout=0.2, **options)
    trainer = nn.Trainer(model, nn.Adam(lr=0.02), nn.CrossEntropyLoss(), dtype=dtype, seed=0)
    trainer.fit(graph, epochs=3, verbose=False)
    path = tmp_path / "gnn.onnx"
    model.save_onnx(path)
    inputs, outputs, found = io_shapes(path)
    assert inputs == [["num_nodes", 5], [2, "num_edges"]]
    assert outputs == [["num_nodes", 3]] and found == opset
    assert {"Gather", "ScatterElements"} <= set(op_types(path))
    feeds = {"x": graph.x.astype(dtype), "edge_index": graph.edge_index}
    assert_close(run_onnx(path, feeds), trainer.predict_outputs(graph), dtype)
    other = random_graph(17, 40, seed=5)  # another graph: the file computes its structure
    feeds = {"x": other.x.astype(dtype), "edge_index": other.edge_index}
    assert_close(run_onnx(path, feeds), trainer.predict_outputs(other), dtype)
    # Hundreds of edges into each node, run repeatedly on onnxruntime's default threads: a
    # scatter whose threads race on repeated targets (ScatterND's) gives wrong, varying sums.
    crowded = random_graph(40, 200_000, seed=7)
    feeds = {"x": crowded.x.astype(dtype), "edge_index": crowded.edge_index}
    expected = trainer.predict_outputs(crowded)
    for _ in range(3):
        assert_close(run_onnx(path, feeds), expected, dtype)


def test_a_gnn_on_sparse_features_takes_them_dense(tmp_path):
    """A model trained on bag-of-words features (nnjit's sparse first layer) exports with a
    dense "x" input."""
    import scipy.sparse as sp

    from nnjit.data.graph import Graph
    from nnjit.nn.gnn.net import GraphNet

    dense = random_graph(20, 50, seed=3, features=12)
    x = sp.random(20, 12, density=0.3, format="csr", random_state=0, dtype=np.float32)
    graph = Graph.from_arrays(x, dense.edge_index, dense.y, train_mask=dense.train_mask)
    for conv in (nn.GCNConv, nn.SAGEConv):
        nn.set_seed(5)
        model = GraphNet(conv, [12, 6, 3], nn.ReLU(), dropout=0.3)
        trainer = nn.Trainer(model, nn.Adam(lr=0.02), nn.CrossEntropyLoss(), seed=0)
        trainer.fit(graph, epochs=2, verbose=False)
        model.save_onnx(tmp_path / "m.onnx")
        feeds = {"x": x.toarray(), "edge_index": graph.edge_index}
        assert_close(run_onnx(tmp_path / "m.onnx", feeds), trainer.predict_outputs(graph),
                     np.float32)


def test_a_gat_with_averaged_heads_exports(tmp_path):
    class Gat(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.GATConv(5, 4, heads=3, concat=False, add_self_loops=False)

        def forward(self, x, edges):
            return self.conv(x, edges)

    graph = random_graph(12, 30, seed=1)
    nn.set_seed(4)
    model = Gat()
    model.save_onnx(tmp_path / "gat.onnx", input_shape=(None, 5))
    expected = nn.Trainer(model, seed=0).predict_outputs(graph)
    feeds = {"x": graph.x, "edge_index": graph.edge_index}
    assert_close(run_onnx(tmp_path / "gat.onnx", feeds), expected, np.float32)


def test_a_graph_model_takes_node_features_only_as_input_shape(tmp_path):
    from nnjit.nn.gnn.net import GraphNet

    with pytest.raises(ValueError, match=r"graph model: input_shape is \(num_nodes, "
                                         r"n_features\)"):
        GraphNet(nn.GCNConv, [5, 3], nn.ReLU()).save_onnx(tmp_path / "m.onnx",
                                                          input_shape=(None, 5, 2))
