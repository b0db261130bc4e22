"""``Embedding``: a learned vector per category index (PyTorch's ``nn.Embedding``)."""

from __future__ import annotations

import numpy as np

from nnjit.checks import Int
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.nn.module import Module
from nnjit.nn.parameter import Parameter
from nnjit.ops.embedding import embedding
from nnjit.random import generator as default_generator
from nnjit.tape.tape import Tensor

_SIZE = Int(min=1, says="a positive int")


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``.

    Args:
        num_embeddings: how many categories (valid indices are ``0 .. num_embeddings - 1``).
        embedding_dim: size of each vector.
        padding_idx: a row that is zeros at initialisation and never receives a gradient
            (negative counts from the end, as in PyTorch); None: none.
        generator: a ``numpy.random.Generator`` for the initial values (default
            :func:`nnjit.random.generator`).

    Shapes:
        input: an integer tensor (an integer model input, or a column of one: ``x_cat[:, j]``)
        of shape ``(B,)`` or ``(B, K)``; output ``(B, embedding_dim)`` or
        ``(B, K, embedding_dim)``. ``weight`` is ``(num_embeddings, embedding_dim)``, drawn
        from N(0, 1), as in PyTorch. An index outside the table stops the task with an
        ``IndexError`` naming the layer, the index and the valid range.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 generator: np.random.Generator | None = None):
        super().__init__()
        _SIZE.check("Embedding: num_embeddings", num_embeddings)
        _SIZE.check("Embedding: embedding_dim", embedding_dim)
        if padding_idx is not None:
            Int(says="an int or None").check("Embedding: padding_idx", padding_idx)
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be within num_embeddings "
                                 f"({num_embeddings}), got {padding_idx}")
            padding_idx = int(padding_idx) % int(num_embeddings)
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise TypeError(f"Embedding: generator must be a numpy.random.Generator or None, "
                            f"got {type(generator).__name__}")
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.padding_idx = padding_idx
        rng = default_generator() if generator is None else generator
        w = rng.standard_normal((self.num_embeddings, self.embedding_dim))
        if padding_idx is not None:
            w[padding_idx] = 0.0
        self.weight = Parameter(w.astype(DEFAULT_DTYPE))

    def forward(self, x: Tensor) -> Tensor:
        name = self._path or "Embedding"
        if not isinstance(x, Tensor) or not x.is_integer:
            raise TypeError(f"Embedding '{name}': expected an integer tensor of category "
                            f"indices (an integer model input or a column of one), got "
                            f"{x!r}: pass the categorical columns as an integer array")
        weight = x.tape.parameter(self._parameters["weight"], self._param_name("weight"))
        return embedding(x, weight, self.padding_idx)

    def _param_name(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"
