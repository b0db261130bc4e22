"""One model, or one trainer, used from several threads at once (issue 24, item 1).

nnjit releases the GIL in its compiled calls, so serving one model from a thread pool is what
users do. Before, the calls shared the program's arena: predictions from 8 threads were wrong
(silently), and a predict during a fit changed the fit's weights. Now every run on a model holds
that model's lock: predictions from many threads equal the single-thread ones, and a predict or a
second fit from another thread while a fit runs is refused with ``TrainerBusyError`` naming the
trainer (the fit is unaffected).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nnjit as nn
from nnjit.train.callbacks import Callback

THREADS, CALLS = 16, 64  # 1,024 calls


def _model(seed: int = 0):
    with nn.seeded(seed):
        return nn.Sequential(
            nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
        )


def _slices(n_rows: int, seed: int) -> list[list[slice]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(THREADS):
        calls = []
        for _ in range(CALLS):
            size = int(rng.integers(1, 1500))
            start = int(rng.integers(0, n_rows - size))
            calls.append(slice(start, start + size))
        out.append(calls)
    return out


def _in_threads(work, n_threads: int = THREADS):
    """Run ``work(k)`` in ``n_threads`` threads started together; their results and errors."""
    results, errors = [None] * n_threads, []
    barrier = threading.Barrier(n_threads)

    def worker(k):
        try:
            barrier.wait()
            results[k] = work(k)
        except BaseException as error:  # noqa: BLE001 (reported by the test)
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


@pytest.mark.parametrize("via", ["model.predict", "trainer.predict_outputs"])
def test_predictions_from_16_threads_equal_the_single_thread_ones(via):
    X = np.random.default_rng(1).standard_normal((4000, 64)).astype(np.float32)
    model = _model()
    if via == "model.predict":
        predict = model.predict
    else:
        predict = nn.Trainer(model, loss=nn.CrossEntropyLoss(), seed=0).predict_outputs
    slices = _slices(len(X), 2)
    expected = [[predict(X[s]) for s in calls] for calls in slices]  # one thread, in order

    results, errors = _in_threads(lambda k: [predict(X[s]) for s in slices[k]])
    assert errors == []
    wrong = sum(
        not np.array_equal(got, want)
        for k in range(THREADS)
        for got, want in zip(results[k], expected[k])
    )
    assert wrong == 0, f"{wrong} of {THREADS * CALLS} threaded predictions differ"


def _fit_data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3000, 64)).astype(np.float32)
    y = rng.integers(0, 10, 3000)
    return X, y


def _trainer(seed: int = 0):
    return nn.Trainer(_model(seed), nn.SGD(learning_rate=0.01), nn.CrossEntropyLoss(), seed=0)


def _weights(trainer):
    return [p.data.copy() for p in trainer.model.parameters()]


def test_a_predict_during_a_fit_is_refused_and_the_fit_is_unchanged():
    X, y = _fit_data()
    alone = _trainer()
    alone.fit(nn.DataLoader(X, y, batch_size=32), epochs=8, verbose=0)

    trainer = _trainer()
    trainer.predict_outputs(X[:5])  # laid out and compiled before the race
    started, done = threading.Event(), threading.Event()
    outcomes = {"refused": 0, "answered": 0, "errors": []}

    def fit():
        started.set()
        try:
            trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=8, verbose=0)
        finally:
            done.set()

    def predict():
        started.wait()
        while not done.is_set():
            try:
                trainer.predict_outputs(X[:1000])
                outcomes["answered"] += 1
            except nn.TrainerBusyError as error:
                outcomes["refused"] += 1
                message = str(error)
            except BaseException as error:  # noqa: BLE001 (reported by the test)
                outcomes["errors"].append(error)
                return
        outcomes["message"] = message if outcomes["refused"] else None

    threads = [threading.Thread(target=fit), threading.Thread(target=predict)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes["errors"] == []
    assert outcomes["refused"] >= 1, outcomes  # the fit takes far longer than one predict
    assert "Trainer(model=Sequential" in outcomes["message"], outcomes["message"]
    assert "fitting" in outcomes["message"]
    for got, want in zip(_weights(trainer), _weights(alone)):
        np.testing.assert_array_equal(got, want)


def test_two_fits_at_once_on_one_trainer_one_is_refused():
    X, y = _fit_data()
    alone = _trainer()
    alone.fit(nn.DataLoader(X, y, batch_size=32), epochs=4, verbose=0)
    for _trial in range(3):
        trainer = _trainer()
        trainer.predict_outputs(X[:5])

        def fit(_k, trainer=trainer):
            trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=4, verbose=0)
            return "fit"

        _, errors = _in_threads(fit, n_threads=2)
        # both at once: one fit runs, the other is refused; or, if one ended before the other
        # began, two fits one after the other (the second continues from the first's weights)
        if errors:
            [error] = errors
            assert isinstance(error, nn.TrainerBusyError), repr(error)
            assert "Trainer(model=Sequential" in str(error) and "fit" in str(error)
            for got, want in zip(_weights(trainer), _weights(alone)):
                np.testing.assert_array_equal(got, want)
        else:
            twice = _trainer()
            for _ in range(2):
                twice.fit(nn.DataLoader(X, y, batch_size=32), epochs=4, verbose=0)
            for got, want in zip(_weights(trainer), _weights(twice)):
                np.testing.assert_array_equal(got, want)


def test_a_callback_may_still_predict_during_its_own_fit():
    """The lock is per thread: a callback predicting between epochs (the fit's own thread) is
    not refused."""
    X, y = _fit_data()
    trainer = _trainer()
    seen = []

    class Peek(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            seen.append(trainer.predict_outputs(X[:3]).shape)

    trainer.fit(nn.DataLoader(X, y, batch_size=256), epochs=2, verbose=0, callbacks=[Peek()])
    assert seen == [(3, 10), (3, 10)]
