"""The one tracer (nnjit.nn.trace) and the layout service (nnjit.train.layout_service): every
layout decision walks the model once and traces it at most once (none on a program-cache hit),
binds the parameters into the new arena, and every part of nnjit that records a model (Trainer,
export, summary, nnjit.sklearn) goes through them."""

import pathlib
import re

import numpy as np
import pytest

import nnjit as nn
from nnjit.data.inputs import InputSpec
from nnjit.engine import program_cache
from nnjit.train import layout_service
from nnjit.train.layout_service import Layout
from nnjit.nn import trace as tracer

F64 = np.float64
rng = np.random.default_rng(0)
X = rng.normal(size=(24, 4))
Y = (X[:, 0] > 0).astype(np.int64)


class Counted(nn.Module):
    """A user's model (no structure key: traced at every layout) that counts its traces."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 6)
        self.out = nn.Linear(6, 2)
        self.traces = 0

    def forward(self, x):
        self.traces += 1
        return self.out(nn.functional.relu(self.hidden(x)))


@pytest.fixture
def walks(monkeypatch):
    """How many times the layout service walked a model and traced one (the real walk and
    trace, counted)."""
    count = {"walks": 0, "traces": 0}
    walk, trace = layout_service.walk_model, layout_service.trace

    def counted_walk(model):
        count["walks"] += 1
        return walk(model)

    def counted_trace(*args, **kwargs):
        count["traces"] += 1
        return trace(*args, **kwargs)

    monkeypatch.setattr(layout_service, "walk_model", counted_walk)
    monkeypatch.setattr(layout_service, "trace", counted_trace)
    return count


def _mlp():
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))


def test_a_first_fit_walks_once_and_traces_once(walks):
    program_cache.clear()
    model = Counted()
    nn.Trainer(model, dtype=F64, seed=0).fit(X, Y, epochs=1, batch_size=8, verbose=False)
    assert (walks["walks"], model.traces) == (1, 1)


def test_a_cache_hit_walks_once_and_never_traces(walks):
    program_cache.clear()
    nn.Trainer(_mlp(), dtype=F64, seed=0).fit(X, Y, epochs=1, batch_size=8, verbose=False)
    assert (walks["walks"], walks["traces"]) == (1, 1)
    hits = program_cache.stats["hits"]
    model = _mlp()
    trainer = nn.Trainer(model, dtype=F64, seed=0)
    trainer.fit(X, Y, epochs=1, batch_size=8, verbose=False)
    assert program_cache.stats["hits"] == hits + 1
    assert (walks["walks"], walks["traces"]) == (2, 1)
    # the parameters were bound into the new arena
    assert all(p.data.base is trainer.program.values for p in model.parameters())


def test_each_decision_of_a_trainer_walks_once_and_traces_at_most_once(walks):
    model = Counted()
    trainer = nn.Trainer(model, dtype=F64, seed=0)
    trainer.predict(X)  # an inference layout (batches of up to 256 rows): one decision
    assert (walks["walks"], model.traces) == (1, 1)
    trainer.predict(X[:5])  # runs on it: no decision
    assert (walks["walks"], model.traces) == (1, 1)
    trainer.fit(X, Y, epochs=1, batch_size=8, verbose=False)  # a fit's layout replaces it
    assert (walks["walks"], model.traces) == (2, 2)
    trainer.gradients(X, Y)  # 24 rows as one batch: the layout grows
    assert (walks["walks"], model.traces) == (3, 3)
    trainer.fit(X, Y, epochs=1, batch_size=8, verbose=False)  # fits in it: no decision
    assert (walks["walks"], model.traces) == (3, 3)


def test_a_graph_model_is_walked_once_and_traced_once(walks):
    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.GCNConv(5, 3)
            self.traces = 0

        def forward(self, x, edges):
            self.traces += 1
            return self.conv(x, edges)

    g = np.random.default_rng(1)
    graph = nn.Graph.from_arrays(g.normal(size=(20, 5)), g.integers(0, 20, (2, 40)),
                                 g.integers(0, 3, 20))
    model = GCN()
    nn.Trainer(model, seed=0).fit(graph, epochs=1, verbose=False)
    assert (walks["walks"], model.traces) == (1, 1)


def test_the_layout_service_alone_gives_a_bound_program(walks):
    program_cache.clear()
    model = Counted()
    layout = Layout(model, nn.MSELoss(), (InputSpec((4,)),), 8, F64)
    assert layout.output_cols() == 2 and model.traces == 1
    program = layout.program(2, seed=3)
    assert model.traces == 1 and walks["walks"] == 1  # the output width's trace is the program's
    assert program.max_batch == 8 and program.target_cols == 2 and program.dtype == F64
    assert set(layout.param_spans) == {"hidden.weight", "hidden.bias", "out.weight", "out.bias"}
    off, size = layout.param_spans["out.weight"]
    np.testing.assert_array_equal(program.values[off : off + size],
                                  model.out.weight.data.ravel())
    assert model.out.weight.data.base is program.values


def test_rebind_takes_the_parameters_back_from_another_program():
    model = _mlp()
    first = Layout(model, nn.MSELoss(), (InputSpec((4,)),), 8, F64)
    a = first.program(2, seed=0)
    assert layout_service.rebind(a, first.walk) is None  # (still bound)
    b = Layout(model, nn.MSELoss(), (InputSpec((4,)),), 16, F64).program(2, seed=0)
    assert model[0].weight.data.base is b.values
    spans = layout_service.rebind(a, first.walk)
    assert spans == first.param_spans and model[0].weight.data.base is a.values


def test_summary_and_export_trace_once_and_lay_nothing_out(tmp_path):
    pytest.importorskip("onnx")
    model = Counted()
    stats = dict(program_cache.stats)
    text = model.summary_str(input_shape=(None, 4))
    assert model.traces == 1 and re.search(r"^out +Linear +\(None, 2\)", text, re.M)
    model.save_onnx(tmp_path / "m.onnx", input_shape=(None, 4))
    assert model.traces == 2
    assert model._trainer is None and program_cache.stats == stats  # (nothing laid out)


def test_sklearn_fits_lay_out_through_the_service(walks):
    pytest.importorskip("sklearn")
    from nnjit.sklearn import MLPClassifier

    program_cache.clear()
    MLPClassifier((5,), max_iter=2, random_state=0).fit(X, Y)
    assert (walks["walks"], walks["traces"]) == (1, 1)
    hits = program_cache.stats["hits"]
    # the same structure: a hit, from the structure's plan (nnjit.sklearn.compiled_mlp), so no
    # model is built or walked
    MLPClassifier((5,), max_iter=2, random_state=1).fit(X, Y)
    assert (walks["walks"], walks["traces"]) == (1, 1)
    assert program_cache.stats["hits"] == hits + 1


def test_summary_errors_name_summary_and_keep_the_arity_message():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, a, b):
            return self.fc(a) + self.fc(b)

    with pytest.raises(tracer.ForwardArityError,
                       match=r"^summary: Two\.forward\(a, b\) takes 2 inputs, the data has one "
                             r"array"):
        Two().summary_str(input_shape=(None, 4))


PACKAGE = pathlib.Path(nn.__file__).parent


def test_only_the_tracer_records_a_forward_or_names_modules():
    """What the tracer alone does, checked in the source: making a tape, recording on it,
    setting module paths and checking forward's arity."""
    rule = re.compile(r"\bTape\(|\.recording\(\)|\[\"_path\"\]\s*=|check_forward_arity\(")
    found = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                   if rule.search(path.read_text()))
    assert found == ["nn/trace.py"]
