"""``nnjit warmup`` compiles every piece a built-in model needs: after it, the first fit of any
built-in architecture compiles nothing (issue 21).

Both run as a user runs them: the installed ``nnjit`` command, then a fresh Python process, on
the suite's own numba cache (the pieces are the ones every other test needs anyway, so this adds
no compile to the suite's total: it only loads them when another test compiled them first).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numba
import pytest

from tests.test_cli import REPO, nnjit_command

pytestmark = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="nothing compiles without JIT")

# One fit (and predict) of each built-in architecture, float32, in one process; prints the seconds
# it compiled (the compile notice's count: 0.0 when everything came from the cache).
EVERY_ARCHITECTURE = textwrap.dedent("""
    import numpy as np
    import nnjit as nn
    from nnjit.data import Augment
    from nnjit.engine.compile_notice import compile_seconds

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(64, 64)).astype(np.float32), np.arange(64) % 4
    images = X.reshape(-1, 1, 8, 8)

    class Tabular(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 3)
            self.flat = nn.Flatten()
            self.num = nn.Linear(63, 8)
            self.norm = nn.LayerNorm(11)
            self.drop = nn.Dropout(0.1)
            self.out = nn.Linear(11, 4)

        def forward(self, x_num, x_cat):
            h = nn.functional.cat([self.num(x_num), self.flat(self.emb(x_cat))], dim=1)
            return self.out(self.drop(self.norm(h)))

    def fit(model, data, **kw):
        trainer = nn.Trainer(model, nn.Adam(lr=1e-3), seed=0)
        trainer.fit(data, epochs=1, verbose=False, **kw)
        return trainer

    fit(nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 4)),
        nn.DataLoader(X, y, batch_size=16)).predict(X)
    fit(nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 4)),
        nn.DataLoader(images, y, batch_size=16, augment=Augment(crop_padding=1,
                                                                     horizontal_flip=True)))
    fit(nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                      nn.Linear(36, 4)), (images, y)).predict(images)
    cats = (np.arange(64) % 10).reshape(-1, 1)
    fit(Tabular(), nn.DataLoader((X[:, :63], cats), y, batch_size=16))
    from nnjit.experiment.config import NetConfig
    from nnjit.experiment.data import graph_from_dataset

    g = graph_from_dataset(nn.datasets.load_cora())
    for kind in ("graph_conv", "graph_sage", "graph_att"):
        model = NetConfig(kind=kind, in_dim=g.num_features, out_dim=g.num_classes,
                          hidden_dims=[8]).build()
        fit(model, g)
    print("COMPILED", compile_seconds())
""")


def test_after_warmup_no_built_in_architecture_compiles(tmp_path):
    out = nnjit_command("warmup", cwd=tmp_path, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert re.fullmatch(r"float32: \d+ pieces ready in \d+\.\d s \(\d+ compiled\)", lines[-1])
    for what in ("the training loop", "the conv family", "the pooling family",
                 "the normalization family", "the embedding family", "the joining family",
                 "the graph family", "the graph batch loader", "the augmenting batch loader"):
        assert any(line.startswith(f"float32: {what}: ") for line in lines), out.stdout
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")]), NNJIT_COMPILE_NOTICE="1")
    fits = subprocess.run([sys.executable, "-c", EVERY_ARCHITECTURE], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert fits.returncode == 0, fits.stderr[-3000:]
    assert "nnjit: compil" not in fits.stderr, fits.stderr
    assert fits.stdout.split("COMPILED ")[1].strip() == "0.0", fits.stdout
