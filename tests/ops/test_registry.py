"""The op registry holds "adding an op is 3 places, 1-2 files": every registered op has its spec
(parsed signature, reference or a note, recorder), sits in its family's opcode block, and its
family's dispatchers handle it, in the compiled loop, driven by the specs alone (no hand-kept
list of ops here: a new op in a core family is picked up, and fails here without its branch).
"""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.engine.status import UnknownOpcodeError
from nnjit.ops import OpFamily, OpSpec, dispatcher, parse_signature, registry
from nnjit.ops.family import Registry
from nnjit.ops.opcodes import BUILTIN_FAMILIES, SPECS, Opcode
from nnjit.ops.spec import dim_names, optional_inputs
from nnjit.tape import tape as tape_module
from nnjit.tape.records import R_OPCODE
from tests.ops.op_checker import as_rows, read_as, seeded_draw

ALL = sorted(registry.all_specs().items())


def test_builtin_specs_are_the_registry_and_the_enum():
    builtin = {op: spec for fam in BUILTIN_FAMILIES for op, spec in zip(fam.block, fam.specs)}
    assert set(builtin) == set(Opcode) == set(SPECS)
    for op, spec in builtin.items():
        assert Opcode(op).name == spec.name and SPECS[Opcode(op)] is spec
        assert registry.spec(op) is spec
    # the numbers records and saved programs rely on
    assert (Opcode.DENSE, Opcode.ADD, Opcode.RELU, Opcode.DROPOUT, Opcode.SOFTMAX_CE,
            Opcode.PYTHON_OP, Opcode.SPMM) == (1, 10, 20, 30, 40, 60, 70)


@pytest.mark.parametrize("opcode, spec", ALL, ids=[s.name.lower() for _, s in ALL])
def test_every_registered_op_is_complete(opcode, spec):
    family = registry.family_of(opcode)
    assert opcode in family.block and family.specs[opcode - family.block.start] is spec
    inputs, output = parse_signature(spec.signature)
    assert len(inputs) == spec.arity and output
    assert spec.reference is not None or spec.reference_note
    assert all(0 <= k < spec.arity for k in spec.grad_inputs)
    assert set(spec.hyper) <= set(spec.sample_hyper)
    if spec.name != "PYTHON_OP":  # (recorded by Tape.python_op for an nn.Op)
        assert callable(spec.recorder), f"{spec.name}: no recorder"
    assert tape_module.OPS[opcode].name == spec.name


class Probe(nn.Module):
    """Applies one op's recorder to parameters shaped by its signature (integer arrays, an
    ``int_inputs`` input's sample, as integer constants)."""

    def __init__(self, spec, arrays, dims=None, geometry=None):
        super().__init__()
        self.spec = spec
        self.dims = dims or {}
        self.arrays = arrays
        self.geometry = geometry
        for k, a in enumerate(arrays):
            if a.dtype.kind == "f":
                setattr(self, f"p{k}", nn.Parameter(as_rows(a)))

    def forward(self, x):
        ins = [read_as(x.tape.parameter(getattr(self, f"p{k}"), f"p{k}"), a.shape)
               if a.dtype.kind == "f" else x.tape.constant(a, f"c{k}", integer=True)
               for k, a in enumerate(self.arrays)]
        hyper = sample_hyper(self.spec, self.dims)
        if self.geometry is not None:  # (an image input viewed as (C, H, W)...)
            ins = [t.view(-1, *self.geometry.views[k]) if k in self.geometry.views else t
                   for k, t in enumerate(ins)]
            hyper.update(self.geometry.hyper)
        return self.spec.recorder(*ins, **hyper)


def sample_hyper(spec, dims) -> dict:
    """The spec's sample hyperparameters: one named after a dim takes its value (as in
    tests/ops/op_checker.py), a tuple of alternatives its first."""
    hyper = {h: dims.get(h, spec.sample_hyper[h]) for h in spec.hyper}
    return {h: v[0] if isinstance(v, tuple) else v for h, v in hyper.items()}


DIMS = {"B": 3, "I": 2, "O": 4, "F": 3}
OTHER_DIM = 2  # any other named dimension (a hyperparameter of the same name takes its value)
# Ops whose input is data only a fit hands the program (as a graph op's graph): SPARSE_LINEAR
# reads rows of the CSR matrix in the program's graph data (nnjit.graph.csr_rows); its covering
# test runs it forward and backward through the compiled loop (its spec's reference_note).
PROGRAM_DATA_OPS = {"SPARSE_LINEAR"}
# every other non-graph op mapping inputs to an output (losses end a tape:
# tests/ops/test_opcodes.py)
MAPPED = [(op, s) for op, s in ALL if not s.graph and s.arity > 0
          and registry.family_of(op).name != "losses" and s.name not in PROGRAM_DATA_OPS]


@pytest.mark.parametrize("opcode, spec", MAPPED, ids=[s.name.lower() for _, s in MAPPED])
def test_the_family_dispatchers_handle_every_op(opcode, spec):
    """Forward and backward of the op run in the compiled loop (an op without its branch stops
    with UnknownOpcodeError), and its output has the signature's shape."""
    rng = np.random.default_rng(opcode)
    dims = {name: DIMS.get(name, OTHER_DIM) for name in dim_names(spec.signature)}
    geometry = None
    if spec.geometry is not None:  # shapes that follow from the op's geometry (conv, pools)
        geometry = spec.geometry(seeded_draw(opcode), dict(dims))
        dims.update(geometry.dims)
    in_shapes, out_shape = spec.shapes(dims)
    out_rows = (out_shape[0], int(np.prod(out_shape[1:])))  # an image (B, C, H, W) as rows
    special = spec.sample_inputs(rng, dims) if spec.sample_inputs is not None else {}
    arrays = [np.asarray(special[k]) if k in special and k in spec.int_inputs
              else rng.uniform(0.1, 1.0, s) for k, s in enumerate(in_shapes)]
    model = Probe(spec, arrays, dims, geometry)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    X = np.zeros((dims["B"], 1))
    grads = trainer.gradients(X, np.zeros(out_rows))
    assert trainer.predict_outputs(X).shape == out_rows
    for k in spec.grad_inputs:
        assert np.isfinite(grads[f"p{k}"]).all()
    # one past the family's block is no op of the family: the same program stops there
    program = trainer.program
    i = next(k for k, n in enumerate(program.nodes) if n.opcode == opcode)
    program.records[i, R_OPCODE] = registry.family_of(opcode).block.stop
    with pytest.raises(UnknownOpcodeError, match=f"op {i} of layer"):
        trainer.predict_outputs(X)


def test_signatures_parse():
    assert parse_signature("(B,I),(O,I),(1,O)?->(B,O)") == (
        (("B", "I"), ("O", "I"), ("1", "O")), ("B", "O"))
    assert optional_inputs("(N,H*C),(E,H)?,(1,H*C)?->(N,H*C)") == (False, True, True)
    assert parse_signature("->(E,1)") == ((), ("E", "1"))
    assert parse_signature("(B, F), (B, G) -> (B, F + 2*G)") == (
        (("B", "F"), ("B", "G")), ("B", "F+2*G"))
    assert dim_names("(B,start+width+rest)->(B,width)") == ("B", "start", "width", "rest")
    assert SPECS[Opcode.CONCAT].shapes({"B": 2, "F": 3, "G": 4}) == (((2, 3), (2, 4)), (2, 7))
    spec = SPECS[Opcode.SPMM]
    assert spec.shapes({"N": 5, "H": 2, "C": 3, "E": 7}) == (((5, 6), (7, 2), (1, 6)), (5, 6))
    for bad in ("(B,F)", "(B,F)->(B,F),(B,F)", "(B,F)->(B,F)?", "(B,-1)->(B,F)", "(B F)->(B,F)",
                "(B,F+)->(B,F)", "(B,+F)->(B,F)"):
        with pytest.raises(ValueError, match="signature"):
            parse_signature(bad)
    with pytest.raises(ValueError, match="has 1 inputs, arity says 2"):
        OpSpec("TWO", 2, "(B,F)->(B,F)", np.negative)
    with pytest.raises(ValueError, match="no reference"):
        OpSpec("NOREF", 1, "(B,F)->(B,F)")


@dispatcher
def _handles_nothing(op, i, ctx):
    return False


def _family(name, *ops, first=None):
    specs = [OpSpec(op, 1, "(B,F)->(B,F)", np.negative) for op in ops]
    return OpFamily(name, specs, _handles_nothing, _handles_nothing, first_opcode=first)


def test_registration_gives_blocks_and_refuses_clashes():
    reg = Registry(ops_table={})
    a = reg.register(_family("alpha", "A1", "A2"))
    b = reg.register(_family("beta", "B1"))
    assert (a.block, b.block) == (range(1000, 1002), range(1100, 1101))
    assert reg.register(a) is a  # again: a no-op
    assert a.opcode("A2") == 1001 and reg.family_of(1100) is b and reg.opcode("B1") == 1100
    with pytest.raises(ValueError, match="already registered"):
        reg.register(_family("alpha", "C1"))
    with pytest.raises(ValueError, match="an op called 'A1' is already registered"):
        reg.register(_family("gamma", "A1"))
    with pytest.raises(ValueError, match="overlaps family 'alpha'"):
        reg.register(_family("delta", "D1", first=1001))
    with pytest.raises(KeyError, match="opcode 5 belongs to no registered op family"):
        reg.spec(5)
    # the package's registry and the tape never saw these
    with pytest.raises(ValueError, match="belongs to no registered op family"):
        tape_module.Tape().record(999_999, [], 1, 1)
