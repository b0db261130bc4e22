"""``Sequential``: modules applied one after another."""

from __future__ import annotations

from nnjit.nn.module import Module
from nnjit.tape.tape import Tensor


class Sequential(Module):
    """Chain modules; they are registered as ``"0"``, ``"1"``, ... (PyTorch naming).

    Example:
        >>> net = Sequential(Linear(64, 64), ReLU(), Linear(64, 10))
    """

    def __init__(self, *modules: Module):
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: argument {i} is {type(m).__name__}, not a Module")
            self.add_module(str(i), m)

    def __len__(self) -> int:
        return len(self._modules)

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def forward(self, x: Tensor) -> Tensor:
        for m in self._modules.values():
            x = m(x)
        return x
