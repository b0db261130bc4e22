"""A long fit for tests/train/test_interrupt.py to interrupt with real SIGINTs.

argv: mode ("threaded": verbose=1, no callbacks; "chunked": a callback), rows. Prints ``epoch
<seconds>`` (one epoch's time, measured), then ``ready`` when the long fit starts, and at the end
``done <epochs>`` (fit returned) or ``aborted <epochs>`` (KeyboardInterrupt).
"""

from __future__ import annotations

import signal
import sys
import time

import numpy as np

import nnjit as nn

signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
mode, rows = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
X = rng.normal(size=(rows, 64)).astype(np.float32)
y = rng.integers(0, 10, rows)
with nn.seeded(0):
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
trainer = nn.Trainer(model, nn.Adam(lr=1e-4), seed=0)
start = time.perf_counter()
trainer.fit(nn.DataLoader(X[: rows // 10], y[: rows // 10], batch_size=64), epochs=1, verbose=0)
start = time.perf_counter()
trainer.fit(nn.DataLoader(X[: rows // 10], y[: rows // 10], batch_size=64), epochs=1, verbose=0)
print("epoch", 10 * (time.perf_counter() - start), flush=True)
callbacks = [lambda history: None] if mode == "chunked" else None
print("ready", flush=True)
try:
    history = trainer.fit(nn.DataLoader(X, y, batch_size=64), epochs=1000, verbose=1,
                          n_iter_no_change=None, callbacks=callbacks)
except KeyboardInterrupt as e:
    print("aborted", len(trainer.history_), str(e).replace("\n", " "), flush=True)
    sys.exit(3)
print("done", len(history), history.attrs["stop_reason"], flush=True)
