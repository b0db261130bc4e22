"""How :meth:`Trainer.fit` reads its positional arguments: ``fit(X, y, ...)`` as Keras does, and
the older ``fit(train, epochs, val)``.

``fit(train, y=None, epochs=100, val=None)``: the second argument is the targets when it is an
array-like (``fit(X, y)``, ``fit((X_num, X_cat), y)`` for a model with several inputs), and the
epoch count when it is a number (``fit(loader, 50)``, ``fit((X, y), 50, val)``: the order fit
had before it took ``y``). Everything else that could be read two ways is refused with a message
saying how to pass the data, rather than guessed.
"""

from __future__ import annotations

import numbers

import numpy as np

from nnjit.checks import Bool, Int
from nnjit.data.full_batch import FullBatch
from nnjit.data.graph import Graph
from nnjit.data.images import ImageDataset
from nnjit.data.loader import DataLoader
from nnjit.data.neighbor_loader import NeighborLoader
from nnjit.data.sequences import SequenceDataset

DEFAULT_EPOCHS = 100
KERAS_BATCH_SIZE = 32  # fit(X, y)'s batch size when none is given (Keras' default)

_LOADERS = (DataLoader, Graph, FullBatch, NeighborLoader, ImageDataset, SequenceDataset)
_DATASETS = (ImageDataset, SequenceDataset)  # (hold their labels; fit(dataset, batch_size=))
_BATCH_SIZE = Int(min=1, none_ok=True, says="an int >= 1 or None")
_SHUFFLE = Bool(none_ok=True)
_HOW = ("pass fit(X, y, epochs=..., val=(X_val, y_val)) with arrays, or fit(loader, "
        "epochs=..., val=...) with a DataLoader")


def fit_arguments(train, y, epochs, val, batch_size, shuffle, validation_data=None,
                  validation_split=None, full_batch=False):
    """``(train, epochs, val)`` for ``fit(train, y, epochs, val, batch_size=, shuffle=)``:
    ``train`` a DataLoader built from ``(train, y)`` when ``y`` holds the targets, else as
    given; ``epochs`` and ``val`` moved to their places for the older positional order. Keras'
    names: ``validation_data`` is ``val``; ``validation_split`` keeps the last fraction of
    ``fit(X, y)``'s rows for validation. ``full_batch`` (an optimizer that steps on every row at
    once, LBFGS): ``fit(X, y)`` without ``batch_size`` makes one batch of every row.

    Raises:
        ValueError: a call that could mean two things, or data in the wrong place; the message
            says how to pass it.
    """
    batch_size = _BATCH_SIZE.check("fit: batch_size", batch_size)
    shuffle = _SHUFFLE.check("fit: shuffle", shuffle)
    if validation_data is not None:
        if val is not None:
            raise ValueError("fit: val and validation_data (Keras' name for it) are both given; "
                             "pass one")
        val = validation_data
    if validation_split is not None:
        train, y, val = _split_off_validation(train, y, val, validation_split)
    if y is None:
        if isinstance(train, np.ndarray):
            raise ValueError(f"fit: got X ({_describe(train)}) without targets; {_HOW}")
        if isinstance(train, tuple) and len(train) == 2 and not isinstance(
                train[1], _LOADERS) and (batch_size is not None or shuffle is not None):
            return _loader(train[0], train[1], batch_size, shuffle, full_batch), epochs, val
        if isinstance(train, _DATASETS) and (batch_size is not None or shuffle is not None):
            return _loader(train, None, batch_size, shuffle, full_batch), epochs, val
        _refuse_loader_options(train, batch_size, shuffle)
        return train, epochs, val
    if _is_number(y):  # the older order: fit(train, epochs, val)
        if _is_number(epochs) or epochs is None:
            if epochs != DEFAULT_EPOCHS:
                raise ValueError(f"fit: epochs is given twice ({y!r} as the second argument and "
                                 f"{epochs!r}); {_HOW}")
        elif val is not None:
            raise ValueError(f"fit: the third argument and val are both validation data; {_HOW}")
        else:
            val = epochs  # fit(train, epochs, val) positionally
        if isinstance(train, tuple) and len(train) == 2 and (batch_size is not None
                                                             or shuffle is not None):
            return _loader(train[0], train[1], batch_size, shuffle, full_batch), y, val
        _refuse_loader_options(train, batch_size, shuffle)
        return train, y, val
    if isinstance(train, _LOADERS):
        raise ValueError(f"fit: got a {type(train).__name__}, which holds its own targets, and "
                         f"a second argument {_describe(y)}; pass validation data as val=..., "
                         f"epochs as epochs=...")
    if isinstance(y, _LOADERS) or isinstance(y, tuple) or (
            isinstance(y, list) and y and all(isinstance(v, np.ndarray) for v in y)):
        raise ValueError(f"fit: y must be one array of targets (one row or value per sample), "
                         f"got {_describe(y)}; validation data goes in val=(X_val, y_val)")
    if not _is_number(epochs) and epochs is not None:
        raise ValueError(f"fit: epochs must be an int >= 1, got {_describe(epochs)} (fit(X, y, "
                         f"epochs, val) is the order); {_HOW}")
    return _loader(train, y, batch_size, shuffle, full_batch), epochs, val


def _split_off_validation(X, y, val, fraction):
    """``(X, y, val)`` with the last ``fraction`` of the rows of arrays ``X`` (or a tuple of
    them) and ``y`` moved to ``val``, as Keras' ``validation_split``."""
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) \
            or not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"fit: validation_split must be a fraction of the rows in (0, 1), got "
                         f"{fraction!r}")
    if val is not None:
        raise ValueError("fit: validation_split and val (or validation_data) are both given; "
                         "pass one")
    if y is None or _is_number(y) or isinstance(X, _LOADERS):
        raise ValueError("fit: validation_split splits fit(X, y)'s arrays; with a "
                         f"{type(X).__name__} pass the validation data as val=...")
    parts = X if isinstance(X, tuple) else (X,)
    n = len(y)
    keep = n - int(n * float(fraction))  # (Keras: the first rows train, the last validate)
    if keep < 1 or keep == n:
        raise ValueError(f"fit: validation_split={fraction} of {n} rows leaves "
                         f"{'no training' if keep < 1 else 'no validation'} rows")
    head = tuple(np.asarray(a)[:keep] for a in parts)
    tail = tuple(np.asarray(a)[keep:] for a in parts)
    y = np.asarray(y)
    unpack = (lambda t: t) if isinstance(X, tuple) else (lambda t: t[0])
    return unpack(head), y[:keep], (unpack(tail), y[keep:])


def _loader(X, y, batch_size, shuffle, full_batch=False) -> DataLoader:
    """Keras' ``fit(x, y)`` batching: 32 rows per batch (``full_batch``: every row), shuffled
    every epoch, unless told."""
    shuffle = True if shuffle is None else shuffle
    loader = DataLoader(X, y, batch_size=KERAS_BATCH_SIZE if batch_size is None else batch_size,
                        shuffle=shuffle)
    if full_batch and batch_size is None and loader.n_samples > KERAS_BATCH_SIZE:
        loader = DataLoader(X, y, batch_size=loader.n_samples, shuffle=shuffle)
    return loader


def _refuse_loader_options(train, batch_size, shuffle) -> None:
    if batch_size is None and shuffle is None:
        return
    option = "batch_size" if batch_size is not None else "shuffle"
    raise ValueError(f"fit: {option}= applies to arrays (fit(X, y, {option}=...)); a "
                     f"{type(train).__name__} has its own (set it on the DataLoader)")


def _is_number(value) -> bool:
    """A scalar (an epoch count, or a wrong one fit's epoch check names), not targets."""
    return isinstance(value, (numbers.Number, np.generic)) or (
        isinstance(value, np.ndarray) and value.ndim == 0)


def _describe(value) -> str:
    """A value named in an error without printing a whole array."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{type(value).__name__} of shape {tuple(shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return type(value).__name__
