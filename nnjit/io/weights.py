"""A module's weights in ``.nne`` files: the ``params`` group (format: docs/nne-format.md).

:func:`save_module` writes the parameters and buffers (``state_dict()``; and any extra groups a caller adds: a trainer
checkpoint's optimizer, RNG and fit state, see :mod:`nnjit.train.checkpoint`);
:func:`load_module` reads them back into a module after checking every name, shape and dtype,
changing nothing unless all match.
"""

from __future__ import annotations

import os

import numpy as np

from nnjit._version import __version__
from nnjit.io.nne import NNEFile, NNEFormatError, load_nne, save_nne

PARAMS = "params"


def save_module(module, path, groups: dict | None = None, metadata: dict | None = None) -> None:
    """Write ``module``'s parameters atomically as group ``params``, with the extra tensor
    ``groups`` and JSON ``metadata`` given (``nnjit_version`` and ``model`` are always
    recorded)."""
    params = dict(module.state_dict())  # parameters and persistent buffers
    metadata = {"nnjit_version": __version__, "model": type(module).__name__,
                **(metadata or {})}
    save_nne(path, {PARAMS: params, **(groups or {})}, metadata)


def load_module(module, path) -> NNEFile:
    """Load parameters from ``path`` into ``module`` (all mismatches reported at once).

    Returns the loaded :class:`~nnjit.io.nne.NNEFile` (metadata and any optimizer / RNG
    groups). Nothing is changed unless every tensor matches.

    Raises:
        NNEFormatError: the file is not a valid ``.nne`` file, has no ``params`` group or a
            parameter that is not float32/float64 (the message names the file and the tensor).
        StateMismatchError: every missing, unexpected or mis-shaped parameter.
    """
    nne = load_nne(path)
    module.load_state_dict(params_group(nne, path), where=os.fspath(path))
    return nne


def params_group(nne: NNEFile, path) -> dict:
    """The parameter tensors of a loaded file (float32 or float64), or an
    :class:`NNEFormatError` naming the file (and the tensor)."""
    if PARAMS not in nne.groups:
        raise NNEFormatError(os.fspath(path), f"no '{PARAMS}' group in this .nne file")
    for name, arr in nne.groups[PARAMS].items():
        if arr.dtype.kind != "f":
            raise NNEFormatError(os.fspath(path), f"tensor '{PARAMS}/{name}' has dtype "
                                 f"{arr.dtype}, expected float32 or float64")
    return nne.groups[PARAMS]
