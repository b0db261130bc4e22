"""PyTorch's (and PyTorch Geometric's) names and shapes of an nnjit model's parameters.

nnjit already names parameters by PyTorch's dotted paths (``0.weight``, ``conv1.lin.weight``) and
stores ``Linear.weight`` as ``(out_features, in_features)`` with a 1-D bias, as PyTorch does; the
graph layers use PyG's names (``GCNConv``: ``lin.weight``, ``bias``; ``SAGEConv``: ``lin_l.*``,
``lin_r.weight``; ``GATConv``: ``lin.weight``, ``att_src``, ``att_dst``, ``bias``). The one layout
difference is GATConv's attention vectors: PyG's ``(1, heads, out_channels)``, flattened here to
``(1, heads * out_channels)`` in the same element order. Every mapping is therefore a reshape.
"""

from __future__ import annotations

from nnjit.nn.module import Module
from nnjit.nn.walk import walk_modules


def torch_shapes(model: Module) -> dict[str, tuple[int, ...]]:
    """``{dotted name: shape in PyTorch's state_dict}`` for each parameter and persistent
    buffer, in ``state_dict()`` order (a shared one once, under its first name)."""
    from nnjit.nn.gnn.gat import GATConv

    shapes: dict[str, tuple[int, ...]] = {}
    seen: set[int] = set()
    for path, module in walk_modules(model):
        for name, p in module._parameters.items():
            if id(p) in seen:
                continue
            seen.add(id(p))
            shape = tuple(int(d) for d in p.data.shape)
            if isinstance(module, GATConv) and name in ("att_src", "att_dst"):
                shape = (1, module.heads, module.out_channels)
            shapes[f"{path}.{name}" if path else name] = shape
        for name, b in module.__dict__.get("_buffers", {}).items():  # (batch norm statistics)
            if b is not None and b.persistent and id(b) not in seen:
                seen.add(id(b))
                shapes[f"{path}.{name}" if path else name] = tuple(int(d) for d in b.shape)
    return shapes
