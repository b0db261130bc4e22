"""``Linear``: a fully connected layer."""

from __future__ import annotations

import math

import numpy as np

from nnjit.checks import Int
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.graph.edges import SparseFeatures
from nnjit.nn.module import Module
from nnjit.nn.parameter import Parameter
from nnjit.random import generator as default_generator
from nnjit.tape.tape import Tensor

_WIDTH = Int(min=1, says="a positive int")

INITS = ("glorot_uniform", "torch")


class Linear(Module):
    r"""Fully connected layer: :math:`y = x W^T + b`.

    Args:
        in_features: size of each input row.
        out_features: size of each output row.
        bias: learn an additive bias (default True).
        init: ``"glorot_uniform"`` (default; Glorot & Bengio 2010, :math:`U(-a, a)` with
            :math:`a = \sqrt{6 / (in + out)}`, zero bias) or ``"torch"`` (PyTorch's default:
            weight and bias :math:`U(-1/\sqrt{in}, 1/\sqrt{in})`).
        generator: a ``numpy.random.Generator`` to draw the initial values from (as
            ``torch.nn.init``'s ``generator=``); default :func:`nnjit.random.generator` (the
            :func:`nnjit.seeded` block's, else :func:`nnjit.set_seed`'s process-wide one).
        init_values: draw the initial values (default True). False leaves weight and bias
            zero, drawing nothing, for a caller that writes them itself (nnjit.sklearn copies
            scikit-learn's): no random matrix is made, and the zero pages take no memory
            until written.

    Shapes:
        input ``(B, in_features)``, output ``(B, out_features)``; ``weight`` is
        ``(out_features, in_features)`` and ``bias`` ``(out_features,)``, as in PyTorch.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 init: str = "glorot_uniform", generator: np.random.Generator | None = None,
                 init_values: bool = True):
        super().__init__()
        for arg, value in (("in_features", in_features), ("out_features", out_features)):
            _WIDTH.check(f"Linear: {arg}", value)
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise TypeError(f"Linear: generator must be a numpy.random.Generator or None, got "
                            f"{type(generator).__name__}")
        if init not in INITS:
            raise ValueError(f"Linear: unknown init {init!r}; valid: {', '.join(INITS)}")
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.init = init
        if not init_values:
            self.weight = Parameter(np.zeros((out_features, in_features), DEFAULT_DTYPE),
                                    copy=False)
            self.bias = (Parameter(np.zeros(out_features, DEFAULT_DTYPE), copy=False) if bias
                         else None)
            return
        rng = default_generator() if generator is None else generator
        if init == "glorot_uniform":
            limit = math.sqrt(6.0 / (in_features + out_features))
            w = rng.uniform(-limit, limit, (out_features, in_features))
            b = np.zeros(out_features)
        else:
            limit = 1.0 / math.sqrt(in_features)
            w = rng.uniform(-limit, limit, (out_features, in_features))
            b = rng.uniform(-limit, limit, out_features)
        self.weight = Parameter(w.astype(DEFAULT_DTYPE))
        self.bias = Parameter(b.astype(DEFAULT_DTYPE)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        if type(x) is not Tensor and isinstance(x, SparseFeatures):  # a graph's bag-of-words features: X @ W.T + b
            if x.cols != self.in_features:
                raise ValueError(f"Linear '{self._path or 'Linear'}': expected input with "
                                 f"{self.in_features} features, got sparse features of shape "
                                 f"{x.shape}")
            return x.dense(*self.tensors(x.tape))
        if x.cols != self.in_features:
            raise ValueError(
                f"Linear '{self._path or 'Linear'}': expected input with {self.in_features} "
                f"features, got {'array' if x.spec.batch else 'tensor'} of shape "
                f"({int(x.rows)}, {x.cols})"
            )
        return x.tape.dense(x, *self.tensors(x.tape))

    def tensors(self, tape) -> tuple[Tensor, Tensor | None]:
        """The (weight, bias) slots on ``tape`` (bias None when the layer has none)."""
        params = self._parameters  # (self.weight would go through Module.__getattr__)
        w = tape.parameter(params["weight"], self._param_name("weight"))
        bias = params.get("bias")
        return w, (tape.parameter(bias, self._param_name("bias")) if bias is not None else None)

    def _param_name(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
