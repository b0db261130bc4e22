"""The fast path of a fresh trainer's first fit: take the set-up an earlier trainer derived for
a model of the same structure on data of the same form.

A grid search, a seed table or a loop of cross-validation folds builds a new model and a new
:class:`~nnjit.train.trainer.Trainer` for every fit. The layout is cached already
(:mod:`nnjit.engine.program_cache`), but the rest of the set-up (the arguments checked into a
plan, the data adapted through loaders, the batch sizes, checks and run options;
:mod:`nnjit.train.fit_setup`) is derived again by every trainer, and on Iris it costs more than
the compiled epochs. It depends on the model only through its structure, and on the data only
through its form, so when both are those of a recorded fit it comes out the same.

A record is made by a trainer's first plain fit (as :mod:`nnjit.train.repeat_fit` defines
plain: no callbacks, scheduler, progress, batch log, Keras' validation options, MPI, LBFGS or
graphs) and is found in two steps:

1. :func:`fresh_key`, a few attribute reads, describes what the set-up is derived from but the
   model: the fit's arguments by type and value; the data by form (a DataLoader's batching and
   its arrays' shapes and dtypes, or the shapes and dtypes of arrays passed directly); the arena
   dtype, the BLAS mode, the classes of the loss and optimizer, the optimizer's kind and the
   regularizer's class, coefficient and rule. Their values are never kept.
2. The model: the new trainer's :class:`~nnjit.train.layout_service.Layout` (one walk, the
   structure key: every module's class, path, mode and plain attributes, every parameter's name,
   shape, dtype and ``requires_grad``, the loss's attributes, the input specs and rows) must
   equal the recorded one, else the full path runs. A model the structure key cannot describe (a
   user's ``forward``) never takes this path.

The data are read again as the full path reads them (the checks and conversions of a new
DataLoader: same arrays, same errors), the program is a fresh instance of the cached layout
bound to the new model's parameters, and the optimizer and regularizer are the trainer's own
(the regularizer's spans, which follow from the layout and its rule, are the record's unless a
subclass derives them). The repeated fit's key the trainer keeps for its next fit
(:mod:`nnjit.train.repeat_fit`) is made from the fresh key's parts (:func:`repeat_key`).
``tests/train/test_fresh_fit.py`` checks that fits through it equal the full path's bit for
bit, and that each kind of change to the model, loss, data or arguments takes the full path.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from nnjit.data.loader import DataLoader
from nnjit.regularizers import Regularizer
from nnjit.train.fit_setup import FitSetup
from nnjit.train.layout_service import Layout
from nnjit.train.repeat_fit import _checked, _converted, array_pair_key, scalar_arguments

MAX_RECORDS = 32  # fits of different forms kept (least recently used dropped first)

_lock = threading.Lock()  # (fresh trainers fit in threads: joblib's threading backend)
_records: OrderedDict[tuple, FreshRecord] = OrderedDict()
stats = {"taken": 0}  # fits that took a record since the process started (tests read it)


class FreshRecord(NamedTuple):
    """What a fresh fit takes: the layout's inputs and key, and the set-up without its data."""

    structure: object  # the layout's program_cache Key
    specs: tuple  # the input specs and rows it was laid out for
    rows: int
    n_outputs: int  # the model's output width and the targets' columns
    target_cols: int
    setup: FitSetup  # X, Y (and Xv, Yv with validation data) None: read again by every fit
    reg_spans: object  # the regularizer's spans (read only by the loop), or None: derive them


def fresh_key(trainer, train, y, val, arguments: tuple) -> tuple | None:
    """The first step of the look-up for a plain fit ``fit(train, y, val=val, ...)`` of a trainer
    that has laid nothing out: everything its set-up is derived from but the model, by value;
    None when the fit cannot take this path."""
    optimizer, regularizer, loss = trainer.optimizer, trainer.regularizer, trainer.loss
    if (trainer.program is not None or trainer._graph is not None
            or trainer.distributed is not None or optimizer.full_batch
            or not scalar_arguments(arguments)):
        return None
    train_key = _data_form(train, y)
    val_key = () if val is None else _data_form(val, None)
    if train_key is None or val_key is None:
        return None
    return (train_key, val_key, arguments, tuple(map(type, arguments)), trainer.dtype,
            trainer._dense_mode, type(loss), type(optimizer), optimizer.kind,
            None if regularizer is None else (type(regularizer), regularizer.coef,
                                              regularizer.per_batch, regularizer.weights_only))


def take(trainer, key: tuple, train, y, val) -> FitSetup | None:
    """The set-up of the fit whose :func:`fresh_key` is ``key``, with the trainer laid out and
    its data read again; None when nothing is recorded for it or the model's structure differs
    from the recorded one (then take the full path)."""
    with _lock:
        record = _records.get(key)
        if record is None:
            return None
        _records.move_to_end(key)
    layout = Layout(trainer.model, trainer.loss, record.specs, record.rows, trainer.dtype,
                    where="fit")
    if layout.key is None or layout.key != record.structure:
        return None
    # (checked first, then converted: the full path's order, so the first error is its)
    train, val = _checked(train, y), None if val is None else _checked(val, None)
    loss, dtype, n_outputs = trainer.loss, trainer.dtype, record.n_outputs
    X, Y = _converted(train, loss, n_outputs, dtype)
    kept = record.setup
    Xv, Yv = (kept.Xv, kept.Yv) if val is None else _converted(val, loss, n_outputs, dtype)
    if Y.shape[1] != record.target_cols:  # (the form of y fixes it; checked, not assumed)
        return None
    trainer._install(layout.program(record.target_cols, trainer.seed), layout, record.reg_spans)
    trainer._inference_layout = False
    stats["taken"] += 1
    # (built directly: NamedTuple._replace costs a few microseconds a call)
    return FitSetup(plan=kept.plan, n_batches=kept.n_batches, X=X, Y=Y, Xv=Xv, Yv=Yv,
                    options=kept.options, steps_per_epoch=kept.steps_per_epoch,
                    lr_table=kept.lr_table, plateau=kept.plateau)


def record(trainer, key: tuple, setup: FitSetup) -> None:
    """Keep the set-up a trainer's first fit derived under ``key`` (its data left out) with the
    layout it made, unless that layout has no structure key."""
    structure, specs, rows = trainer._layout_made
    if structure is None:
        return
    kept = setup._replace(X=None, Y=None)
    if setup.Xv.size or setup.Yv.size:  # (without validation data: shared empty arrays)
        kept = kept._replace(Xv=None, Yv=None)
    program, regularizer = trainer.program, trainer.regularizer
    # (the spans follow from the layout and the regularizer's rule, both in the key, unless a
    # subclass derives them its own way)
    reg_spans = (trainer._reg_spans if regularizer is None
                 or type(regularizer).spans is Regularizer.spans else None)
    entry = FreshRecord(structure, specs, rows, program.output_cols, program.target_cols, kept,
                        reg_spans)
    with _lock:
        _records[key] = entry
        _records.move_to_end(key)
        while len(_records) > MAX_RECORDS:
            _records.popitem(last=False)


def repeat_key(trainer, fresh: tuple, train, val) -> tuple:
    """The :func:`~nnjit.train.repeat_fit.fit_key` of the fit that just took a record under
    ``fresh`` (its :func:`fresh_key`), made from that key's parts instead of read again: the
    same objects and values, so the trainer's next fit repeats this one."""
    train_form, val_form, arguments, types, dtype, dense_mode, _, _, kind, rule = fresh
    values = (_repeat_form(train, train_form), () if val is None else _repeat_form(val, val_form),
              arguments, types, dtype, kind, dense_mode,
              None if rule is None else (rule[1], rule[2]))
    return (trainer.program, trainer.loss, trainer.optimizer, trainer.regularizer), values


def _repeat_form(data, form: tuple) -> tuple:
    """:func:`~nnjit.train.repeat_fit.fit_key`'s part for data of :func:`_data_form` ``form``:
    a DataLoader by weak reference and batching, arrays by their shapes and dtypes."""
    if form[0] is DataLoader:
        return (weakref.ref(data), *form[1:4])
    return form[1:]


def clear() -> None:
    """Forget every record (the next fresh fit takes the full path)."""
    with _lock:
        _records.clear()


def _data_form(data, y) -> tuple | None:
    """A fit's data by form: a plain DataLoader of one 2-D float X by its batching and its
    arrays' shapes and dtypes, arrays passed directly by theirs; None for anything else."""
    if y is None and type(data) is DataLoader:
        if data.augment is not None or data.image_dims is not None:
            return None
        X, y = data.X, data.y
        if type(X) is not np.ndarray or y is None:  # (several inputs: a tuple)
            return None
        return (DataLoader, data.batch_size, data.shuffle, data.drop_last, X.shape,
                X.dtype, y.shape, y.dtype)
    arrays = array_pair_key(data, y)
    return None if arrays is None else (np.ndarray, *arrays)
