"""What ``Module``'s convenience methods delegate to in the layers above ``nn``.

``nn`` never imports ``train`` or ``export``: they build on it. Instead each registers here, when
it is imported, the implementation a method calls: ``nnjit.train.trainer`` the trainer that
``predict`` and ``model(X)`` run, ``nnjit.export`` the safetensors and ONNX writers
(``summary`` needs none: it traces with :func:`nnjit.nn.trace.trace`, in ``nn``). ``import
nnjit`` imports them all; a method whose provider was not imported says which to import.
"""

from __future__ import annotations

from typing import Callable

#: Each implementation's name -> the module that registers it.
PROVIDED_BY = {
    "inference_trainer": "nnjit.train.trainer",  # (model) -> a Trainer(model, MSELoss(), seed=0)
    "save_safetensors": "nnjit.export.safetensors_io",  # (model, path)
    "load_safetensors": "nnjit.export.safetensors_io",  # (model, path)
    "save_onnx": "nnjit.export.onnx_export",  # (model, path, input_shape)
}

_IMPLEMENTATIONS: dict[str, Callable] = {}


def provide(name: str, implementation: Callable) -> None:
    """Register ``implementation`` under ``name`` (one of :data:`PROVIDED_BY`)."""
    if name not in PROVIDED_BY:
        raise KeyError(f"nnjit.nn.providers: unknown implementation {name!r}; known: "
                       f"{', '.join(PROVIDED_BY)}")
    _IMPLEMENTATIONS[name] = implementation


def provider(name: str, method: str) -> Callable:
    """The implementation registered under ``name``, which ``method`` (e.g.
    ``"Linear.save_onnx"``) needs; a RuntimeError naming the module to import when none is."""
    implementation = _IMPLEMENTATIONS.get(name)
    if implementation is None:
        raise RuntimeError(f"{method} needs {PROVIDED_BY[name]}, which is not imported: "
                           f"import nnjit (or {PROVIDED_BY[name]}) first")
    return implementation
