"""``walk_modules``: a model's modules by dotted path, the one traversal every part of nnjit
uses (:meth:`nnjit.nn.Module.named_modules`, the trainer, the summary, the exporters).

It reads only each module's ``_modules``, so it imports no layer and anything may import it.
"""

from __future__ import annotations


def walk_modules(root, prefix: str = "", memo: set | None = None) -> list:
    """``[(dotted_path, module)]`` for ``root`` and all its descendants, each once, depth-first
    with children in registration order (:meth:`Module.named_modules` as a list; a trainer
    walks the model once per trace)."""
    memo = set() if memo is None else memo
    out = []
    stack = [(prefix, root)]
    while stack:
        path, module = stack.pop()
        if id(module) in memo:
            continue
        memo.add(id(module))
        out.append((path, module))
        children = module._modules
        if children:
            names = list(children)
            names.reverse()
            for name in names:
                stack.append((f"{path}.{name}" if path else name, children[name]))
    return out
