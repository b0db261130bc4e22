"""Importing any nnjit module and training leave numba's threading layer alone: no training path
runs parallel code (the prange twins live in benchmarks/parallel_builds.py), so nothing may ask
numba for a layer or start its threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys
import numba
from numba.np.ufunc import parallel as numba_parallel
requested = numba.config.THREADING_LAYER
import importlib, pkgutil
import numpy as np
import nnjit as nn
for module in pkgutil.walk_packages(nn.__path__, "nnjit."):  # every module, the graph kernels too
    if not module.name.endswith("__main__"):
        importlib.import_module(module.name)
after_import = dict(layer=numba.config.THREADING_LAYER, started=numba_parallel._is_initialized)
X, y = nn.datasets.load_iris()
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss())
trainer.fit(nn.DataLoader(X, y, batch_size=32), epochs=2)
print(json.dumps(dict(requested=requested, after_import=after_import,
                      after_fit=dict(layer=numba.config.THREADING_LAYER,
                                     started=numba_parallel._is_initialized),
                      benchmarks=[m for m in sys.modules if m.startswith("benchmarks")])))
"""


def test_imports_and_a_fit_leave_the_threading_layer_alone():
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_THREADING_LAYER",
                                                             "NUMBA_DISABLE_JIT")}
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["requested"] == "default"
    # numba's _is_initialized turns True once its threading layer has launched threads
    assert seen["after_import"] == {"layer": "default", "started": False}
    assert seen["after_fit"] == {"layer": "default", "started": False}
    assert seen["benchmarks"] == []
