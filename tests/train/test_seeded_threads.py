"""Reproducible models built and trained in threads: ``nnjit.seeded`` (a per-thread init
generator), ``Linear(generator=...)`` and ``Trainer(seed=...)``; ``set_seed`` is process-wide."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nnjit as nn

THREADS, MODELS = 8, 3


def _data():
    X, y = nn.datasets.load_iris()
    return nn.datasets.standardize(np.asarray(X, np.float32)), y


def _build_and_train(seed: int, X, y):
    with nn.seeded(seed):  # this thread's generator: initial weights and the trainer's seed
        model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
        initial = [p.data.copy() for p in model.parameters()]
        trainer = nn.Trainer(model, nn.Adam(lr=0.01))
    trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=3, verbose=False)
    return initial, [p.data.copy() for p in model.parameters()]


def _run_in_threads(job, seeds):
    results, errors = {}, []
    barrier = threading.Barrier(THREADS)

    def worker(k):
        try:
            barrier.wait()  # all threads build their models at the same moment
            results[k] = [job(seed) for seed in seeds[k]]
        except BaseException as e:  # reported by the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_threads_with_seeded_build_equal_sequential_runs():
    X, y = _data()
    seeds = {k: [100 * k + m for m in range(MODELS)] for k in range(THREADS)}
    threaded = _run_in_threads(lambda seed: _build_and_train(seed, X, y), seeds)
    for k in range(THREADS):
        for m, seed in enumerate(seeds[k]):
            initial, final = _build_and_train(seed, X, y)
            for a, b in zip(initial + final, threaded[k][m][0] + threaded[k][m][1]):
                np.testing.assert_array_equal(a, b)
    firsts = {threaded[k][m][0][0].tobytes() for k in range(THREADS) for m in range(MODELS)}
    assert len(firsts) == THREADS * MODELS  # different seeds, different weights


def test_explicit_generator_for_linear():
    a = nn.Linear(5, 7, generator=np.random.default_rng(3))
    nn.set_seed(99)  # the process-wide generator plays no part
    b = nn.Linear(5, 7, generator=np.random.default_rng(3))
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    with pytest.raises(TypeError, match=r"Linear: generator must be a numpy.random.Generator"):
        nn.Linear(5, 7, generator=3)


def test_seeded_is_per_thread_and_nests():
    nn.set_seed(0)
    process_wide = nn.Linear(3, 3).weight.data.copy()
    with nn.seeded(1):
        inner = nn.Linear(3, 3).weight.data.copy()
        with nn.seeded(np.random.default_rng(1)):  # a Generator is used as is
            np.testing.assert_array_equal(nn.Linear(3, 3).weight.data, inner)
    nn.set_seed(0)
    np.testing.assert_array_equal(nn.Linear(3, 3).weight.data, process_wide)  # untouched
    with pytest.raises(TypeError, match=r"seeded: seed must be a non-negative int"):
        with nn.seeded("1"):
            pass
