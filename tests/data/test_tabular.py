"""TabularDataset: split, one-hot encoding and scaling from the training part only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from nnjit.data.loader import DataLoader
from nnjit.data.tabular import TabularDataset
from nnjit.data.tabular_encoding import TabularEncoding


def _frame(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.normal(40, 12, n),
        "income": rng.lognormal(10, 1, n),
        "city": rng.choice(["paris", "oslo", "rome"], n),
        "member": rng.random(n) < 0.3,
        "plan": pd.Categorical(rng.choice(["gold", "basic"], n), categories=["gold", "basic"]),
        "const": np.full(n, 7.0),
        "label": rng.choice(["no", "yes", "maybe"], n, p=[0.6, 0.3, 0.1]),
        "price": rng.normal(100, 10, n),
    })


FEATURES = ["age", "income", "city", "member", "plan", "const"]


def test_shapes_dtypes_and_feature_names():
    ds = TabularDataset.from_dataframe(_frame(), FEATURES, "label")
    assert ds.feature_names == ("age", "income", "city=oslo", "city=paris", "city=rome",
                                "member=False", "member=True", "plan=gold", "plan=basic", "const")
    assert ds.classes == ("maybe", "no", "yes") and ds.n_outputs == 3
    for X, y in ((ds.X_train, ds.y_train), (ds.X_val, ds.y_val), (ds.X_test, ds.y_test)):
        assert X.dtype == np.float32 and X.flags.c_contiguous and X.shape[1] == 10
        assert y.dtype == np.int64 and y.shape == (len(X),)
    assert ds.X_train.flags.writeable                 # numba would compile a readonly variant
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.X_train = None
    DataLoader(ds.X_train, ds.y_train, batch_size=16)     # accepted as is


def test_scaling_and_categories_use_training_rows_only():
    df = _frame()
    ds = TabularDataset.from_dataframe(df, FEATURES, "label")
    train = df.iloc[ds.train_rows]
    for j, col in enumerate(["age", "income"]):
        mean, std = train[col].mean(), train[col].std(ddof=0)
        assert mean != pytest.approx(df[col].mean(), rel=1e-9)      # the full-frame mean differs
        for X, rows in ((ds.X_train, ds.train_rows), (ds.X_val, ds.val_rows),
                        (ds.X_test, ds.test_rows)):
            expected = (df[col].to_numpy()[rows] - mean) / std
            np.testing.assert_allclose(X[:, j], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ds.X_train[:, :2].mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(ds.X_train[:, :2].std(axis=0), 1, atol=1e-5)
    np.testing.assert_array_equal(ds.X_train[:, 9], 0)         # std 0 -> scale 1, centred
    assert ds.encodings[5].scale == 1.0 and ds.encodings[5].mean == 7.0
    city = ds.X_test[:, 2:5]
    np.testing.assert_array_equal(city, pd.get_dummies(df["city"].iloc[ds.test_rows])
                                  [["oslo", "paris", "rome"]].to_numpy(dtype=np.float32))


def test_unseen_category_zeros_in_the_split_an_error_in_new_rows():
    df = _frame(60)
    df.loc[[5], "city"] = "lima"                  # one row: in train for some seeds, not others
    for seed in range(50):
        ds = TabularDataset.from_dataframe(df, ["city", "age"], "label", seed=seed)
        if 5 not in ds.train_rows:
            break
    else:
        pytest.fail("row 5 always in training")
    assert "city=lima" not in ds.feature_names
    part, rows = (ds.X_val, ds.val_rows) if 5 in ds.val_rows else (ds.X_test, ds.test_rows)
    np.testing.assert_array_equal(part[np.flatnonzero(rows == 5)[0], :3], 0)
    new = pd.DataFrame({"city": ["tokyo", "oslo"], "age": [30.0, 50.0]})
    with pytest.raises(ValueError, match=r"transform: column 'city' has the category 'tokyo' "
                       r"\(row 0\), which the training rows did not have; known: 'oslo', "):
        ds.transform(new)
    X = ds.transform(new, unseen="zeros")
    np.testing.assert_array_equal(X[0, :3], 0)
    np.testing.assert_array_equal(X[1, :3], [1, 0, 0])


def test_split_sizes_disjoint_reproducible_and_stratified():
    df = _frame(200)
    ds = TabularDataset.from_dataframe(df, FEATURES, "label", val=0.15, test=0.15, seed=3)
    assert (len(ds.train_rows), len(ds.val_rows), len(ds.test_rows)) == (140, 30, 30)
    rows = np.concatenate([ds.train_rows, ds.val_rows, ds.test_rows])
    np.testing.assert_array_equal(np.sort(rows), np.arange(200))
    full = np.bincount(ds.transform_target(df), minlength=3) / 200
    for y in (ds.y_train, ds.y_val, ds.y_test):
        counts = np.bincount(y, minlength=3)
        assert np.all(np.abs(counts - full * len(y)) <= 1.0), (counts, full * len(y))
    again = TabularDataset.from_dataframe(df, FEATURES, "label", val=0.15, test=0.15, seed=3)
    np.testing.assert_array_equal(again.test_rows, ds.test_rows)
    np.testing.assert_array_equal(again.X_val, ds.X_val)
    other = TabularDataset.from_dataframe(df, FEATURES, "label", val=0.15, test=0.15, seed=4)
    assert not np.array_equal(other.test_rows, ds.test_rows)


def test_labels_mapped_and_every_class_trains():
    df = pd.DataFrame({"x": np.arange(21.0), "y": [7] * 10 + [3] * 10 + [9]})
    ds = TabularDataset.from_dataframe(df, ["x"], "y", val=0.2, test=0.2)
    assert ds.classes == (3, 7, 9)
    assert 2 in ds.y_train                       # the single class-9 row stays in training
    np.testing.assert_array_equal(ds.y_train, ds.transform_target(df.iloc[ds.train_rows]))
    np.testing.assert_array_equal(ds.decode_labels(ds.y_test), df["y"].to_numpy()[ds.test_rows])
    with pytest.raises(ValueError, match=r"labels not among the classes.*\[4\]"):
        ds.transform_target([3, 4])


def test_empty_val_and_test_parts():
    ds = TabularDataset.from_dataframe(_frame(50), ["age"], "label", val=0, test=0)
    assert ds.X_val.shape == (0, 1) and ds.y_test.shape == (0,) and len(ds.X_train) == 50


def test_missing_values_error_names_columns_and_counts():
    df = _frame(40)
    df.loc[[1, 2, 3], "age"] = np.nan
    df["city"] = df["city"].astype(object)
    df.loc[[4], "city"] = None
    df.loc[[9, 10], "label"] = None
    with pytest.raises(ValueError) as err:
        TabularDataset.from_dataframe(df, FEATURES, "label")
    msg = str(err.value)
    assert "age (3 of 40)" in msg and "city (1 of 40)" in msg and "label (2 of 40)" in msg
    assert "income" not in msg and "impute" in msg
    clean = TabularDataset.from_dataframe(_frame(40), FEATURES, "label")
    with pytest.raises(ValueError, match=r"transform: missing values.*age \(3 of 40\)"):
        clean.transform(df)


def test_missing_columns_and_bad_arguments():
    df = _frame(30)
    with pytest.raises(ValueError, match=r"missing columns \['agee', 'tgt'\] \(named as features or target\).*'age'"):
        TabularDataset.from_dataframe(df, ["agee", "city"], "tgt")
    with pytest.raises(ValueError, match="both feature and target"):
        TabularDataset.from_dataframe(df, ["age", "label"], "label")
    with pytest.raises(ValueError, match="task must be one of"):
        TabularDataset.from_dataframe(df, ["age"], "label", task="ranking")
    with pytest.raises(ValueError, match="val \\+ test must be < 1"):
        TabularDataset.from_dataframe(df, ["age"], "label", val=0.5, test=0.5)
    with pytest.raises(ValueError, match="val must be a fraction"):
        TabularDataset.from_dataframe(df, ["age"], "label", val=-0.1)
    with pytest.raises(ValueError, match="infinite"):
        TabularDataset.from_dataframe(df.assign(age=np.inf), ["age"], "label")
    with pytest.raises(ValueError, match="unsupported dtype"):
        TabularDataset.from_dataframe(df.assign(when=pd.Timestamp("2024-01-01")), ["when"],
                                      "label")
    with pytest.raises(ValueError, match="no rows"):
        TabularDataset.from_dataframe(df.iloc[:0], ["age"], "label")


def test_regression_path():
    df = _frame(100)
    ds = TabularDataset.from_dataframe(df, ["age", "city"], "price", task="regression")
    assert ds.classes is None and ds.n_outputs == 1
    assert ds.y_train.dtype == np.float32 and ds.y_train.shape == (70, 1)
    np.testing.assert_allclose(ds.y_test[:, 0], df["price"].to_numpy()[ds.test_rows], rtol=1e-6)
    multi = TabularDataset.from_dataframe(df, ["city"], ["price", "age"], task="regression")
    assert multi.y_val.shape == (15, 2) and multi.target == ("price", "age")
    np.testing.assert_allclose(multi.transform_target(df)[:, 1], df["age"], rtol=1e-6)
    none = TabularDataset.from_dataframe(df, None, "price", task="regression")
    assert "price" not in none.features and "label=yes" in none.feature_names
    with pytest.raises(ValueError, match="target column 'city' must be numeric"):
        TabularDataset.from_dataframe(df, ["age"], "city", task="regression")
    with pytest.raises(ValueError, match="classification takes one target"):
        TabularDataset.from_dataframe(df, ["age"], ["price", "label"])


def test_transform_reproduces_every_part():
    df = _frame(120)
    ds = TabularDataset.from_dataframe(df, FEATURES, "label", seed=1)
    for X, rows in ((ds.X_train, ds.train_rows), (ds.X_val, ds.val_rows),
                    (ds.X_test, ds.test_rows)):
        np.testing.assert_array_equal(ds.transform(df.iloc[rows]), X)
    shuffled = df.iloc[::-1].drop(columns=["label", "price"]).assign(extra="ignored")
    np.testing.assert_array_equal(ds.transform(shuffled)[::-1][ds.test_rows], ds.X_test)
    with pytest.raises(ValueError, match=r"missing columns \['plan'\] \(the model was trained on them\)"):
        ds.transform(df.drop(columns="plan"))
    with pytest.raises(ValueError, match="'age' was numeric in training"):
        ds.transform(df.assign(age=df["age"].astype(str)))


def test_encoding_round_trips_through_json_and_scores_new_rows(tmp_path):
    df = _frame(120)
    ds = TabularDataset.from_dataframe(df, FEATURES, "label", seed=1)
    path = tmp_path / "encoding.json"
    ds.encoding.save(path)
    assert not list(tmp_path.glob("*.tmp"))
    loaded = TabularEncoding.load(path)
    assert loaded.state() == ds.encoding.state()
    assert loaded.feature_names == ds.feature_names and loaded.classes == ds.classes
    # columns in another order, the target and an extra column present: the same X
    new = df.iloc[ds.test_rows][["price", "label", *reversed(FEATURES)]].assign(id=1)
    np.testing.assert_array_equal(loaded.transform(new), ds.X_test)
    np.testing.assert_array_equal(loaded.decode_labels(ds.y_test), df["label"].iloc[ds.test_rows])
    with pytest.raises(ValueError, match=r"transform: missing columns \['city'\]"):
        loaded.transform(new.drop(columns="city"))
    with pytest.raises(ValueError, match="column 'plan' has the category 'platinum'"):
        loaded.transform(new.assign(plan="platinum"))
    regression = TabularDataset.from_dataframe(df, ["age", "city"], ["price", "income"],
                                               task="regression").encoding
    assert TabularEncoding.from_state(regression.state()).target == ("price", "income")


def _state(**changes):
    ds = TabularDataset.from_dataframe(_frame(60), ["age", "city"], "label")
    state = ds.encoding.state()
    state.update(changes)
    return state


@pytest.mark.parametrize("change, message", [
    ({"format": "other"}, "not an nnjit tabular encoding"),
    ({"version": 2}, "of version 1"),
    ({"task": "ranking"}, "task must be one of"),
    ({"classes": []}, "classes must be a non-empty list"),
    ({"classes": ["a", "a"]}, "classes repeat"),
    ({"classes": [["nested"]]}, "class label must be a string"),
    ({"target": 3.5}, "target name must be a string or an int"),
    ({"columns": []}, "columns must be a non-empty list"),
    ({"columns": [{"name": "age", "kind": "numeric", "mean": 1.0}]}, "missing \\['scale'\\]"),
    ({"columns": [{"name": "age", "kind": "numeric", "mean": 1.0, "scale": 0.0}]},
     "scale must be > 0"),
    ({"columns": [{"name": "age", "kind": "numeric", "mean": "1", "scale": 1.0}]},
     "mean must be a finite number"),
    ({"columns": [{"name": "age", "kind": "numeric", "mean": 1e400, "scale": 1.0}]},
     "mean must be a finite number"),
    ({"columns": [{"name": "c", "kind": "categorical", "categories": ["x", "x"]}]},
     "categories repeat"),
    ({"columns": [{"name": "c", "kind": "image"}]}, "kind 'numeric' or 'categorical'"),
    ({"columns": [{"name": "label", "kind": "categorical", "categories": ["x"]}]},
     "both feature and target"),
    ({"extra": 1}, "unexpected \\['extra'\\]"),
])
def test_encoding_from_state_rejects_bad_files(change, message):
    with pytest.raises(ValueError, match=message):
        TabularEncoding.from_state(_state(**change), "enc.json")


def test_encoding_load_rejects_non_json_and_nan(tmp_path):
    import json

    path = tmp_path / "e.json"
    state = _state()
    state["columns"][0]["mean"] = float("nan")
    path.write_text(json.dumps(state))  # Python's json writes NaN; the loader must refuse it
    with pytest.raises(ValueError, match="e.json: not a JSON encoding file"):
        TabularEncoding.load(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not a JSON encoding file"):
        TabularEncoding.load(path)
    bad = TabularDataset.from_dataframe(
        pd.DataFrame({"d": [pd.Timestamp(0)] * 4, "x": [1.0] * 4, "y": [0, 1] * 2}).astype(
            {"d": object}), ["d", "x"], "y")
    with pytest.raises(ValueError, match="cannot store the encoding: column 'd': category"):
        bad.encoding.state()
