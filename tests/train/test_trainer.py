"""Trainer behaviour: accuracy, early stopping, divergence, chunking, threads, allocations."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import nnjit as nn
from tests.helpers import count_allocations


def digits_split(seed=0):
    X, y = nn.datasets.load_digits()
    X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, 0.2, seed=seed)
    X_train, X_test = nn.datasets.standardize(X_train, X_test)
    return X_train, X_test, y_train, y_test


def mlp(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out))


def test_digits_reaches_95_percent():
    nn.set_seed(0)
    X_train, X_test, y_train, y_test = digits_split()
    X_tr, X_val, y_tr, y_val = nn.datasets.train_test_split(X_train, y_train, 0.1, seed=1)
    trainer = nn.Trainer(mlp(64, 64, 10), nn.Adam(lr=0.001), nn.CrossEntropyLoss())
    history = trainer.fit(nn.DataLoader(X_tr, y_tr, batch_size=16), epochs=60, val=(X_val, y_val),
                          verbose=False)
    accuracy = np.mean(trainer.predict(X_test) == y_test)
    assert accuracy >= 0.95, f"test accuracy {accuracy:.3f} after {len(history)} epochs"
    assert list(history.columns) == ["epoch", "train_loss", "train_accuracy", "val_loss",
                                     "val_accuracy", "lr", "seconds"]
    assert history["epoch"].tolist() == list(range(1, len(history) + 1))
    assert (history["seconds"] > 0).all()


def test_early_stopping_stops_after_patience_and_restores_best():
    """Validation labels are shuffled, so validation loss rises as the model fits the train set."""
    nn.set_seed(3)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    y_val = rng.permutation(y)
    trainer = nn.Trainer(mlp(8, 32, 2), nn.Adam(lr=0.01), nn.CrossEntropyLoss())
    patience = 4
    history = trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=200, val=(X, y_val),
                          n_iter_no_change=patience, tol=0.0, verbose=False)
    val = history["val_loss"].to_numpy()
    best = int(np.argmin(val))
    # scikit-learn's rule: stop once more than `patience` epochs in a row brought no improvement.
    assert len(history) == best + patience + 2
    assert history.attrs["best_epoch"] == best + 1
    assert history.attrs["restored_best"]
    assert trainer.evaluate(X, y_val)["loss"] == pytest.approx(val[best], rel=1e-5)


def test_no_val_monitors_train_loss_and_keeps_last_weights():
    nn.set_seed(0)
    X_train, _, y_train, _ = digits_split()
    trainer = nn.Trainer(mlp(64, 16, 10), nn.SGD(lr=0.05), nn.CrossEntropyLoss())
    history = trainer.fit(nn.DataLoader(X_train, y_train, batch_size=32), epochs=5, verbose=False)
    assert len(history) == 5
    assert history.attrs["monitor"] == "train_loss"
    assert not history.attrs["restored_best"]
    assert history["val_loss"].isna().all()
    assert history["train_loss"].iloc[-1] < history["train_loss"].iloc[0]


def test_divergence_raises_naming_epoch_and_restores_best():
    nn.set_seed(0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 4)).astype(np.float32)
    y = (X @ rng.normal(size=(4, 1))).astype(np.float32) * 1e3
    model = mlp(4, 8, 1)
    trainer = nn.Trainer(model, nn.SGD(lr=1e6), nn.MSELoss())
    with pytest.raises(nn.TrainingDivergedError, match=r"at epoch \d+.*layer '"):
        trainer.fit(nn.DataLoader(X, y, batch_size=8), epochs=50, val=(X, y), verbose=False)
    for p in model.parameters():
        assert np.isfinite(p.data).all()


def test_divergence_without_validation_says_which_weights_the_model_keeps():
    """No validated weights to restore: the message says the model keeps the weights of the
    epoch's last step, not its initial ones (issue 25, item 17: it said "left as they were")."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 4)).astype(np.float32)
    y = (X @ rng.normal(size=(4, 1))).astype(np.float32) * 1e3
    model = mlp(4, 8, 1)
    initial = [p.data.copy() for p in model.parameters()]
    trainer = nn.Trainer(model, nn.SGD(lr=1e6), nn.MSELoss())
    with pytest.raises(nn.TrainingDivergedError) as caught:
        trainer.fit(nn.DataLoader(X, y, batch_size=8), epochs=50, verbose=False)
    message = str(caught.value)
    assert "left as they were" not in message
    assert re.search(r"keeps the weights its last step of epoch \d+ left \(trained, not the "
                     r"initial ones", message), message
    assert any(not np.array_equal(p.data, w) for p, w in zip(model.parameters(), initial))


def test_chunked_fit_equals_single_call_bit_for_bit():
    """Callbacks split the fit into one compiled call per epoch; results must not change."""
    X_train, X_test, y_train, y_test = digits_split()
    weights, histories, seen = [], [], []
    for callbacks in (None, [lambda h: seen.append(len(h))]):
        nn.set_seed(7)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10))
        trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss())
        h = trainer.fit(nn.DataLoader(X_train, y_train, batch_size=32), epochs=6,
                        val=(X_test, y_test), callbacks=callbacks, verbose=False)
        weights.append(np.concatenate([p.data.ravel() for p in model.parameters()]))
        histories.append(h.drop(columns="seconds"))
    np.testing.assert_array_equal(weights[0], weights[1])
    assert histories[0].equals(histories[1])
    assert seen == [1, 2, 3, 4, 5, 6]


def test_callback_returning_false_stops_training():
    X_train, _, y_train, _ = digits_split()
    trainer = nn.Trainer(mlp(64, 8, 10), nn.Adam(), nn.CrossEntropyLoss())
    history = trainer.fit(nn.DataLoader(X_train, y_train, batch_size=64), epochs=50,
                          callbacks=[lambda h: len(h) < 3], verbose=False)
    assert len(history) == 3


def test_same_seed_same_weights():
    X_train, _, y_train, _ = digits_split()
    out = []
    for _ in range(2):
        nn.set_seed(11)
        model = mlp(64, 16, 10)
        nn.Trainer(model, nn.Adam(lr=0.01)).fit(nn.DataLoader(X_train, y_train, batch_size=16),
                                                  epochs=3, verbose=False)
        out.append(np.concatenate([p.data.ravel() for p in model.parameters()]))
    np.testing.assert_array_equal(out[0], out[1])


def test_two_trainers_in_threads_match_sequential_runs():
    X_train, X_test, y_train, y_test = digits_split()

    def make(seed):
        nn.set_seed(seed)
        model = mlp(64, 32, 10)
        return model, nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss())

    def fit(trainer):
        trainer.fit(nn.DataLoader(X_train, y_train, batch_size=16), epochs=5,
                    val=(X_test, y_test), verbose=False)

    sequential = []
    for seed in (1, 2):
        model, trainer = make(seed)
        fit(trainer)
        sequential.append([p.data.copy() for p in model.parameters()])
    pairs = [make(seed) for seed in (1, 2)]
    threads = [threading.Thread(target=fit, args=(t,)) for _, t in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (model, _), expected in zip(pairs, sequential):
        for p, e in zip(model.parameters(), expected):
            np.testing.assert_array_equal(p.data, e)


def test_blas_is_single_threaded_during_fit():
    from nnjit.train.threads import blas_thread_counts

    seen = []
    X_train, _, y_train, _ = digits_split()
    trainer = nn.Trainer(mlp(64, 8, 10))
    trainer.fit(nn.DataLoader(X_train, y_train, batch_size=256), epochs=2, verbose=False,
                callbacks=[lambda h: seen.append(blas_thread_counts())])
    assert seen and all(counts and set(counts) == {1} for counts in seen)


def test_zero_nrt_allocations_per_epoch():
    """Steady state allocates nothing: a 12-epoch fit makes as many NRT allocations as a
    2-epoch fit (the fixed cost is the boxing of arguments at the call boundary)."""
    X, y = nn.datasets.load_digits()
    X = X / 16.0
    nn.set_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 10))
    trainer = nn.Trainer(model, nn.Adam(lr=0.001))
    loader = nn.DataLoader(X[:1500], y[:1500], batch_size=16)
    val = nn.DataLoader(X[1500:], y[1500:], batch_size=64)

    def fit(epochs):
        trainer.fit(loader, epochs=epochs, val=val, verbose=False, n_iter_no_change=None)

    fit(1)  # compile / load, lay out
    two, twelve = count_allocations(fit, repeats=(2, 12))
    assert twelve == two, f"{twelve - two} NRT allocations over 10 extra epochs"


def test_binary_classifier_predicts_labels_and_probabilities():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    nn.set_seed(0)
    trainer = nn.Trainer(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)),
                         nn.Adam(lr=0.05), nn.BCEWithLogitsLoss())
    trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=30, verbose=False)
    labels = trainer.predict(X)
    assert labels.shape == (200,) and labels.dtype == np.int64
    assert np.mean(labels == y) > 0.9
    proba = trainer.predict_proba(X)
    np.testing.assert_array_equal(proba[:, 0] > 0.5, labels == 1)


def test_log_batches_records_every_training_batch():
    X_train, X_test, y_train, y_test = digits_split()
    nn.set_seed(0)
    trainer = nn.Trainer(mlp(64, 16, 10), nn.Adam(lr=0.01))
    loader = nn.DataLoader(X_train, y_train, batch_size=256)
    history = trainer.fit(loader, epochs=3, val=(X_test, y_test), n_iter_no_change=None,
                          log_batches=True, verbose=False)
    batches = trainer.batch_history_
    assert list(batches.columns) == ["epoch", "batch", "lr", "train_loss", "train_accuracy"]
    assert len(batches) == 3 * len(loader)
    assert batches["batch"].tolist() == list(range(1, len(loader) + 1)) * 3
    # The epoch's loss is the row-weighted mean of its batches' losses.
    sizes = np.array([256] * (len(loader) - 1) + [len(X_train) - 256 * (len(loader) - 1)])
    for e in (1, 2, 3):
        rows = batches[batches["epoch"] == e]
        expected = np.sum(rows["train_loss"].to_numpy() * sizes) / sizes.sum()
        assert history["train_loss"].iloc[e - 1] == pytest.approx(expected, rel=1e-9)
    assert trainer.fit(loader, epochs=1, verbose=False) is not None
    assert trainer.batch_history_ is None
