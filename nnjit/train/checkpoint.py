"""Trainer checkpoints in ``.nne`` files (format: docs/nne-format.md): a module's weights
(:mod:`nnjit.io.weights`) plus the optimizer, RNG, fit and callback state an exact resume needs.

Writing packs the groups a checkpoint holds; reading checks every field of an untrusted file
(type, dtype, shape, range) before anything is changed, raising only ``NNEFormatError`` (naming
the file and the field) or ``StateMismatchError`` (parameter names and shapes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nnjit.checks import is_int
from nnjit.kernels.rng import state_problem
from nnjit.io.nne import NNEFormatError, check_state
from nnjit.io.weights import params_group, save_module

OPTIMIZER = "optimizer"
RNG = "rng"
FIT = "fit"
CALLBACKS = "callbacks"

#: Metadata keys of a run's checkpoints (nnjit.experiment.run_callback): the RunConfig's
#: ``state()``, so a checkpoint alone rebuilds its model, and the TabularEncoding's ``state()`` of
#: a run trained on a CSV, so it alone encodes new rows. Both are untrusted when read back.
RUN_CONFIG = "run_config"
ENCODING = "encoding"

#: Scalars of the ``fit`` group (0-d float64 tensors), see docs/nne-format.md; with
#: ``plateau`` (float64) and ``best_params`` (the arena dtype) they make ``Trainer.fit_state()``.
FIT_SCALARS = ("epoch", "fit_step", "best", "best_epoch", "bad_epochs", "stopped", "lr",
               "monitor")


def write_checkpoint(module, path, optimizer=None, rng_state=None, shuffle_order=None,
                     metadata=None, fit_state=None, callback_states=None) -> None:
    """Write ``module``'s parameters atomically, with the optimizer's state, the trainer's
    RNG state and its current shuffle order when given (what an exact warm restart needs), the
    fit state (early stopping, scheduler position) and the callbacks' states, and extra JSON
    ``metadata``."""
    groups = {}
    metadata = dict(metadata or {})
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
    save_module(module, path, groups, metadata)


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


# --------------------------------------------------------------------------------------------
# reading back: every field is untrusted, checked before anything changes
# --------------------------------------------------------------------------------------------

_FLOATS = ("<f4", "<f8")
#: Counters are float64 in the fit group: whole numbers up to 2**53 are exact there.
_MAX_COUNT = 2**53
#: fit/monitor codes (docs/nne-format.md): 0 val_loss, 1 val_accuracy, 2 train_loss.
_MONITOR_CODES = (0.0, 1.0, 2.0)
#: ReduceLROnPlateau's 8 parameters then its state (lr, best, num_bad_epochs, cooldown_counter).
_PLATEAU_SIZE = 12


def _where(nne) -> str:
    return nne.path if nne.path is not None else "checkpoint"


def _bad(nne, field: str, reason: str) -> NNEFormatError:
    """The error for a field of ``nne``: ``"<path>: <field> <reason>"``."""
    return NNEFormatError(_where(nne), f"{field} {reason}")


def _tensor(nne, group: str, name: str, dtypes, ndim: int | None) -> np.ndarray:
    """``nne.groups[group][name]``, checked to have one of ``dtypes`` and ``ndim`` dimensions."""
    arr = nne.groups[group][name]
    field = f"tensor '{group}/{name}'"
    if np.dtype(arr.dtype).newbyteorder("<").str not in dtypes:
        kinds = " or ".join(np.dtype(d).name for d in dtypes)
        raise _bad(nne, field, f"has dtype {arr.dtype}, expected {kinds}")
    if ndim is not None and arr.ndim != ndim:
        raise _bad(nne, field, f"has shape {arr.shape}, expected {ndim} dimension"
                   f"{'s' if ndim != 1 else ''}")
    return arr


def _names(nne, group: str, required, optional=()) -> None:
    """Every tensor of ``group`` is known and every required one is there."""
    names = nne.groups[group]
    missing = [n for n in required if n not in names]
    unknown = [n for n in names if n not in required and n not in optional]
    if missing:
        raise _bad(nne, f"group '{group}'", "lacks tensor" + ("s " if len(missing) > 1 else " ")
                   + ", ".join(repr(n) for n in missing))
    if unknown:
        raise _bad(nne, f"group '{group}'", "has unknown tensor" +
                   ("s " if len(unknown) > 1 else " ") + ", ".join(repr(n) for n in unknown))


def _count(nne, field: str, value: float, low: float = 0, high: float = _MAX_COUNT) -> int:
    """A float that must be a whole number in [low, high]."""
    if not (math.isfinite(value) and value == int(value) and low <= value <= high):
        top = "2**53" if high == _MAX_COUNT else f"{high:g}"
        raise _bad(nne, field, f"is {value!r}, expected a whole number in [{low:g}, {top}]")
    return int(value)


def unpack_fit(nne) -> dict | None:
    """The fit state saved by :func:`write_checkpoint`, or None (a file written without one: the
    documented defaults apply, i.e. early stopping and the plateau rule start afresh).

    Raises :class:`NNEFormatError` naming the file and the field when a tensor is missing,
    unknown, of another dtype or shape, or out of range (counters whole and >= 0, the best epoch
    before the epochs done, ``stopped`` 0 or 1, ``monitor`` a known code, ``plateau`` empty or
    12 values with its counters whole and >= 0). ``best_params``' size is the model's business
    (:func:`read_checkpoint`).
    """
    if FIT not in nne.groups:
        return None
    _names(nne, FIT, (*FIT_SCALARS, "plateau", "best_params"))
    fit = {}
    for k in FIT_SCALARS:
        fit[k] = float(_tensor(nne, FIT, k, ("<f8",), 0))
    epoch = _count(nne, "fit/epoch", fit["epoch"])
    _count(nne, "fit/fit_step", fit["fit_step"])
    _count(nne, "fit/best_epoch", fit["best_epoch"], -1, epoch - 1)
    _count(nne, "fit/bad_epochs", fit["bad_epochs"], 0, epoch)
    if fit["stopped"] not in (0.0, 1.0):
        raise _bad(nne, "fit/stopped", f"is {fit['stopped']!r}, expected 0 or 1")
    if fit["monitor"] not in _MONITOR_CODES:
        raise _bad(nne, "fit/monitor", f"is {fit['monitor']!r}, expected 0 (val_loss), "
                   "1 (val_accuracy) or 2 (train_loss)")
    if not (math.isfinite(fit["lr"]) and fit["lr"] >= 0):
        raise _bad(nne, "fit/lr", f"is {fit['lr']!r}, expected a finite rate >= 0")
    if math.isnan(fit["best"]):
        raise _bad(nne, "fit/best", "is NaN (the best value is a number or +-inf before any)")
    plateau = _tensor(nne, FIT, "plateau", ("<f8",), 1)
    if plateau.size not in (0, _PLATEAU_SIZE):
        raise _bad(nne, "tensor 'fit/plateau'", f"has {plateau.size} values, expected 0 or "
                   f"{_PLATEAU_SIZE}")
    if plateau.size:
        if not np.isfinite(plateau[:8]).all():
            raise _bad(nne, "tensor 'fit/plateau'", "has non-finite ReduceLROnPlateau parameters")
        lr, best, bad_epochs, cooldown = (float(v) for v in plateau[8:])
        if not (math.isfinite(lr) and lr >= 0):
            raise _bad(nne, "fit/plateau lr", f"is {lr!r}, expected a finite rate >= 0")
        if math.isnan(best):
            raise _bad(nne, "fit/plateau best", "is NaN")
        _count(nne, "fit/plateau num_bad_epochs", bad_epochs)
        _count(nne, "fit/plateau cooldown_counter", cooldown)
    fit["plateau"] = np.array(plateau, dtype=np.float64)
    fit["best_params"] = np.array(_tensor(nne, FIT, "best_params", _FLOATS, 1))
    return fit


#: The state entries of nnjit's own callbacks: name -> the Python types allowed. (A callback
#: class of the user's with one of these names must keep the same state to be resumed.)
_CALLBACK_SCHEMAS = {
    "EarlyStopping": {"monitor": (str,), "best": (float,), "best_epoch": (int,),
                      "wait": (int,), "stopped_epoch": (int,)},
    "ModelCheckpoint": {"monitor": (str,), "best": (float,), "best_path": (str, type(None))},
}


def unpack_callbacks(nne) -> dict:
    """The callback states saved by :func:`write_checkpoint` (``{}`` when there are none).

    Raises :class:`NNEFormatError` naming the file and the entry when metadata ``callbacks`` is
    not ``{key: {name: str | bool | None}}``, a tensor of group ``callbacks`` is not named
    ``<key>/<name>`` or repeats an entry, or the state of one of nnjit's own callbacks
    (EarlyStopping, ModelCheckpoint) lacks an entry or has one of the wrong type or range.
    """
    meta = nne.metadata.get("callbacks", {})
    if not isinstance(meta, dict):
        raise _bad(nne, "metadata 'callbacks'", f"is a {type(meta).__name__}, expected an "
                   "object {key: {name: value}}")
    states: dict[str, dict] = {}
    for key, values in meta.items():
        if not key or not isinstance(values, dict):
            raise _bad(nne, f"metadata 'callbacks'[{key!r}]", "is not a callback state object")
        for name, value in values.items():
            if not (value is None or isinstance(value, (str, bool))):
                raise _bad(nne, f"metadata 'callbacks'[{key!r}][{name!r}]",
                           f"is {type(value).__name__}, expected a string, bool or null "
                           "(numbers are tensors)")
        states[key] = dict(values)
    for full, value in nne.groups.get(CALLBACKS, {}).items():
        key, _, name = full.partition("/")
        if not key or not name:
            raise _bad(nne, f"tensor '{CALLBACKS}/{full}'", "is not named <callback>/<entry>")
        state = states.setdefault(key, {})
        if name in state:
            raise _bad(nne, f"tensor '{CALLBACKS}/{full}'", "repeats an entry of metadata "
                       "'callbacks'")
        state[name] = value.item() if value.ndim == 0 else np.array(value)
    for key, state in states.items():
        _check_callback_state(nne, key, state)
    return states


def _check_callback_state(nne, key: str, state: dict) -> None:
    base = key.partition("#")[0]
    schema = _CALLBACK_SCHEMAS.get(base)
    if schema is None:  # a callback of the user's: its load_state checks its own state
        return
    where = f"callback state '{key}'"
    weights = [n for n in state if base == "EarlyStopping" and n.startswith("best_weights.")]
    missing = [n for n in schema if n not in state]
    if missing:
        raise _bad(nne, where, "lacks " + ", ".join(repr(n) for n in missing))
    unknown = [n for n in state if n not in schema and n not in weights]
    if unknown:
        raise _bad(nne, where, "has unknown entries " + ", ".join(repr(n) for n in unknown))
    for name, kinds in schema.items():
        value = state[name]
        if not isinstance(value, kinds) or isinstance(value, bool):
            allowed = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
            raise _bad(nne, f"{where} entry {name!r}", f"is {type(value).__name__}, expected "
                       f"{allowed}")
        if isinstance(value, int) and not 0 <= value <= _MAX_COUNT:
            raise _bad(nne, f"{where} entry {name!r}", f"is {value}, expected 0..2**53")
        if isinstance(value, float) and math.isnan(value):
            raise _bad(nne, f"{where} entry {name!r}", "is NaN")
    if sorted(weights) != sorted(f"best_weights.{i}" for i in range(len(weights))):
        raise _bad(nne, where, f"has best_weights entries not numbered 0..{len(weights) - 1}: "
                   + ", ".join(sorted(weights)))
    for n in weights:
        if not isinstance(state[n], np.ndarray) or state[n].dtype.kind != "f":
            raise _bad(nne, f"{where} entry {n!r}", "is not a float array")


@dataclass(frozen=True)
class CheckpointContents:
    """A checkpoint's contents, checked against the model and optimizer it is for.

    ``params`` (name -> array), ``optimizer_state`` / ``optimizer_iterations`` (None / 0 without
    the group), ``rng_state`` (int64 (4,), valid), ``shuffle_order`` (a permutation of
    ``range(len(shuffle_order))``), ``fit`` (:func:`unpack_fit`) and ``callbacks``
    (:func:`unpack_callbacks`).
    """

    params: dict
    optimizer_state: np.ndarray | None
    optimizer_iterations: int
    rng_state: np.ndarray | None
    shuffle_order: np.ndarray | None
    fit: dict | None
    callbacks: dict


def read_checkpoint(nne, model, optimizer) -> CheckpointContents:
    """Check every field of a loaded checkpoint for ``model`` trained by ``optimizer``.

    Raises:
        StateMismatchError: the parameters' names or shapes differ from the model's.
        NNEFormatError: any other field is missing where required, of the wrong type, dtype or
            shape, or out of range; the message names the file and the field.
    """
    _check_metadata_types(nne)
    params = params_group(nne, _where(nne))
    named = dict(model._state_entries())  # parameters and persistent buffers (state_dict)
    check_state({n: p.shape for n, p in named.items()}, params, where=_where(nne))
    n_params = model.num_parameters()  # the optimizer's span: trainable parameters only
    n_block = n_params + sum(b.size for _, b in model.named_buffers())  # snapshots: + buffers

    opt_state, iterations = None, 0
    if OPTIMIZER in nne.groups:
        _names(nne, OPTIMIZER, ("state",))
        info = nne.metadata.get("optimizer")
        if info is None:
            raise _bad(nne, "metadata 'optimizer'", "is missing (the file has optimizer state)")
        if info["class"] != type(optimizer).__name__:
            raise NNEFormatError(_where(nne), f"optimizer state of {info['class']}, but this "
                                 f"trainer uses {type(optimizer).__name__}")
        opt_state = _tensor(nne, OPTIMIZER, "state", _FLOATS, None)
        expected = optimizer.state_shape(n_params, opt_state.dtype)
        if opt_state.shape != expected:
            raise _bad(nne, f"tensor '{OPTIMIZER}/state'", f"has shape {opt_state.shape}, "
                       f"expected {expected}")
        problem = optimizer.state_problem(opt_state)
        if problem is not None:
            raise _bad(nne, f"tensor '{OPTIMIZER}/state'", problem)
        iterations = info["iterations"]

    rng_state = order = None
    if RNG in nne.groups:
        _names(nne, RNG, (), ("state", "shuffle_order"))
        if "state" in nne.groups[RNG]:
            rng_state = nne.groups[RNG]["state"]
            problem = state_problem(rng_state)
            if problem is not None:
                raise _bad(nne, f"tensor '{RNG}/state'", problem)
        if "shuffle_order" in nne.groups[RNG]:
            order = _tensor(nne, RNG, "shuffle_order", ("<i8",), 1)
            _check_permutation(nne, order)

    fit = unpack_fit(nne)
    if fit is not None and fit["best_params"].size not in (0, n_block):
        raise _bad(nne, "tensor 'fit/best_params'", f"has {fit['best_params'].size} values, "
                   f"expected 0 or the model's {n_block} (parameters and buffers)")
    callbacks = unpack_callbacks(nne)
    shapes = [p.shape for p in _weights(model)]
    for key, state in callbacks.items():
        weights = [n for n in state if n.startswith("best_weights.")]
        if key.partition("#")[0] == "EarlyStopping" and weights:
            if len(weights) != len(shapes):
                raise _bad(nne, f"callback state '{key}'", f"has {len(weights)} best_weights, "
                           f"the model has {len(shapes)} parameters and buffers")
            for i, shape in enumerate(shapes):
                got = state[f"best_weights.{i}"].shape
                if got != tuple(shape):
                    raise _bad(nne, f"callback state '{key}' entry 'best_weights.{i}'",
                               f"has shape {got}, expected {tuple(shape)}")
    return CheckpointContents(params, opt_state, iterations, rng_state, order, fit, callbacks)


def _weights(model) -> list:
    """What EarlyStopping's best weights snapshot, in order: parameters, then buffers."""
    return model.parameters() + model.buffers()


def _check_metadata_types(nne) -> None:
    """The metadata entries nnjit writes have the types it writes."""
    meta = nne.metadata
    for key in ("nnjit_version", "model"):
        if key in meta and not isinstance(meta[key], str):
            raise _bad(nne, f"metadata {key!r}", f"is {type(meta[key]).__name__}, expected a "
                       "string")
    if "optimizer" in meta:
        info = meta["optimizer"]
        if not isinstance(info, dict) or set(info) != {"class", "iterations"}:
            raise _bad(nne, "metadata 'optimizer'", "is not an object {class, iterations}")
        if not isinstance(info["class"], str):
            raise _bad(nne, "metadata 'optimizer' class", "is not a string")
        n = info["iterations"]
        if not is_int(n) or not 0 <= n <= _MAX_COUNT:
            raise _bad(nne, "metadata 'optimizer' iterations", f"is {n!r}, expected a whole "
                       "number in [0, 2**53]")


def metadata_epoch(nne, default: int = 0) -> int:
    """Metadata ``epoch`` (what a run's checkpoints record), checked: a whole number >= 0, else
    :class:`NNEFormatError` naming the file; ``default`` when absent."""
    epoch = nne.metadata.get("epoch", default)
    if not is_int(epoch) or not 0 <= epoch <= _MAX_COUNT:
        raise _bad(nne, "metadata 'epoch'", f"is {epoch!r}, expected a whole number >= 0")
    return epoch


def _check_permutation(nne, order: np.ndarray) -> None:
    """``order`` (int64, 1-D) holds each of 0..n-1 once: the compiled loop indexes rows with it."""
    n = order.size
    field = f"tensor '{RNG}/shuffle_order'"
    bad = np.flatnonzero((order < 0) | (order >= n))
    if bad.size:
        i = int(bad[0])
        raise _bad(nne, field, f"is not a permutation of 0..{n - 1}: value {int(order[i])} at "
                   f"index {i} is out of range")
    seen = np.zeros(n, dtype=np.bool_)
    seen[order] = True
    if not seen.all():
        missing = int(np.flatnonzero(~seen)[0])
        raise _bad(nne, field, f"is not a permutation of 0..{n - 1}: {missing} is missing "
                   "(another value repeats)")
