"""Resume state: what ``fit(initial_epoch=N)`` needs to continue a fit exactly.

A fit's own progress lives in the run state row (epochs done, scheduler step, early-stopping
counters), the ReduceLROnPlateau vector and the best-weights snapshot; callbacks keep theirs in
:meth:`~nnjit.train.callbacks.Callback.state`. :func:`fit_state` and :func:`callback_states` take
them out (checkpoints store them); :func:`carry_fit_state` and :func:`load_callback_states` put
them back when a fit starts after exactly the epochs they were saved after, so 5 epochs then
``fit(epochs=10, initial_epoch=5)`` equals 10 epochs bit for bit.
"""

from __future__ import annotations

import warnings

import numpy as np

from nnjit.engine import fields
from nnjit.engine.run_options import RunOptions
from nnjit.schedulers import PLATEAU_PARAMS
from nnjit.train.run_state import RunState

#: ``warnings.warn`` stack level that names the user's ``fit(...)`` line: the warning is made
#: here, called from a Trainer helper, called from ``Trainer.fit``.
_FIT_CALLER = 4


def fit_state(state: RunState, options: RunOptions, monitor_code: int, plateau: np.ndarray,
              best: np.ndarray) -> dict:
    """The fit state of ``state`` after a fit with ``options`` (see :meth:`Trainer.fit_state`):
    scalars, the plateau vector and the best-weights snapshot (empty when the fit keeps none)."""
    keep_best = (options.restore_best and state.best_epoch >= 0
                 and monitor_code != fields.MONITOR_TRAIN_LOSS)
    return {
        "epoch": float(state.epoch), "fit_step": float(state.fit_step),
        "best": float(state.best), "best_epoch": float(state.best_epoch),
        "bad_epochs": float(state.bad_epochs),
        "stopped": float(state.early_stopped), "lr": float(state.lr),
        "monitor": float(monitor_code),
        "plateau": np.array(plateau, dtype=np.float64),
        "best_params": (np.array(best, copy=True) if keep_best
                        else np.zeros(0, dtype=best.dtype)),
    }


def carry_fit_state(saved: dict, state: RunState, plateau: np.ndarray, best: np.ndarray,
                    initial_epoch: int, monitor_code: int):
    """Continue early stopping, the plateau rule and the best snapshot from ``saved["fit"]``
    when it was taken after ``initial_epoch`` epochs; returns ``saved`` (None otherwise)."""
    fit = saved.get("fit")
    if fit is None:  # no fit yet, or a checkpoint written before fit states existed
        return None
    if int(fit["epoch"]) != initial_epoch or int(fit["monitor"]) != monitor_code:
        why = (f"was saved after epoch {int(fit['epoch'])}"
               if int(fit["epoch"]) != initial_epoch else "monitors another metric")
        warnings.warn(f"fit: initial_epoch={initial_epoch} but the trainer's saved fit state "
                      f"{why}: early stopping, ReduceLROnPlateau and callback states start "
                      "afresh", stacklevel=_FIT_CALLER)
        return None
    state.fit_step = fit["fit_step"]
    state.best = fit["best"]
    state.best_epoch = fit["best_epoch"]
    state.bad_epochs = fit["bad_epochs"]
    state.stopped = fit["stopped"]
    saved_plateau = fit["plateau"]
    if plateau.size and saved_plateau.size == plateau.size:
        plateau[len(PLATEAU_PARAMS):] = saved_plateau[len(PLATEAU_PARAMS):]
        state.lr = fit["lr"]
    snapshot = fit["best_params"]
    if snapshot.size == best.size:
        best[:] = snapshot
    return saved


def warn_restored_weights(state: RunState, initial_epoch: int) -> None:
    """Warn when the previous fit ended by restoring an earlier epoch's weights: continuing
    from them is not the uninterrupted fit that ``initial_epoch`` suggests."""
    best = int(state.best_epoch) + 1  # 1-based, as epochs are counted
    if state.restored == 1.0 and int(state.epoch) == initial_epoch and best != initial_epoch:
        warnings.warn(f"fit: initial_epoch={initial_epoch} continues from the weights of "
                      f"epoch {best}, which the previous fit restored (restore_best) when "
                      f"it ended, not from epoch {initial_epoch}'s: to continue exactly, "
                      "save a checkpoint during the fit (in a callback's on_epoch_end) and "
                      "load it", stacklevel=_FIT_CALLER)


def callback_keys(callbacks):
    """``(key, callback)`` pairs: the class name, ``Name#2`` for its second instance, ..."""
    seen: dict[str, int] = {}
    for cb in callbacks.callbacks:
        name = type(cb).__name__
        seen[name] = seen.get(name, 0) + 1
        yield (name if seen[name] == 1 else f"{name}#{seen[name]}"), cb


def callback_states(callbacks) -> dict:
    """``{key: state}`` of the callbacks (a CallbackList, or None) that have a state."""
    if not callbacks:
        return {}
    out = {}
    for key, cb in callback_keys(callbacks):
        state = cb.state()
        if state is not None:
            out[key] = state
    return out


def load_callback_states(callbacks, saved: dict) -> None:
    """Give each callback the state saved under its key (see :func:`callback_keys`)."""
    states = saved.get("callbacks") or {}
    for key, cb in callback_keys(callbacks):
        if key in states:
            cb.load_state(states[key])
