"""The split helper (nnjit/data/split.py): one Split value for tables and runs, and the row
splitters pinned to the rows each seed picked before they moved here (``nnjit report`` re-splits
a saved run's data by its seed, so a seed must keep its rows)."""

from __future__ import annotations

import numpy as np
import pytest

from nnjit.data.split import Split, split_rows, train_test_split
from nnjit.data.tabular import TabularDataset
from nnjit.experiment.data import RunData

LABELS = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 0, 1, 2, 0, 0, 1, 2, 1, 0, 2, 1])


def test_seed_zero_keeps_its_rows():
    stratified = split_rows(len(LABELS), 0.2, 0.2, 0, LABELS, 3)
    assert [r.tolist() for r in stratified] == [
        [0, 1, 3, 4, 5, 6, 10, 11, 13, 14, 15, 18], [7, 9, 17, 19], [2, 8, 12, 16]]
    plain = split_rows(len(LABELS), 0.2, 0.2, 0)
    assert [r.tolist() for r in plain] == [
        [0, 1, 5, 7, 8, 9, 10, 12, 14, 15, 17, 18], [3, 11, 13, 16], [2, 4, 6, 19]]
    X_train, X_test, _, _ = train_test_split(np.arange(20), LABELS, 0.25, seed=0)
    assert X_train.tolist() == [19, 3, 13, 4, 0, 9, 10, 7, 8, 15, 5, 16, 6, 2, 1]
    assert X_test.tolist() == [18, 12, 17, 11, 14]


@pytest.mark.parametrize("seed", range(5))
def test_split_rows_partitions_and_stratifies(seed):
    train, val, test = split_rows(len(LABELS), 0.3, 0.25, seed, LABELS, 3)
    assert (len(val), len(test)) == (round(0.3 * 20), round(0.25 * 20))
    assert sorted(np.concatenate([train, val, test]).tolist()) == list(range(20))
    assert all(np.all(np.diff(part) > 0) for part in (train, val, test))
    assert set(LABELS[train].tolist()) == {0, 1, 2}  # every class keeps a training row
    with pytest.raises(ValueError, match="TabularDataset: 3 rows leave no training rows"):
        split_rows(3, 0.5, 0.4, seed, where="TabularDataset")


def test_tables_and_runs_share_the_split_value():
    X = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.arange(5)
    run = RunData(X[:3], y[:3], X[3:], y[3:], X[:0], y[:0], None, "iris")
    assert isinstance(run, Split) and issubclass(TabularDataset, Split)
    assert run.evaluation()[2] == "validation" and run.encoding is None
    split = Split(X[:2], y[:2], X[2:3], y[2:3], X[3:], y[3:])
    X_eval, y_eval, name = split.evaluation()
    assert name == "test" and y_eval.tolist() == [3, 4] and X_eval is split.X_test
