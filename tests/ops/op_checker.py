"""The registry-driven op check: one op spec in, a verdict out (``check_op``).

Everything an op's check needs comes from its :class:`nnjit.ops.OpSpec`: the input shapes from
its ``signature`` (named dims drawn small, optional inputs present or absent), the values from
``input_domain``, the op itself from ``recorder``, the expected forward from ``reference`` and
the inputs to differentiate from ``grad_inputs``. The op runs through the real interpreter: a
tiny model records it on parameters (so the interpreter computes their gradients) and a float64
``Trainer`` runs its GRADIENT task; forward outputs are compared with the reference and gradients
with central finite differences of the trainer's loss.

Graph ops (``spec.graph``) run on a drawn graph (isolated nodes, duplicate edges, self loops)
with every edge set their recorder accepts (``csr="raw"`` / ``"loops"``, and the sparse feature
matrix for an input shaped ``(Z, 1)``); their output is read out to two logits per node (node
rows through a dense layer, edge rows first through a weighted propagation) for the graph's
cross-entropy. Losses run as the trainer's loss. Ops whose shapes follow from their geometry
(convolution, pooling) draw a consistent case through ``spec.geometry`` (``OpGeometry``: dims,
recorder keywords, input views such as ``(C, H, W)``, the output's dims).

``check_op`` raises :class:`OpCheckError` naming the op and what failed; it takes its random
choices from a ``draw(lo, hi) -> int`` function, so hypothesis (``hypothesis_draw``) or a seeded
generator (``seeded_draw``) can drive it.
"""

from __future__ import annotations

import inspect
import itertools
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

import nnjit as nn
from nnjit.losses import Loss
from nnjit.ops.graph_reference import OpGraph, with_self_loops
from nnjit.ops.spec import dim_names
from tests.helpers import finite_difference_gradients

REPO = Path(__file__).resolve().parents[2]
FORWARD_TOL = {"rtol": 1e-10, "atol": 1e-12}
GRADIENT_TOL = {"rtol": 1e-5, "atol": 1e-7}
# The graph ops' dims (nnjit/ops/spec.py): the graph fixes N nodes, E edges of the op's CSR and
# Z non-zeros of the sparse features (an input shaped (Z, 1) is those non-zeros); H is the
# number of heads, which the recorders also take as the keyword ``heads``.
FEATURES_SHAPE = ("Z", "1")
GRAPH_HYPER_DIMS = {"heads": "H"}
EDGE_SETS = ("raw", "loops")
MAX_DIM = 3
MAX_BATCH = 4


class OpCheckError(AssertionError):
    """An op failed its check (the message names the op and the failing part)."""


def hypothesis_draw(data):
    """``draw(lo, hi)`` backed by hypothesis' ``data`` (shrinks to small dims and seeds)."""
    from hypothesis import strategies as st

    return lambda lo, hi: data.draw(st.integers(lo, hi))


def seeded_draw(seed: int):
    """``draw(lo, hi)`` backed by a seeded NumPy generator."""
    rng = np.random.default_rng(seed)
    return lambda lo, hi: int(rng.integers(lo, hi + 1))


# ------------------------------------------------------------------------------------------------
# what the spec says
# ------------------------------------------------------------------------------------------------


def check_reference_note(spec) -> None:
    """An op without a reference names the test that covers it instead: ``tests/....py`` (and
    ``::test_name``) that exists."""
    note = spec.reference_note or ""
    m = re.search(r"(tests/[\w/]+\.py)(?:::(\w+))?", note)
    if m is None:
        raise OpCheckError(f"{spec.name}: no reference, and its reference_note {note!r} names "
                           "no test file (tests/...py[::test_name]) that covers it instead")
    path = REPO / m.group(1)
    if not path.is_file():
        raise OpCheckError(f"{spec.name}: reference_note names {m.group(1)}, which does not exist")
    if m.group(2) and not re.search(rf"^def {m.group(2)}\(", path.read_text(), re.M):
        raise OpCheckError(f"{spec.name}: reference_note names {m.group(1)}::{m.group(2)}, "
                           "which has no such test")


def as_rows(a):
    """A copy of ``a`` as a slot holds it: one row per sample (an image (B, C, H, W) is
    (B, C*H*W))."""
    return a.reshape(a.shape[0], -1).copy() if a.ndim > 2 else a.copy()


def read_as(tensor, shape):
    """``tensor`` read with ``shape``'s per-row dims (a no-op view) when the signature gives an
    input more than two dimensions (``(B,C,H,W)``: an image)."""
    return tensor.view(-1, *shape[1:]) if len(shape) > 2 else tensor


def recorder_takes(spec, name: str) -> bool:
    return name in inspect.signature(spec.recorder).parameters


def nudge(a, away=0.05):
    """Shift values off the kinks at 0 (relu, leaky relu, elu) so finite differences are valid,
    keeping distinct values distinct (a tie would make a max's finite difference split)."""
    return np.where(np.abs(a) < away, a + np.where(a < 0, -away, away), a)


# ------------------------------------------------------------------------------------------------
# drawing a case
# ------------------------------------------------------------------------------------------------


class Variant(NamedTuple):
    """What every check of an op covers: each optional input present and absent, each edge set."""

    present: tuple[bool, ...]
    csr: str | None

    def __str__(self) -> str:
        absent = [str(k) for k, p in enumerate(self.present) if not p]
        return "-".join([self.csr or "", "without" + ",".join(absent) if absent else ""]).strip("-")


def variants(spec) -> list[Variant]:
    """Every combination of optional inputs present/absent and edge set the recorder takes."""
    if spec.reference is None or spec.recorder is None:
        return [Variant((), None)]
    choices = [(True, False) if opt else (True,) for opt in spec.optional]
    csrs = EDGE_SETS if spec.graph and recorder_takes(spec, "csr") else (None,)
    return [Variant(tuple(p), c) for c in csrs for p in itertools.product(*choices)]


class Case:
    """One drawn instance of an op: its graph (graph ops), dims, hyperparameters and inputs."""

    def __init__(self, spec, draw, variant: Variant, loss: bool):
        self.spec = spec
        self.loss = loss
        self.csr = variant.csr
        self.present = list(variant.present)
        self.rng = np.random.default_rng(draw(0, 2**32 - 1))
        self.graph = self.data = None  # the op's OpGraph, and the nn.Graph the trainer runs on
        self.dims = self._draw_graph(draw) if spec.graph else {}
        for name in dim_names(spec.signature):
            if name not in self.dims:
                self.dims[name] = draw(1, MAX_BATCH if name == "B" else MAX_DIM)
        self.hyper = {}
        dim_of = GRAPH_HYPER_DIMS if spec.graph else {}
        for h in spec.hyper:
            value = self.dims.get(dim_of.get(h, h), spec.sample_hyper[h])
            if isinstance(value, (tuple, list)):  # alternatives: draw one
                value = value[draw(0, len(value) - 1)]
            self.hyper[h] = value
        if spec.derive_dims is not None:  # output dims that follow from the geometry (pools)
            self.dims = dict(spec.derive_dims(dict(self.dims), dict(self.hyper)))
        # an op whose shapes follow from its geometry (convolution) draws a consistent case
        # itself: dims, recorder keywords, input views and the output's per-row dims
        self.views, self.out_dims = {}, None
        if spec.geometry is not None:
            geometry = spec.geometry(draw, dict(self.dims))
            self.dims.update(geometry.dims)
            self.hyper.update(geometry.hyper)
            self.views, self.out_dims = dict(geometry.views), geometry.out_dims
        in_shapes, self.out_shape = spec.shapes(self.dims)
        # values a (low, high) domain cannot describe (class indices...) come from the spec
        sampler = getattr(spec, "sample_inputs", None)
        special = sampler(self.rng, dict(self.dims)) if sampler is not None else {}
        self.inputs = []
        for k, shape in enumerate(in_shapes):
            if not self.present[k]:
                self.inputs.append(None)
            elif self.is_features(k):
                self.inputs.append(self.data.x.data.astype(np.float64).reshape(-1, 1))
            elif k in special:
                value = np.asarray(special[k])  # integers (indices) stay integers: int_inputs
                integer = k in getattr(spec, "int_inputs", ()) and value.dtype.kind in "iu"
                value = value.astype(np.int64 if integer else np.float64)
                if value.shape != tuple(shape):
                    raise OpCheckError(f"{spec.name}: sample_inputs gave input {k} shape "
                                       f"{value.shape}, the signature {spec.signature!r} says "
                                       f"{tuple(shape)} for dims {self.dims}")
                self.inputs.append(value)
            else:
                self.inputs.append(nudge(self.rng.uniform(*spec.input_domain, size=shape)))

    def is_features(self, k: int) -> bool:
        """Input k is the graph's sparse feature non-zeros (not a parameter: the graph's data)."""
        return self.spec.graph and tuple(self.spec.inputs[k]) == FEATURES_SHAPE

    def _draw_graph(self, draw) -> dict[str, int]:
        """A small graph (isolated nodes likely, duplicate edges and self loops allowed) with
        sparse features when the op reads them; returns the dims it fixes."""
        n, e = draw(1, 5), draw(1, 8)
        hot = draw(1, n)  # targets from a subset of the nodes: the others are isolated
        src = self.rng.integers(0, n, e)
        dst = self.rng.integers(0, hot, e)
        dims = {"N": n}
        x = np.zeros((n, 1))
        sparse = any(self.is_features(k) for k in range(self.spec.arity))
        if sparse:
            dims["F"] = draw(1, MAX_DIM)
            dense = self.rng.uniform(*self.spec.input_domain, size=(n, dims["F"]))
            dense[self.rng.random(dense.shape) < 0.4] = 0.0
            dense[0, 0] = 1.5  # at least one non-zero
            x = sp.csr_matrix(dense)
        self.data = nn.Graph.from_arrays(x, np.stack([src, dst]), self.rng.integers(0, 2, n))
        features = None
        if sparse:
            xs = self.data.x
            features = (xs.indptr.astype(np.int64), xs.indices.astype(np.int64), xs.shape[1])
            dims["Z"] = int(xs.nnz)
        if self.csr == "loops":
            src, dst = with_self_loops(src, dst, n)
        self.graph = OpGraph.from_edges(src, dst, n, features=features)
        dims["E"] = self.graph.num_edges
        return dims

    def reference(self):
        args = [None if a is None else a.copy().reshape(len(a), *self.views.get(k, a.shape[1:]))
                for k, a in enumerate(self.inputs)]
        if self.spec.graph:
            return self.spec.reference(self.graph, *args, **self.hyper)
        return self.spec.reference(*args, **self.hyper)

    def describe(self) -> str:
        parts = [f"dims {self.dims}", f"hyper {self.hyper}", f"inputs present {self.present}"]
        if self.views:
            parts.append(f"input views {self.views}")
        if self.graph is not None:
            parts.append(f"edge set {self.csr}, CSR indptr {self.graph.indptr.tolist()} "
                         f"src {self.graph.src.tolist()}")
        return "; ".join(parts)


# ------------------------------------------------------------------------------------------------
# the models
# ------------------------------------------------------------------------------------------------


class Probe(nn.Module):
    """Records ``case``'s op on parameters (inputs in ``grad_inputs``) and constants (the
    others), remembering its output tensor; graph ops add a read-out to two logits per node."""

    def __init__(self, case: Case):
        super().__init__()
        self.case = case
        spec = case.spec
        for k, a in enumerate(case.inputs):
            if a is not None and k in spec.grad_inputs:
                setattr(self, f"in{k}", nn.Parameter(as_rows(a)))
        if spec.graph:
            width = case.out_shape[1]
            self.readout = nn.Parameter(case.rng.normal(size=(2, width)))
        self.op_output = None

    def _inputs(self, tape, features):
        case = self.case
        ins = []
        for k, a in enumerate(case.inputs):
            if a is None:
                ins.append(None)
            elif case.is_features(k):
                ins.append(features)  # the graph's sparse features (their non-zeros)
            elif hasattr(self, f"in{k}"):
                ins.append(read_as(tape.parameter(getattr(self, f"in{k}"), f"in{k}"), a.shape))
            else:  # a constant; an integer array is an integer slot (the spec's int_inputs)
                ins.append(read_as(tape.constant(as_rows(a), f"in{k}",
                                                 integer=a.dtype.kind in "iu"), a.shape))
            if k in case.views:  # (an image read as (C, H, W), a kernel as (C, KH, KW))
                ins[-1] = ins[-1].view(-1, *case.views[k])
        return ins

    def forward(self, x, edges=None):
        tape, spec, case = x.tape, self.case.spec, self.case
        if case.loss:  # the trainer's loss is the op, on the prediction in0
            return tape.parameter(self.in0, "in0")
        ins = self._inputs(tape, x)
        kwargs = dict(case.hyper)
        if case.csr is not None:
            kwargs["csr"] = case.csr
        out = spec.recorder(edges, *ins, **kwargs) if spec.graph else spec.recorder(*ins, **kwargs)
        self.op_output = out
        if not spec.graph:
            return out
        if spec.output[0] == "E":  # edge rows: a weighted propagation brings them to the nodes
            ones = tape.constant(np.ones((case.dims["N"], out.cols)), "readout.x")
            out = edges.propagate(ones, case.csr or "raw", weights=out)
        return tape.dense(out, tape.parameter(self.readout, "readout"), None)


class SpecLoss(Loss):
    """The trainer's loss recorded by a loss op's recorder (targets passed through)."""

    def __init__(self, spec, hyper):
        self.spec = spec
        self.hyper = hyper
        self.is_classification = False

    def record(self, tape, prediction, target):
        return self.spec.recorder(prediction, target, **self.hyper)

    def prepare_targets(self, y, n_outputs, dtype, where):
        return np.ascontiguousarray(y, dtype=dtype)


# ------------------------------------------------------------------------------------------------
# the check
# ------------------------------------------------------------------------------------------------


def check_op(spec, draw, variant: Variant | None = None, *, loss: bool = False) -> str:
    """Check one op on one drawn case (of ``variant``, else its first); returns what was
    checked ("reference_note" or "checked"), raises :class:`OpCheckError`.

    ``loss``: the op is a loss (it seeds the gradient, so it runs as the trainer's loss rather
    than inside the model)."""
    if spec.reference is None:
        check_reference_note(spec)
        return "reference_note"
    if spec.recorder is None:
        raise OpCheckError(f"{spec.name}: no recorder, so nothing can put it on a tape")
    case = Case(spec, draw, variant or variants(spec)[0], loss)
    try:
        return _run(spec, case)
    except OpCheckError as e:
        raise OpCheckError(f"{e}\n  case: {case.describe()}") from None
    except Exception as e:  # the recorder, the trainer or the reference refused the case
        raise OpCheckError(f"{spec.name}: {type(e).__name__}: {e}\n  case: {case.describe()}"
                           ) from e


def _run(spec, case: Case) -> str:
    model = Probe(case)
    if case.loss:
        loss = SpecLoss(spec, case.hyper)
        X, Y = np.zeros((case.inputs[0].shape[0], 1)), case.inputs[1]
    elif spec.graph:
        loss = nn.CrossEntropyLoss()
        X, Y = case.data, None
    else:
        loss = nn.MSELoss()
        X = np.zeros((case.out_shape[0], 1))
        Y = case.rng.normal(size=case.out_shape).reshape(case.out_shape[0], -1)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), loss, dtype=np.float64, seed=0)
    if not case.loss:  # trace (no targets needed) to hold the op's output to the shape rule
        trainer.predict_outputs(X)
        # the slot, (rows, cols), and, for a signature with image dims, the tensor's shape
        out, want = model.op_output, tuple(case.out_shape)
        flat = case.out_dims is not None or len(want) <= 2
        shape = (int(out.rows), out.cols) if flat else out.shape
        if tuple(int(d) for d in shape) != want:
            raise OpCheckError(f"{spec.name}: output shape {shape}, the signature "
                               f"{spec.signature!r} says {tuple(case.out_shape)}")
        if case.out_dims is not None and out.dims != tuple(case.out_dims):
            raise OpCheckError(f"{spec.name}: output dims {out.dims}, its geometry says "
                               f"{tuple(case.out_dims)}")
    grads = trainer.gradients(X, Y)
    expected = case.reference()
    if case.loss:
        got = trainer.evaluate(X, Y)["loss"]
        if not np.isclose(got, float(expected), **FORWARD_TOL):
            raise OpCheckError(f"{spec.name}: loss {got!r} != reference {float(expected)!r}")
    else:  # the forward of the gradient run (training mode)
        expected = np.asarray(expected, np.float64)
        got = np.array(model.op_output.data, copy=True)
        if case.out_dims is not None:  # (rows, *out_dims): compared as the slot's rows
            expected = expected.reshape(len(expected), -1)
        elif expected.ndim > 2 and got.size == expected.size:  # an image output held as rows
            got = got.reshape(expected.shape)
        if expected.shape != got.shape:
            raise OpCheckError(f"{spec.name}: the reference returned shape {expected.shape}, the "
                               f"op {got.shape}")
        try:
            np.testing.assert_allclose(got, expected, **FORWARD_TOL)
        except (AssertionError, ValueError) as e:
            raise OpCheckError(f"{spec.name}: forward differs from its reference: {e}") from None
    numeric = finite_difference_gradients(trainer, model, X, Y)
    for name in grads:
        try:
            np.testing.assert_allclose(grads[name], numeric[name], **GRADIENT_TOL)
        except AssertionError as e:
            raise OpCheckError(f"{spec.name}: gradient of {name} differs from central finite "
                               f"differences: {e}") from None
    return "checked"
