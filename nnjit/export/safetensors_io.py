"""Model weights as safetensors files with PyTorch's names and layouts.

A ``torch.nn.Sequential`` saved with ``safetensors.torch.save_file(seq.state_dict(), path)``
loads into the matching nnjit ``Sequential`` and the reverse (see
:mod:`nnjit.export.torch_layout` for the names and shapes). Files are untrusted: the container is
parsed by safetensors' own parser (no pickle), then every tensor's name, shape and dtype is
checked against the model before anything is copied, and every problem is listed in one error.
"""

from __future__ import annotations

import os

import numpy as np

from nnjit.export.optional import require
from nnjit.export.torch_layout import torch_shapes
from nnjit.io.atomic import atomic_replace
from nnjit.io.nne import StateMismatchError
from nnjit.nn.module import Module
from nnjit.nn.providers import provide

#: safetensors dtype names nnjit can load (a narrower float than the model's is widened exactly).
FLOAT_DTYPES = {"F16": np.dtype(np.float16), "F32": np.dtype(np.float32),
                "F64": np.dtype(np.float64)}
#: and for buffers, integers (PyTorch's ``num_batches_tracked`` is int64; counts below 2**53 are
#: exact in float64, below 2**24 in float32)
INT_DTYPES = {"I32": np.dtype(np.int32), "I64": np.dtype(np.int64)}


class SafetensorsFileError(ValueError):
    """The file is not a readable safetensors file."""


class SafetensorsMismatchError(StateMismatchError):
    """The file's tensors do not match the model: every missing, unexpected, mis-shaped,
    wrongly typed or non-finite tensor is listed."""

    def __init__(self, where: str, missing: list[str], unexpected: list[str],
                 mismatched: list[tuple[str, tuple[int, ...], tuple[int, ...]]],
                 bad_dtypes: list[tuple[str, str, str]] = (), nonfinite: list[str] = ()):
        self.where = where
        self.missing, self.unexpected, self.mismatched = missing, unexpected, mismatched
        self.bad_dtypes, self.nonfinite = list(bad_dtypes), list(nonfinite)
        lines = [f"safetensors file {where} does not match the model:"]
        if missing:
            lines.append("  missing keys: " + ", ".join(repr(k) for k in missing))
        if unexpected:
            lines.append("  unexpected keys: " + ", ".join(repr(k) for k in unexpected))
        lines.extend(f"  {name!r}: expected shape {exp}, got {got}"
                     for name, exp, got in mismatched)
        lines.extend(f"  {name!r}: expected dtype {exp}, got {got}"
                     for name, exp, got in self.bad_dtypes)
        lines.extend(f"  {name!r}: holds NaN or infinite values" for name in self.nonfinite)
        ValueError.__init__(self, "\n".join(lines))

    def __reduce__(self):
        return (type(self), (self.where, self.missing, self.unexpected, self.mismatched,
                             self.bad_dtypes, self.nonfinite))


def save_safetensors(model: Module, path) -> None:
    """Write ``model``'s parameters and persistent buffers to ``path`` (atomically) under
    PyTorch's names and shapes, in their dtype (float32, or float64 for a model compiled in
    float64; ``torch.nn.Module.load_state_dict`` casts a float ``num_batches_tracked``)."""
    st = require("safetensors.numpy", "save_safetensors")
    from nnjit._version import __version__

    params = dict(model._state_entries())  # parameters and persistent buffers
    tensors = {name: np.ascontiguousarray(params[name].data).reshape(shape)
               for name, shape in torch_shapes(model).items()}
    data = st.save(tensors, metadata={"format": "pt", "producer": f"nnjit {__version__}"})
    with atomic_replace(path) as fh:
        fh.write(data)


def load_safetensors(model: Module, path) -> None:
    """Copy the tensors of the safetensors file ``path`` into ``model``'s parameters.

    Names and shapes must be PyTorch's for this model (``0.weight`` of shape (out, in), ...);
    dtypes float16, float32 or float64, no wider than the parameter (a float64 file needs a model
    compiled in float64: ``Trainer(model, dtype=np.float64)``); values finite. Nothing is changed
    unless every tensor passes.

    Raises:
        FileNotFoundError: no file at ``path``.
        SafetensorsFileError: the file is not a valid safetensors file.
        SafetensorsMismatchError: listing every missing, unexpected, mis-shaped, mistyped or
            non-finite tensor.
    """
    safetensors = require("safetensors", "load_safetensors")
    where = os.fspath(path)
    if not os.path.isfile(where):
        raise FileNotFoundError(f"load_safetensors: no such file: {where}")
    params = dict(model._state_entries())  # parameters and persistent buffers
    expected = torch_shapes(model)
    try:
        with safetensors.safe_open(where, framework="np") as f:
            header = {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape()))
                      for k in f.keys()}
            missing = [k for k in expected if k not in header]
            unexpected = [k for k in header if k not in expected]
            mismatched, bad_dtypes = [], []
            for name, shape in expected.items():
                if name not in header:
                    continue
                dtype_name, got_shape = header[name]
                if got_shape != shape:
                    mismatched.append((name, shape, got_shape))
                want = params[name].data.dtype
                got = FLOAT_DTYPES.get(dtype_name)
                if got is None and not params[name].requires_grad:  # a buffer's count
                    got = INT_DTYPES.get(dtype_name)
                    counts = f.get_tensor(name) if got is not None else None
                    if counts is not None and counts.size and (
                            np.abs(counts).max() > 2 ** (np.finfo(want).nmant + 1)):
                        got = None  # (a count the model's dtype cannot hold exactly)
                if got is None or (got.kind == "f" and got.itemsize > want.itemsize):
                    bad_dtypes.append((name, str(want), got.name if got else dtype_name))
            if missing or unexpected or mismatched or bad_dtypes:
                raise SafetensorsMismatchError(where, missing, unexpected, mismatched, bad_dtypes)
            values = {name: f.get_tensor(name) for name in expected}
    except safetensors.SafetensorError as exc:
        raise SafetensorsFileError(f"{where}: not a valid safetensors file ({exc})") from exc
    nonfinite = [name for name, v in values.items() if not np.isfinite(v).all()]
    if nonfinite:
        raise SafetensorsMismatchError(where, [], [], [], [], nonfinite)
    for name, value in values.items():
        p = params[name]
        p.data[...] = value.reshape(p.data.shape)


provide("save_safetensors", save_safetensors)  # Module.save_safetensors
provide("load_safetensors", load_safetensors)  # Module.load_safetensors
