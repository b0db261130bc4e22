"""The fit history: a DataFrame built on first use that behaves as a plain one."""

import copy
import pickle

import numpy as np
import pandas as pd

import nnjit as nn
from nnjit.engine import fields
from nnjit.train.history import build_frame, history_frame


def _rows(n=4):
    rows = np.random.default_rng(0).random((n, len(fields.HISTORY_COLUMNS)))
    rows[:, fields.H_EPOCH] = np.arange(1, n + 1)
    return rows


def _lazy(rows, classification=True):
    return history_frame(rows, classification, {"best_epoch": 2})


def test_builds_on_first_use_and_becomes_a_plain_frame():
    rows = _rows()
    h = _lazy(rows)
    assert isinstance(h, pd.DataFrame) and type(h) is not pd.DataFrame
    assert len(h) == 4
    assert type(h) is pd.DataFrame
    assert list(h.columns) == list(fields.HISTORY_COLUMNS)
    assert h["epoch"].dtype == np.int64 and h["epoch"].tolist() == [1, 2, 3, 4]
    np.testing.assert_array_equal(h["seconds"].to_numpy(), rows[:, fields.H_SECONDS])
    assert h.attrs == {"best_epoch": 2}


def test_every_kind_of_first_use_builds_it():
    rows = _rows()
    assert _lazy(rows).seconds.sum() == rows[:, fields.H_SECONDS].sum()  # column attribute
    assert np.asarray(_lazy(rows)).shape == rows.shape
    assert "train_loss" in repr(_lazy(rows))
    assert _lazy(rows).attrs["best_epoch"] == 2
    assert (_lazy(rows) == _lazy(rows)).all().all()
    for h in (pickle.loads(pickle.dumps(_lazy(rows))), copy.deepcopy(_lazy(rows)),
              copy.copy(_lazy(rows)), _lazy(rows).copy(), pd.concat([_lazy(rows)])):
        assert type(h) is pd.DataFrame and len(h) == 4


def test_frame_equality_either_side():
    rows = _rows()
    plain = build_frame(rows, True)
    pd.testing.assert_frame_equal(plain, _lazy(rows))
    pd.testing.assert_frame_equal(_lazy(rows), plain)
    pd.testing.assert_frame_equal(_lazy(rows), _lazy(rows))


def test_regression_history_has_no_accuracy():
    rows = _rows()
    h = _lazy(rows, classification=False)
    assert h["train_accuracy"].isna().all() and h["val_accuracy"].isna().all()
    assert list(h.columns) == list(fields.HISTORY_COLUMNS) and h["epoch"].dtype == np.int64
    for i, column in enumerate(fields.HISTORY_COLUMNS):
        if column not in ("train_accuracy", "val_accuracy"):
            np.testing.assert_array_equal(h[column].to_numpy(), rows[:, i])


def test_built_with_public_pandas_api_only():
    """pandas is pinned only ``>=2``: no private pandas names (``_from_arrays``, ``_mgr``...)."""
    import re
    from pathlib import Path

    import nnjit.train.history as module

    source = Path(module.__file__).read_text(encoding="utf-8")
    private = re.findall(r"\b(?:pd|pandas|DataFrame|frame|self)\._[a-z]\w*", source)
    assert not private, private
    for name in ("_from_arrays", "_mgr", "_attrs", "_flags", "_item_cache"):
        assert name not in source


def test_the_rows_are_copied_when_built():
    rows = _rows()
    h = _lazy(rows)
    assert len(h) == 4
    rows[:] = -1.0
    assert h["epoch"].tolist() == [1, 2, 3, 4]


def test_fit_returns_the_history_and_keeps_it():
    X = np.random.default_rng(1).normal(size=(40, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    trainer = nn.Trainer(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), seed=0)
    h = trainer.fit((X, y), epochs=3, val=(X, y), verbose=False, n_iter_no_change=None)
    assert h is trainer.history_
    assert h.shape == (3, len(fields.HISTORY_COLUMNS)) and h["epoch"].tolist() == [1, 2, 3]
    assert h.attrs["stop_reason"] == "reached the epoch limit" and h.attrs["monitor"] == "val_loss"
