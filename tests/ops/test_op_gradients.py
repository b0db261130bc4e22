"""Every registered op, forward and backward, through the interpreter (tests/ops/op_checker.py).

The cases come from the registry alone: for each opcode its spec's signature gives the input
shapes (named dims drawn small by hypothesis, each optional input present and absent, each edge
set a graph op's recorder takes), ``input_domain`` the values and ``grad_inputs`` the inputs to
differentiate. An op without a reference must name the test that covers it instead. The last
tests prove the check can fail: a throwaway family with a wrong reference, a wrong backward, a
wrong shape rule and a reference note naming no test is reported op by op.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnjit as nn
from nnjit.ops import OpFamily, OpSpec, registry
from nnjit.ops.family import Registry
from nnjit.tape import tape as tape_module
from tests.ops.op_checker import (
    OpCheckError,
    check_op,
    hypothesis_draw,
    seeded_draw,
    variants,
)

LOSS_FAMILY = "losses"  # its ops seed the gradient: they run as the trainer's loss


def is_loss(opcode: int) -> bool:
    return registry.family_of(opcode).name == LOSS_FAMILY


# (opcode, spec, variant) of every registered op that has a reference; the others
# (the registry as collected: families that other tests register later are checked there)
REGISTERED = registry.all_specs()
CASES = [(op, spec, v) for op, spec in REGISTERED.items() if spec.reference is not None
         for v in variants(spec)]
NOTED = [(op, spec) for op, spec in REGISTERED.items() if spec.reference is None]


def check_registry(reg, seeds=(0, 1)) -> dict[str, str]:
    """Run the check on every op of ``reg`` (seeded draws); ``{op name: failure}``."""
    failures = {}
    for op, spec in reg.all_specs().items():
        for variant in variants(spec):
            for seed in seeds:
                try:
                    check_op(spec, seeded_draw(seed), variant,
                             loss=reg.family_of(op).name == LOSS_FAMILY)
                except OpCheckError as e:
                    failures.setdefault(spec.name, str(e))
    return failures


def test_every_registered_op_is_checked_graph_ops_included():
    checked = {op for op, _, _ in CASES}
    assert checked | {op for op, _ in NOTED} == set(REGISTERED)
    graph_ops = {op for op, spec in REGISTERED.items() if spec.graph}
    assert graph_ops and graph_ops <= checked, "every graph op has a reference"


@pytest.mark.parametrize(("opcode", "spec", "variant"), CASES,
                         ids=[f"{s.name.lower()}-{v}".strip("-") for _, s, v in CASES])
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_op_matches_its_reference_and_finite_differences(opcode, spec, variant, data):
    check_op(spec, hypothesis_draw(data), variant, loss=is_loss(opcode))


@pytest.mark.parametrize(("opcode", "spec"), NOTED, ids=[s.name.lower() for _, s in NOTED])
def test_op_without_reference_names_the_test_that_covers_it(opcode, spec):
    assert check_op(spec, seeded_draw(0)) == "reference_note"


# ------------------------------------------------------------------------------------------------
# the check can fail
# ------------------------------------------------------------------------------------------------


class Double(nn.Op):
    """2 x as a Python op; ``wrong=True`` makes its backward 3 dy instead of 2 dy."""

    def __init__(self, tape, x, wrong=False):
        super().__init__()
        self.x = x
        self.wrong = wrong
        self.out = tape.alloc_tensor(x.rows, x.cols, True)

    def forward(self):
        np.multiply(self.x.data, 2.0, out=self.out.data)

    def backward(self):
        self.x.grad[:] += self.out.grad * (3.0 if self.wrong else 2.0)


def double(x):
    return Double(x.tape, x).out


def double_wrong_backward(x):
    return Double(x.tape, x, wrong=True).out


def edge_double(edges, scores, *, csr="raw"):
    return double(scores)


def edge_double_wrong_backward(edges, scores, *, csr="raw"):
    return double_wrong_backward(scores)


def _never(op, i, ctx):  # (the throwaway ops record Python ops: no dispatcher ever runs)
    return False


THROWAWAY = [
    OpSpec("TWICE", 1, "(B,F)->(B,F)", lambda x: 2.0 * x, double, grad_inputs=(0,)),
    OpSpec("TWICE_WRONG_REFERENCE", 1, "(B,F)->(B,F)", lambda x: 2.0 * x + 1e-6, double,
           grad_inputs=(0,)),
    OpSpec("TWICE_WRONG_BACKWARD", 1, "(B,F)->(B,F)", lambda x: 2.0 * x, double_wrong_backward,
           grad_inputs=(0,)),
    OpSpec("TWICE_WRONG_SHAPE_RULE", 1, "(B,F)->(B,1)", lambda x: 2.0 * x[:, :1], double,
           grad_inputs=(0,)),
    OpSpec("TWICE_UNTESTED", 1, "(B,F)->(B,F)", None, double, grad_inputs=(0,),
           reference_note="tested by tests/ops/test_nowhere.py"),
    # on a graph's edges: the check reads edge rows out through a weighted propagation
    OpSpec("EDGE_TWICE", 1, "(E,H)->(E,H)", lambda graph, s: 2.0 * s, edge_double,
           grad_inputs=(0,), graph=True),
    OpSpec("EDGE_TWICE_WRONG_BACKWARD", 1, "(E,H)->(E,H)", lambda graph, s: 2.0 * s,
           edge_double_wrong_backward, grad_inputs=(0,), graph=True),
]
SOUND = {"TWICE", "EDGE_TWICE"}


@pytest.fixture
def throwaway_registry(monkeypatch):
    """A registry holding only the throwaway family (the tape's op table restored after)."""
    monkeypatch.setattr(tape_module, "OPS", dict(tape_module.OPS))
    monkeypatch.setattr(tape_module, "OPCODE_OF", dict(tape_module.OPCODE_OF))
    reg = Registry()
    reg.register(OpFamily("throwaway", THROWAWAY, _never, _never, first_opcode=5000))
    return reg


def test_the_check_reports_each_broken_op_of_a_throwaway_family(throwaway_registry):
    failures = check_registry(throwaway_registry)
    assert not SOUND & set(failures), failures  # the sound ops pass
    assert "forward differs from its reference" in failures["TWICE_WRONG_REFERENCE"]
    assert "gradient of in0 differs from central finite differences" in \
        failures["TWICE_WRONG_BACKWARD"]
    assert "the signature '(B,F)->(B,1)' says" in failures["TWICE_WRONG_SHAPE_RULE"]
    assert "tests/ops/test_nowhere.py, which does not exist" in failures["TWICE_UNTESTED"]
    assert "gradient of in0 differs" in failures["EDGE_TWICE_WRONG_BACKWARD"]
    assert set(failures) == {s.name for s in THROWAWAY} - SOUND


def test_an_op_without_reference_or_note_is_refused():
    with pytest.raises(ValueError, match="no reference"):
        OpSpec("TWICE_BARE", 1, "(B,F)->(B,F)", None, double, grad_inputs=(0,))
    # and were one built anyway, the check reports it
    bare = copy.copy(THROWAWAY[0])
    object.__setattr__(bare, "reference", None)
    with pytest.raises(OpCheckError, match="TWICE: no reference"):
        check_op(bare, seeded_draw(0))
