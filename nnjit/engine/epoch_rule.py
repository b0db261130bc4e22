"""The epoch rule: the history row, early stopping (scikit-learn's rule), the best-weights
snapshot and its restore, and ReduceLROnPlateau's step (or scikit-learn's "adaptive" rate), at
the end of every epoch of a fit."""

import numpy as np

from nnjit.engine.fields import (
    C_MONITOR,
    C_PATIENCE,
    C_PLATEAU,
    C_RESTORE_BEST,
    C_TOL,
    H_EPOCH,
    H_LR,
    H_SECONDS,
    H_TRAIN_ACC,
    H_TRAIN_LOSS,
    H_VAL_ACC,
    H_VAL_LOSS,
    MONITOR_TRAIN_LOSS,
    MONITOR_VAL_ACCURACY,
    MONITOR_VAL_LOSS,
    PLATEAU_SKLEARN_ADAPTIVE,
    PLATEAU_TORCH,
    SKLEARN_ADAPTIVE_MIN_LR,
    ST_BAD_EPOCHS,
    ST_BEST,
    ST_BEST_EPOCH,
    ST_EPOCH,
    ST_EPOCH_T0,
    ST_LR,
    ST_RESTORED,
    ST_STOPPED,
    ST_TRAIN_CORRECT,
    ST_TRAIN_LOSS,
    ST_TRAIN_N,
    ST_VAL_CORRECT,
    ST_VAL_LOSS,
    ST_VAL_N,
)
from nnjit.kernels import gradients as gk
from nnjit.kernels._jit import jit
from nnjit.kernels.clock import monotonic_ns


@jit
def _copy_into(src, dst):
    for k in range(src.size):
        dst[k] = src[k]


@jit
def end_epoch(cfg, state, history, params, best, plateau, n_val):
    """Epoch bookkeeping: history row, early stopping (scikit-learn's rule), best snapshot."""
    e = int(state[ST_EPOCH])
    train_loss = state[ST_TRAIN_LOSS] / max(state[ST_TRAIN_N], 1.0)
    history[e, H_EPOCH] = e + 1
    history[e, H_TRAIN_LOSS] = train_loss
    history[e, H_TRAIN_ACC] = state[ST_TRAIN_CORRECT] / max(state[ST_TRAIN_N], 1.0)
    history[e, H_LR] = state[ST_LR]
    if n_val > 0:
        history[e, H_VAL_LOSS] = state[ST_VAL_LOSS] / state[ST_VAL_N]
        history[e, H_VAL_ACC] = state[ST_VAL_CORRECT] / state[ST_VAL_N]
    else:
        history[e, H_VAL_LOSS] = np.nan
        history[e, H_VAL_ACC] = np.nan
    history[e, H_SECONDS] = (monotonic_ns() - state[ST_EPOCH_T0]) * 1e-9

    monitor = int(cfg[C_MONITOR])
    tol = cfg[C_TOL]
    if monitor == MONITOR_VAL_ACCURACY:
        value = history[e, H_VAL_ACC]
        improved_by_tol = value >= state[ST_BEST] + tol
        better = value > state[ST_BEST]
    else:
        value = history[e, H_VAL_LOSS] if monitor == MONITOR_VAL_LOSS else train_loss
        improved_by_tol = value <= state[ST_BEST] - tol
        better = value < state[ST_BEST]
    state[ST_BAD_EPOCHS] = 0.0 if improved_by_tol else state[ST_BAD_EPOCHS] + 1.0
    if better or state[ST_BEST_EPOCH] < 0:
        state[ST_BEST] = value
        state[ST_BEST_EPOCH] = e
        if monitor != MONITOR_TRAIN_LOSS and cfg[C_RESTORE_BEST] != 0.0:
            _copy_into(params, best)
    if cfg[C_PLATEAU] == PLATEAU_TORCH:
        state[ST_LR] = gk.plateau_step(plateau[:8], plateau[8:], value)
    state[ST_EPOCH] = e + 1
    if cfg[C_PATIENCE] > 0 and state[ST_BAD_EPOCHS] > cfg[C_PATIENCE]:
        if cfg[C_PLATEAU] == PLATEAU_SKLEARN_ADAPTIVE and state[ST_LR] > SKLEARN_ADAPTIVE_MIN_LR:
            state[ST_LR] /= 5.0  # scikit-learn's "adaptive": a smaller rate instead of a stop
            state[ST_BAD_EPOCHS] = 0.0
        else:
            state[ST_STOPPED] = 1.0


@jit
def restore_best(cfg, state, params, best):
    if (cfg[C_RESTORE_BEST] != 0.0 and int(cfg[C_MONITOR]) != MONITOR_TRAIN_LOSS
            and state[ST_BEST_EPOCH] >= 0):
        _copy_into(best, params)
        state[ST_RESTORED] = 1.0
