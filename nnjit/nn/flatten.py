"""``Flatten``: each sample's dimensions read as one (a view: no op, no copy)."""

from __future__ import annotations

from nnjit.checks import check_int
from nnjit.nn.module import Module
from nnjit.tape.tape import Tensor


class Flatten(Module):
    """``(B, C, H, W) -> (B, C * H * W)`` (``torch.nn.Flatten``; ``x.flatten(1)``).

    A slot already holds each sample as one row, so this only changes how the row is read.

    Args:
        start_dim: first dimension to flatten; only 1 (rows are samples).
        end_dim: last dimension to flatten; only the last (-1, the default).
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        start_dim = check_int(start_dim, "Flatten: start_dim")
        end_dim = check_int(end_dim, "Flatten: end_dim")
        if start_dim != 1:
            raise ValueError(f"Flatten: start_dim={start_dim} is not supported: rows are "
                             "samples, only start_dim=1 (the default) flattens each sample")
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Tensor) -> Tensor:
        last = x.ndim - 1
        if self.end_dim not in (-1, last):
            path = self.__dict__.get("_path")
            layer = f"Flatten '{path}'" if path else "Flatten"
            raise ValueError(f"{layer}: end_dim={self.end_dim} on shape {tuple(x.shape)} is not "
                             f"supported: only flattening every dimension after the batch "
                             f"(end_dim=-1, the default)")
        return x.flatten(1)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
