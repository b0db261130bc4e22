"""Model weights in ``.nne`` files (format: docs/nne-format.md)."""

from __future__ import annotations

import os

import numpy as np

from nnjit.train.nne import load_nne, save_nne

PARAMS = "params"
OPTIMIZER = "optimizer"


def save_module(module, path, optimizer=None) -> None:
    """Write ``module``'s parameters (and the optimizer's state, if given) atomically."""
    import nnjit

    groups = {PARAMS: {n: np.asarray(p.data) for n, p in module.named_parameters()}}
    metadata = {"nnjit_version": nnjit.__version__, "model": type(module).__name__}
    if optimizer is not None and optimizer.state is not None:
        groups[OPTIMIZER] = {"state": optimizer.state}
        metadata["optimizer"] = {"class": type(optimizer).__name__,
                                 "iterations": int(optimizer.iterations)}
    save_nne(path, groups, metadata)


def load_module(module, path) -> dict:
    """Load parameters from ``path`` into ``module`` (all mismatches reported at once).

    Returns the file's metadata. Nothing is changed unless every tensor matches.
    """
    nne = load_nne(path)
    params = nne.groups.get(PARAMS)
    if params is None:
        from nnjit.train.nne import NNEFormatError

        raise NNEFormatError(f"{os.fspath(path)}: no '{PARAMS}' group in this .nne file")
    module.load_state_dict(params, where=os.fspath(path))
    return nne.metadata
