"""ReduceLROnPlateau's rule: one source, run as Python by the scheduler, compiled for the loop."""

import numpy as np

from nnjit.kernels._jit import jit

#: Layout of ``ReduceLROnPlateau.plateau_params()`` (float64; flags are 0.0 / 1.0).
PLATEAU_PARAMS = ("mode_max", "factor", "patience", "threshold", "threshold_abs", "cooldown",
                  "min_lr", "eps")
#: Layout of the plateau state vector that :func:`plateau_rule` updates in place.
PLATEAU_STATE = ("lr", "best", "num_bad_epochs", "cooldown_counter")


def plateau_rule(params: np.ndarray, state: np.ndarray, metric: float) -> float:
    """One ``ReduceLROnPlateau.step(metric)``: update ``state`` in place, return the new rate.

    This is PyTorch's rule. The metric improves on ``best`` when it beats
    ``best * (1 -/+ threshold)`` (``"rel"``) or ``best -/+ threshold`` (``"abs"``). NaN never
    improves. After more than ``patience`` epochs in a row without improvement, the rate becomes
    ``max(lr * factor, min_lr)``, unless that changes it by ``eps`` or less. Then ``cooldown``
    epochs follow in which bad epochs are not counted.

    The function uses only float64 scalars and arrays: :data:`plateau_step` is this source
    compiled, which the training loop calls, and ``ReduceLROnPlateau.step`` runs it as Python.

    Args:
        params: float64 ``(8,)`` laid out as :data:`PLATEAU_PARAMS`.
        state: float64 ``(4,)`` laid out as :data:`PLATEAU_STATE`; updated in place.
        metric: the monitored value for the epoch just finished.

    Returns:
        The learning rate for the next epoch (also ``state[0]``).
    """
    best = state[1]
    threshold = params[3]
    if params[0] == 0.0:  # mode "min"
        if params[4] == 0.0:
            better = metric < best * (1.0 - threshold)
        else:
            better = metric < best - threshold
    else:
        if params[4] == 0.0:
            better = metric > best * (threshold + 1.0)
        else:
            better = metric > best + threshold
    if better:
        state[1] = metric
        state[2] = 0.0
    else:
        state[2] += 1.0
    if state[3] > 0.0:  # in cooldown: bad epochs do not count
        state[3] -= 1.0
        state[2] = 0.0
    if state[2] > params[2]:
        old_lr = state[0]
        new_lr = max(old_lr * params[1], params[6])
        if old_lr - new_lr > params[7]:
            state[0] = new_lr
        state[3] = params[5]
        state[2] = 0.0
    return state[0]


#: The rule compiled (what the training loop's epoch end calls).
plateau_step = jit(plateau_rule)
