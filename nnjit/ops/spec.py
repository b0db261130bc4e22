"""What the tape, the tests and the docs know about one op: :class:`OpSpec`.

An op's shape rule is a gufunc-style ``signature`` over named dimensions, e.g. dense
``"(B,I),(O,I),(1,O)?->(B,O)"``: one parenthesised shape per input, ``?`` after an optional input
(the recorder may pass None; its record holds slot -1), ``->`` and the output's shape. A dimension
is a name, an integer, a product of them (``H*C``: H heads of C channels) or a sum of such
terms (``F+G``: two inputs' features side by side). Graph ops use ``N``
(nodes), ``E`` (edges of the op's CSR), ``H`` (heads) and ``C`` (channels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

_SHAPE = re.compile(r"\(([^()]*)\)(\?)?")
_FACTOR = r"([A-Za-z_]\w*|\d+)"
_TERM = rf"{_FACTOR}(\*{_FACTOR})*"
_DIM = re.compile(rf"^{_TERM}(\+{_TERM})*$")


def _parse(sig: str):
    """(input shapes, optional flags, output shape) of ``sig``; ValueError naming the fault."""
    if not isinstance(sig, str) or sig.count("->") != 1:
        raise ValueError(f"signature {sig!r}: expected 'inputs->output', e.g. '(B,F)->(B,F)'")
    # spaces may pad the punctuation, never split a dimension name
    left, right = (re.sub(r"\s*([(),?*+])\s*", r"\1", s).strip() for s in sig.split("->"))
    inputs, optional = [], []
    pos = 0
    while pos < len(left):
        m = _SHAPE.match(left, pos)
        if m is None:
            raise ValueError(f"signature {sig!r}: cannot read an input shape at {left[pos:]!r}")
        inputs.append(_dims(m.group(1), sig))
        optional.append(m.group(2) == "?")
        pos = m.end()
        if pos < len(left):
            if left[pos] != ",":
                raise ValueError(f"signature {sig!r}: expected ',' between input shapes")
            pos += 1
    m = _SHAPE.fullmatch(right)
    if m is None or m.group(2):
        raise ValueError(f"signature {sig!r}: the output must be one shape, e.g. '(B,F)'")
    return tuple(inputs), tuple(optional), _dims(m.group(1), sig)


def _dims(text: str, sig: str) -> tuple[str, ...]:
    dims = tuple(text.split(",")) if text else ()
    for d in dims:
        if not _DIM.match(d):
            raise ValueError(f"signature {sig!r}: bad dimension {d!r} (a name, an integer, a "
                             "product such as H*C or a sum such as F+G)")
    return dims


def parse_signature(sig: str) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """``(inputs, output)`` of a signature: each shape a tuple of dimension expressions
    (``"B"``, ``"1"``, ``"H*C"``). Which inputs are optional: :func:`optional_inputs`."""
    inputs, _, output = _parse(sig)
    return inputs, output


def optional_inputs(sig: str) -> tuple[bool, ...]:
    """One flag per input of ``sig``: True where it is marked optional (``?``)."""
    return _parse(sig)[1]


def dim_value(expr: str, dims: dict[str, int]) -> int:
    """The value of one dimension expression (``"H*C"`` -> ``dims["H"] * dims["C"]``,
    ``"F+G"`` -> ``dims["F"] + dims["G"]``: a sum of products)."""
    total = 0
    for term in expr.split("+"):
        value = 1
        for factor in term.split("*"):
            if factor.isdigit():
                value *= int(factor)
            elif factor in dims:
                value *= int(dims[factor])
            else:
                raise KeyError(f"dimension {factor!r} has no value (given: {sorted(dims)})")
        total += value
    return total


def dim_names(sig: str) -> tuple[str, ...]:
    """The named dimensions of ``sig``, in order of first appearance."""
    inputs, _, output = _parse(sig)
    names: list[str] = []
    for shape in (*inputs, output):
        for expr in shape:
            for factor in re.split(r"[*+]", expr):
                if not factor.isdigit() and factor not in names:
                    names.append(factor)
    return tuple(names)


class OpGeometry(NamedTuple):
    """One consistent case of an op whose shapes follow from its hyperparameters (what
    :attr:`OpSpec.geometry` returns; the generic op check uses it).

    Attributes:
        dims: values of the signature's named dims replacing the drawn ones (the derived ones,
            such as a convolution's output height, included).
        hyper: keyword arguments for the recorder and the reference (kernel size, stride...).
        views: ``{input index: per-row dims}``: the check records those inputs viewed so
            (``x.view(-1, C, H, W)``) and passes them to the reference reshaped to
            ``(rows, *dims)``.
        out_dims: the output's expected per-row dims (``Tensor.dims``), e.g. ``(O, OH, OW)``;
            the reference returns ``(rows, *out_dims)`` (None: the signature's 2-D shape).
    """

    dims: dict
    hyper: dict
    views: dict = {}
    out_dims: tuple | None = None


@dataclass(frozen=True)
class OpSpec:
    """Everything about one op that is not compiled code.

    Attributes:
        name: upper-case op name (``"DENSE"``, ``"SILU"``); unique over all registered families.
        arity: array inputs the recorder takes (optional ones count; the dropout mask and other
            buffers the recorder makes itself do not).
        signature: the shape rule (module docstring); it has ``arity`` input shapes.
        reference: float64 NumPy reference ``reference(*inputs, **hyper)``; graph ops:
            ``reference(graph, *inputs, **hyper)`` (the graph the gradient check draws). None only
            with a ``reference_note`` saying where the op is tested instead.
        recorder: records the op on the inputs' tape, ``recorder(*inputs, **hyper) -> Tensor``
            (the ``functional`` entry or ``Tensor`` operator; graph ops take the ``Edges`` first).
        hyper: names of the op's scalar parameters, in order: floats in the tape's hyper table
            behind aux0, aux1... (activations, dropout); for graph ops and ops with a geometry
            ``block`` (pooling) the recorder's keyword arguments that the reference takes too
            (``heads``, ``kind``, ``kernel_size``).
        sample_hyper: values of ``hyper`` the generic tests use (a tuple: alternatives, the
            gradient check draws one; other tests take the first).
        input_domain: (low, high) range of generated input values (away from poles).
        grad_inputs: indices of the inputs that take gradients (() = not differentiable).
        aux: meaning of each aux field the op uses, ``{"aux0": "...", ...}``.
        graph: True when the op reads the program's graph (it needs one to be traced).
        reference_note: where an op without a reference is tested.
        sample_inputs: for inputs whose values a (low, high) domain cannot describe (class
            indices, 0/1 labels): ``sample_inputs(rng, dims) -> {input index: array}``.
        int_inputs: inputs that may hold integers (an embedding's indices); the tape refuses an
            integer tensor anywhere else.
        scratch: ``scratch(node, slots) -> int``: elements of the shared scratch span the op's
            kernels need (im2col buffers...), from its :class:`~nnjit.tape.tape.Node` and the
            tape's slot specs (batch slots sized for the largest batch); None: no scratch.
        bad_input: ``bad_input(program, i) -> str``: what was wrong with the input data of
            record ``i`` after its kernel reported it (``nnjit.ops.report_bad_input``), e.g. the
            out-of-range index and the valid range; it may read the record's input slots
            (``program.view``: the batch that failed is still loaded).
        derive_dims: for ops whose output dims follow from their hyperparameters (a pool's
            ``OH, OW`` from ``H, W``, kernel, stride, padding): ``derive_dims(dims, hyper) ->
            dims``, from the named dims drawn for the signature (a dict) and the hyper values
            (the recorder's keyword arguments) to the complete dims: the derived ones filled
            in, input dims raised where the geometry needs more. None: every dim is free.
        geometry: ``geometry(draw, dims) -> OpGeometry`` for ops whose shapes depend on their
            hyperparameters (convolution, pooling): from ``draw(lo, hi) -> int`` and the dims
            drawn from the signature, a consistent case (dims, recorder keyword arguments, how
            inputs are viewed, the output's dims); None: the signature's dims are independent.
    """

    name: str
    arity: int
    signature: str
    reference: Callable | None = None
    recorder: Callable | None = None
    hyper: tuple[str, ...] = ()
    sample_hyper: dict[str, float] = field(default_factory=dict)
    input_domain: tuple[float, float] = (-3.0, 3.0)
    grad_inputs: tuple[int, ...] = ()
    aux: dict[str, str] = field(default_factory=dict)
    graph: bool = False
    reference_note: str = ""
    sample_inputs: Callable | None = None
    int_inputs: tuple[int, ...] = ()
    scratch: Callable | None = None
    bad_input: Callable | None = None
    derive_dims: Callable | None = None
    geometry: Callable | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Z][A-Z0-9_]*", self.name):
            raise ValueError(f"OpSpec name {self.name!r}: use an upper-case identifier ('SILU')")
        where = f"OpSpec {self.name}"
        if not isinstance(self.arity, int) or isinstance(self.arity, bool) or self.arity < 0:
            raise ValueError(f"{where}: arity must be an int >= 0, got {self.arity!r}")
        inputs, _, _ = _parse(self.signature)
        if len(inputs) != self.arity:
            raise ValueError(f"{where}: signature {self.signature!r} has {len(inputs)} inputs, "
                             f"arity says {self.arity}")
        bad = [k for k in self.grad_inputs if not (isinstance(k, int) and 0 <= k < self.arity)]
        if bad:
            raise ValueError(f"{where}: grad_inputs {self.grad_inputs} name inputs outside "
                             f"0..{self.arity - 1}")
        if self.arity > 3:
            raise ValueError(f"{where}: a record holds at most 3 inputs, arity is {self.arity}")
        if self.reference is None and not self.reference_note:
            raise ValueError(f"{where}: no reference; give reference= or a reference_note "
                             "saying where the op is tested instead")
        unknown = [k for k in self.aux if k not in ("aux0", "aux1", "aux2")]
        if unknown:
            raise ValueError(f"{where}: aux keys must be aux0, aux1, aux2, got {unknown}")
        missing = [h for h in self.hyper if h not in self.sample_hyper]
        if missing:
            raise ValueError(f"{where}: sample_hyper needs a value for {missing}")

    @property
    def inputs(self) -> tuple[tuple[str, ...], ...]:
        """The input shapes of the signature."""
        return _parse(self.signature)[0]

    @property
    def output(self) -> tuple[str, ...]:
        """The output shape of the signature."""
        return _parse(self.signature)[2]

    @property
    def optional(self) -> tuple[bool, ...]:
        """One flag per input: True where the signature marks it optional."""
        return _parse(self.signature)[1]

    def shapes(self, dims: dict[str, int]) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
        """``(in_shapes, out_shape)`` with every named dimension taken from ``dims``."""
        inputs, _, output = _parse(self.signature)
        return (tuple(tuple(dim_value(e, dims) for e in s) for s in inputs),
                tuple(dim_value(e, dims) for e in output))

    # Names of the registry before op families (kept for existing code and tests).
    @property
    def ref(self) -> Callable | None:
        """The reference (the earlier name of :attr:`reference`)."""
        return self.reference

    @property
    def differentiable(self) -> bool:
        """Whether any input takes a gradient."""
        return bool(self.grad_inputs)
