"""Model weights in ``.nne`` files (format: docs/nne-format.md)."""

from __future__ import annotations

import os

import numpy as np

from nnjit.train.nne import NNEFormatError, load_nne, save_nne

PARAMS = "params"
OPTIMIZER = "optimizer"


RNG = "rng"


def save_module(module, path, optimizer=None, rng_state=None, shuffle_order=None,
                metadata=None) -> None:
    """Write ``module``'s parameters atomically, with the optimizer's state, the trainer's
    RNG state and its current shuffle order when given (what an exact warm restart needs), and
    extra JSON ``metadata``."""
    import nnjit

    groups = {PARAMS: {n: np.asarray(p.data) for n, p in module.named_parameters()}}
    metadata = {"nnjit_version": nnjit.__version__, "model": type(module).__name__,
                **(metadata or {})}
    if optimizer is not None and optimizer.state is not None:
        groups[OPTIMIZER] = {"state": optimizer.state}
        metadata["optimizer"] = {"class": type(optimizer).__name__,
                                 "iterations": int(optimizer.iterations)}
    if rng_state is not None:
        groups[RNG] = {"state": np.asarray(rng_state)}
        if shuffle_order is not None:
            groups[RNG]["shuffle_order"] = np.asarray(shuffle_order)
    save_nne(path, groups, metadata)


def load_module(module, path):
    """Load parameters from ``path`` into ``module`` (all mismatches reported at once).

    Returns the loaded :class:`~nnjit.train.nne.NNEFile` (metadata and any optimizer / RNG
    groups). Nothing is changed unless every tensor matches.
    """
    nne = load_nne(path)
    module.load_state_dict(params_group(nne, path), where=os.fspath(path))
    return nne


def params_group(nne, path) -> dict:
    """The parameter tensors of a loaded file, or a clear error naming the file."""
    if PARAMS not in nne.groups:
        raise NNEFormatError(f"{os.fspath(path)}: no '{PARAMS}' group in this .nne file")
    return nne.groups[PARAMS]
