"""The fast path of a repeated fit: reuse what the trainer's last fit derived before it ran.

Before its compiled loop runs, a fit turns its arguments into a checked plan, adapts its data
(loaders, arrays in the arena dtype, checks), lays the model out and builds the run's options.
For a small fit that is most of its time (about 130 us of Python against tens of microseconds of
compiled epochs on Iris; docs/performance.md), and when a fit repeats the trainer's last one, as
a search over learning rates or a loop of short fits does, all of it comes out the same.

:class:`RepeatFit` keeps the last fit's set-up (:class:`~nnjit.train.fit_setup.FitSetup`) with
a key of everything it was derived from; the next fit builds its key (:func:`fit_key`, a few
attribute reads) and, when the keys are equal, takes the set-up instead of deriving it again.
Anything else takes the full path, which records a new set-up. The key holds:

- by identity: the trainer's program, loss, optimizer and regularizer; a training or validation
  :class:`~nnjit.data.loader.DataLoader` (through a weak reference: the key keeps no data alive). A
  loader adapts its data once, so a fit on the same loader reads the same arrays either way.
- by value and type: the fit's arguments, the loaders' batching attributes, the arena dtype, the
  optimizer's kind, the regularizer's coefficient, and the type, shape and dtype of arrays
  passed to ``fit`` directly (``fit(X, y, val=(Xv, yv))``).

Arrays passed directly are not kept: every fit checks and converts them again with the
functions a new DataLoader uses (same results, same errors), so new arrays of the same shape,
and contents changed in place, take the fast path and are seen. What no set-up holds is read by
every fit on either path: the learning rate and optimizer state, the weights (bound again when
another program took them), the shuffle order, the run state.

Only plain fits take this path: no callbacks, scheduler, progress output, batch log,
``initial_epoch``, ``schedule_epochs``, Keras' validation options, MPI, LBFGS, graph data or
augmentation. ``tests/train/test_repeat_fit.py`` checks that a fit through it equals the full
path's bit for bit after each kind of change.
"""

from __future__ import annotations

import weakref
from operator import is_

import numpy as np

from nnjit.data.inputs import check_input, to_arena
from nnjit.data.loader import DataLoader, check_targets
from nnjit.train.fit_setup import FitSetup

_SCALARS = frozenset((int, float, bool, str, type(None)))  # fit arguments the key can hold

# The names a DataLoader built from arrays gives them in its errors (the full path builds one).
_X_NAME, _Y_NAME = "DataLoader: X", "DataLoader: y"


class RepeatFit:
    """The last plain fit's :class:`~nnjit.train.fit_setup.FitSetup` and the key it was
    derived under."""

    __slots__ = ("key", "setup")

    def __init__(self, key: tuple, setup: FitSetup):
        self.key, self.setup = key, setup

    def reuse(self, trainer, key: tuple, train, y, val) -> FitSetup | None:
        """The set-up of the fit ``fit(train, y, val=val, ...)`` whose key is ``key``, its data
        read again; None when it differs from the recorded fit (then take the full path)."""
        same, values = key
        if values != self.key[1] or not all(map(is_, same, self.key[0])):
            return None
        # (checked first, then converted: the full path's order, so the first error is its)
        train, val = _checked(train, y), None if val is None else _checked(val, None)
        loss, dtype, n_outputs = trainer.loss, trainer.dtype, trainer.program.output_cols
        X, Y = _converted(train, loss, n_outputs, dtype)
        if val is None:
            return self.setup._replace(X=X, Y=Y)
        Xv, Yv = _converted(val, loss, n_outputs, dtype)
        return self.setup._replace(X=X, Y=Y, Xv=Xv, Yv=Yv)


def fit_key(trainer, train, y, val, arguments: tuple) -> tuple | None:
    """The key of a plain fit ``fit(train, y, val=val, ...)`` whose other arguments are
    ``arguments``: ``(objects, values)``, objects compared by identity and values by equality;
    None when the fit cannot take the fast path (the data is not a DataLoader or plain arrays,
    or the trainer has no fit layout yet, runs on a graph, over MPI or with LBFGS)."""
    program, optimizer, regularizer = trainer.program, trainer.optimizer, trainer.regularizer
    if (program is None or trainer._inference_layout or trainer._graph is not None
            or trainer.distributed is not None or optimizer.full_batch):
        return None
    if not scalar_arguments(arguments):  # (compared by value below)
        return None
    train_key = _data_key(train, y)
    val_key = () if val is None else _data_key(val, None)
    if train_key is None or val_key is None:
        return None
    values = (train_key, val_key, arguments, tuple(map(type, arguments)), trainer.dtype,
              optimizer.kind, trainer._dense_mode,
              None if regularizer is None else (regularizer.coef, regularizer.per_batch))
    return (program, trainer.loss, optimizer, regularizer), values


def scalar_arguments(arguments: tuple) -> bool:
    """Whether a key can hold the fit's arguments: each a plain scalar, compared by value."""
    return _SCALARS.issuperset(map(type, arguments))


def _data_key(data, y) -> tuple | None:
    """A fit's data in the key: a DataLoader by identity and batching, arrays by type, shape
    and dtype (their contents are read again), or None when neither."""
    if y is None and type(data) is DataLoader:
        if data.augment is not None:
            return None
        return (weakref.ref(data), data.batch_size, data.shuffle, data.drop_last)
    return array_pair_key(data, y)


def array_pair_key(data, y) -> tuple | None:
    """``(X shape, X dtype, y shape, y dtype)`` of a fit's arrays, ``fit(X, y)`` or
    ``fit((X, y))`` (a 2-D float X, a 1-D or 2-D y), or None for any other data."""
    if y is None:
        if type(data) is not tuple or len(data) != 2:
            return None
        data, y = data
    if not (type(data) is np.ndarray and data.ndim == 2 and data.dtype.kind == "f"
            and type(y) is np.ndarray and y.ndim in (1, 2)):
        return None
    return (data.shape, data.dtype, y.shape, y.dtype)


def _checked(data, y):
    """A fit's data (a DataLoader, ``(X, y)``, or ``X`` with ``y``; as :func:`_data_key`
    accepts them): the loader, or the arrays ``(X, y)`` passed through a DataLoader's checks."""
    if type(data) is DataLoader:
        return data
    if y is None:
        data, y = data
    X = check_input(data, _X_NAME)
    return X, check_targets(y, len(X), _Y_NAME)


def _converted(data, loss, n_outputs: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(X, Y)`` in the arena dtype, as the full path makes them: a loader's cached arrays, or
    checked arrays converted again (their contents may have changed since the last fit)."""
    if type(data) is DataLoader:
        return data.features(dtype), data.targets(loss, n_outputs, dtype)
    X, y = data
    return to_arena(X, dtype, _X_NAME), loss.prepare_targets(y, n_outputs, dtype, _Y_NAME)
