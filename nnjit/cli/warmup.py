"""``nnjit warmup``: compile (or load from numba's cache) every piece a built-in model needs.

The training loop, each built-in op family (elementwise, dropout, graph, conv, pooling,
normalization, embedding, joining, recurrent, sparse, conv_lanes, conv_winograd), the batch
loaders (plain, augmenting, the graph family's sampled batches) and the optimizer steps (SGD,
Adam, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam), for one dtype or both:
after it, the first fit of any built-in architecture compiles nothing (a Docker image runs it at
build time).
One line per piece says whether it was compiled or loaded, and how long it took. The MPI hooks
compile at the first data-parallel fit (they need mpi4py and a communicator).
"""

from __future__ import annotations

import time

import numpy as np


def pieces(dtype):
    """``(what, compile)`` of every piece of a built-in model for ``dtype``, in a sensible order:
    ``compile()`` compiles the piece or loads it from numba's cache."""
    from numba import typeof

    from nnjit.engine import dispatch
    from nnjit.kernels.optim import STEPS
    from nnjit.ops.opcodes import BUILTIN_FAMILIES

    def training_loop():
        from nnjit.data.loader import DataLoader
        from nnjit.nn import Linear, Sequential
        from nnjit.train.trainer import Trainer

        X = np.random.default_rng(0).normal(size=(8, 2))
        y = np.arange(8) % 2
        trainer = Trainer(Sequential(Linear(2, 2)), dtype=dtype, seed=0)
        trainer.fit(DataLoader(X, y, batch_size=4), epochs=1, val=(X, y), verbose=False)
        trainer.predict_proba(X)

    # the arrays every run hands the loaders: read-only X and Y in the arena dtype, int64 order
    data = np.zeros((1, 1), dtype=dtype)
    data.flags.writeable = False
    data_types = (typeof(data), typeof(data), typeof(np.zeros(1, np.int64)))
    yield "the training loop", training_loop
    for family in BUILTIN_FAMILIES:
        if not family.core:
            entry = dispatch.family_entry(family)
            yield entry.what, lambda entry=entry: entry.addresses(dtype)
            if family.load_job is not None:
                loader = dispatch.loader_entry((family,), augment=False)
                yield loader.what, lambda loader=loader: loader.addresses(dtype, data_types)
    augmenting = dispatch.loader_entry((), augment=True)
    yield augmenting.what, lambda: augmenting.addresses(dtype, data_types)
    for step in dict.fromkeys(dispatch.optimizer_entry(kind) for kind in sorted(STEPS)):
        yield step.what, lambda step=step: step.addresses(dtype)


def warmup(dtypes=("float32",)) -> int:
    """Compile every piece for each of ``dtypes``, printing one line per piece and a total;
    returns the number of pieces compiled (0: everything came from the cache)."""
    from nnjit.engine.compile_notice import compile_seconds, no_warmup_hint

    compiled_pieces = 0
    with no_warmup_hint():
        for dtype in dtypes:
            dtype = np.dtype(dtype).name
            start, compiled_before, count = time.perf_counter(), compiled_pieces, 0
            for what, compile_ in pieces(dtype):
                before, t0 = compile_seconds(), time.perf_counter()
                compile_()
                seconds, count = time.perf_counter() - t0, count + 1
                if compile_seconds() > before:
                    compiled_pieces += 1
                    print(f"{dtype}: {what}: compiled in {seconds:.1f} s", flush=True)
                else:
                    print(f"{dtype}: {what}: loaded from the cache in {seconds:.2f} s",
                          flush=True)
            print(f"{dtype}: {count} pieces ready in {time.perf_counter() - start:.1f} s "
                  f"({compiled_pieces - compiled_before} compiled)", flush=True)
    return compiled_pieces
