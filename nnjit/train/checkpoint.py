"""Model weights in ``.nne`` files (format: docs/nne-format.md)."""

from __future__ import annotations

import os

import numpy as np

from nnjit.train.nne import NNEFormatError, load_nne, save_nne

PARAMS = "params"
OPTIMIZER = "optimizer"


RNG = "rng"
FIT = "fit"
CALLBACKS = "callbacks"

#: Metadata keys of a run's checkpoints (nnjit.experiment.runs): the RunConfig's ``state()``,
#: so a checkpoint alone rebuilds its model, and the TabularEncoding's ``state()`` of a run
#: trained on a CSV, so it alone encodes new rows. Both are untrusted when read back.
RUN_CONFIG = "run_config"
ENCODING = "encoding"

#: Scalars of the ``fit`` group (0-d float64 tensors), see docs/nne-format.md; with
#: ``plateau`` (float64) and ``best_params`` (the arena dtype) they make ``Trainer.fit_state()``.
FIT_SCALARS = ("epoch", "fit_step", "best", "best_epoch", "bad_epochs", "stopped", "lr",
               "monitor")


def save_module(module, path, optimizer=None, rng_state=None, shuffle_order=None,
                metadata=None, fit_state=None, callback_states=None) -> None:
    """Write ``module``'s parameters atomically, with the optimizer's state, the trainer's
    RNG state and its current shuffle order when given (what an exact warm restart needs), the
    fit state (early stopping, scheduler position) and the callbacks' states, and extra JSON
    ``metadata``."""
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
    if fit_state is not None:
        groups[FIT] = {k: np.array(fit_state[k], dtype=np.float64) for k in FIT_SCALARS}
        groups[FIT]["plateau"] = np.asarray(fit_state["plateau"], dtype=np.float64)
        groups[FIT]["best_params"] = np.asarray(fit_state["best_params"])
    if callback_states:
        groups[CALLBACKS], metadata["callbacks"] = _pack_callbacks(callback_states)
    save_nne(path, groups, metadata)


def _pack_callbacks(states: dict):
    """Callback states as tensors (numbers and arrays, ``key/name``) and JSON (the rest)."""
    tensors, meta = {}, {}
    for key, state in states.items():
        meta[key] = {}
        for name, value in state.items():
            if isinstance(value, (bool, np.bool_, str)) or value is None:
                meta[key][name] = value if not isinstance(value, np.bool_) else bool(value)
            elif isinstance(value, (int, np.integer)):
                tensors[f"{key}/{name}"] = np.array(value, dtype=np.int64)
            elif isinstance(value, (float, np.floating)):
                tensors[f"{key}/{name}"] = np.array(value, dtype=np.float64)
            else:
                tensors[f"{key}/{name}"] = np.asarray(value)
    return tensors, meta


def unpack_callbacks(nne) -> dict:
    """The callback states saved by :func:`save_module` (``{}`` when there are none)."""
    states = {key: dict(values) for key, values in nne.metadata.get("callbacks", {}).items()}
    for full, value in nne.groups.get(CALLBACKS, {}).items():
        key, _, name = full.partition("/")
        states.setdefault(key, {})[name] = value.item() if value.ndim == 0 else value
    return states


def unpack_fit(nne) -> dict | None:
    """The fit state saved by :func:`save_module`, or None (a file written without one: the
    documented defaults apply, i.e. early stopping and the plateau rule start afresh)."""
    group = nne.groups.get(FIT)
    if group is None:
        return None
    fit = {k: float(group[k]) for k in FIT_SCALARS}
    fit["plateau"] = np.array(group["plateau"], dtype=np.float64)
    fit["best_params"] = np.array(group["best_params"])
    return fit


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
