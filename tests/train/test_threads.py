"""BLAS set-up: the OpenBLAS kernel hint and single-threaded BLAS during fit."""

from __future__ import annotations

from nnjit.train import threads


def test_coretype_hint_respects_an_explicit_setting(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert threads.openblas_coretype_hint() is None


def test_coretype_hint_can_be_switched_off(monkeypatch):
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.setenv("NNJIT_OPENBLAS_CORETYPE", "off")
    assert threads.openblas_coretype_hint() is None


def test_coretype_hint_only_for_amd_with_avx512(monkeypatch):
    import llvmlite.binding as llvm

    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("NNJIT_OPENBLAS_CORETYPE", raising=False)
    full = {f: True for f in threads._AVX512}
    monkeypatch.setattr(llvm, "get_host_cpu_features", lambda: full)
    monkeypatch.setattr(threads, "_cpu_vendor", lambda: "AuthenticAMD")
    assert threads.openblas_coretype_hint() == "SkylakeX"
    monkeypatch.setattr(threads, "_cpu_vendor", lambda: "GenuineIntel")
    assert threads.openblas_coretype_hint() is None
    monkeypatch.setattr(threads, "_cpu_vendor", lambda: "AuthenticAMD")
    monkeypatch.setattr(llvm, "get_host_cpu_features", lambda: {**full, "avx512vl": False})
    assert threads.openblas_coretype_hint() is None


def test_single_threaded_blas_nests_and_restores():
    before = threads.blas_thread_counts()
    with threads.single_threaded_blas():
        with threads.single_threaded_blas():
            assert set(threads.blas_thread_counts()) == {1}
        assert set(threads.blas_thread_counts()) == {1}
    assert threads.blas_thread_counts() == before


def test_blas_is_pinned_in_worker_threads_too():
    """threadpoolctl ignores OpenBLAS limits set from a non-controlling thread; nnjit must not."""
    import threading

    import numpy as np

    import nnjit as nn

    X, y = nn.datasets.load_digits()
    seen = []

    def fit():
        trainer = nn.Trainer(nn.Sequential(nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 10)), seed=0)
        trainer.fit(nn.DataLoader(X / 16.0, y, batch_size=256), epochs=2, verbose=False,
                    callbacks=[lambda h: seen.append(threads.blas_thread_counts())])

    fit()  # the main thread becomes threadpoolctl's "controlling thread"
    workers = [threading.Thread(target=fit) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(seen) == 6
    assert all(set(counts) == {1} for counts in seen), seen
    assert np.all(np.array(threads.blas_thread_counts()) >= 1)


def test_dense_forward_mode_follows_scipys_openblas(monkeypatch):
    """The forward-product rules follow the kernels of scipy's OpenBLAS (the one numba calls),
    not numpy's; another BLAS or none found gives the AVX2 rules."""
    import os
    from types import SimpleNamespace

    import scipy.linalg.cython_blas

    from nnjit.kernels import dense as kd

    site = os.path.dirname(os.path.dirname(os.path.dirname(scipy.linalg.cython_blas.__file__)))

    def lib(folder, core, api="openblas"):
        return SimpleNamespace(user_api="blas", internal_api=api, architecture=core,
                               filepath=os.path.join(site, folder, "libopenblas.so"))

    def mode(*libs):
        monkeypatch.setattr(threads, "_blas_libraries", lambda: list(libs))
        return threads.dense_forward_mode.__wrapped__()

    assert mode(lib("numpy.libs", "Haswell"), lib("scipy.libs", "SkylakeX")) == kd.MODE_AVX512
    assert mode(lib("numpy.libs", "SkylakeX"), lib("scipy.libs", "Haswell")) == kd.MODE_AVX2
    assert mode(lib("scipy.libs", "Cooperlake")) == kd.MODE_AVX512
    assert mode(lib("scipy.libs", "Zen")) == kd.MODE_AVX2  # OpenBLAS's Zen kernels are AVX2
    assert mode(SimpleNamespace(user_api="blas", internal_api="mkl",
                                filepath="/x/libmkl_rt.so")) == kd.MODE_AVX2
    assert mode() == kd.MODE_AVX2
