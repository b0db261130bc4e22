"""A user-defined compiled op family, outside the package, as docs/custom-ops.md builds it.

The SiLU family's two files (kernels, and specs + recorder + dispatchers) are written to a
temporary folder and imported from there, as a user's own modules would be. Checked: a model
using it trains inside the compiled loop and computes x * sigmoid(x) (its outputs equal a NumPy
forward pass with the model's weights), its gradients match finite differences in float64, a
spec without a dispatcher branch stops the run with UnknownOpcodeError naming the op and the
layer, and editing the kernel file between two processes that share one numba cache runs the
edited kernel (numba's own cache would reuse the build: it only checks the file it compiled).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nnjit as nn
from nnjit import ops
from tests.helpers import finite_difference_gradients

# The kernels file: numba kernels only. SCALE is the constant the recompile test edits.
KERNELS = '''\
"""SiLU kernels: y = SCALE * x * sigmoid(x) over flat arrays."""
import math

from nnjit import ops

SCALE = 1.0


@ops.kernel
def silu_forward(x, y, s):
    zero = x.dtype.type(0.0)
    one = x.dtype.type(1.0)
    scale = x.dtype.type(SCALE)
    for k in range(x.shape[0]):
        v = x[k]
        e = math.exp(-abs(v))
        r = one / (one + e)
        s[k] = r if v >= zero else e * r
        y[k] = scale * v * s[k]


@ops.kernel
def silu_backward(y, s, dy, dx, accumulate):
    one = y.dtype.type(1.0)
    scale = y.dtype.type(SCALE)
    for k in range(y.shape[0]):
        g = dy[k] * (scale * s[k] + y[k] * (one - s[k]))
        if accumulate:
            dx[k] += g
        else:
            dx[k] = g
'''

# The family file: specs, recorders and the two dispatchers, importing the kernels file.
# FORGOTTEN has a spec and a recorder but no dispatcher branch (the unknown-opcode test).
FAMILY = '''\
"""A user SiLU op family (docs/custom-ops.md)."""
import numpy as np

from nnjit import ops
from {kernels} import silu_backward, silu_forward


def silu(x):
    saved = x.tape.alloc_tensor(x.rows, x.cols)  # sigmoid(x), for the backward
    return x.tape.record(SILU, [x], x.rows, x.cols, extra_inputs=[saved])


def forgotten(x):
    return x.tape.record(FAMILY.opcode("FORGOTTEN"), [x], x.rows, x.cols)


@ops.dispatcher
def forward(op, i, ctx):
    if op == SILU:
        silu_forward(ops.input_flat(ctx, i, 0), ops.output_flat(ctx, i),
                     ops.input_flat(ctx, i, 1))
    else:
        return False
    return True


@ops.dispatcher
def backward(op, i, ctx):
    if op == SILU:
        if ops.needs_grad(ctx, i, 0):
            silu_backward(ops.output_flat(ctx, i), ops.input_flat(ctx, i, 1),
                          ops.output_grad_flat(ctx, i), ops.input_grad_flat(ctx, i, 0),
                          ops.accumulates(ctx, i, 0))
    else:
        return False
    return True


def reference(x):
    return x / (1.0 + np.exp(-x))


SPECS = [
    ops.OpSpec(name="SILU", arity=1, signature="(B,F)->(B,F)", reference=reference,
               recorder=silu, grad_inputs=(0,)),
    ops.OpSpec(name="FORGOTTEN", arity=1, signature="(B,F)->(B,F)", reference=reference,
               recorder=forgotten, grad_inputs=(0,)),
]
FAMILY = ops.register(ops.OpFamily("{name}", SPECS, forward, backward))
SILU = FAMILY.opcode("SILU")
'''


def write_family(folder: Path, prefix: str) -> tuple[Path, Path]:
    """Write the two files as ``<prefix>_kernels.py`` and ``<prefix>_family.py``."""
    folder.mkdir(parents=True, exist_ok=True)
    kernels = folder / f"{prefix}_kernels.py"
    family = folder / f"{prefix}_family.py"
    kernels.write_text(KERNELS, encoding="utf-8")
    family.write_text(FAMILY.format(kernels=kernels.stem, name=prefix), encoding="utf-8")
    return kernels, family


@pytest.fixture(scope="module")
def user_silu(tmp_path_factory):
    """The user family, imported from a temporary folder (registered once per process)."""
    folder = tmp_path_factory.mktemp("user_ops")
    _, family = write_family(folder, "user_silu")
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(family.stem)
    finally:
        sys.path.remove(str(folder))


def silu_ref(x):
    return x / (1.0 + np.exp(-x))


def mlp(module, n_in, hidden, n_out):
    class SiLU(nn.Module):
        def forward(self, x):
            return module.silu(x)

    return nn.Sequential(nn.Linear(n_in, hidden), SiLU(), nn.Linear(hidden, n_out))


def numpy_forward(model, X):
    """The MLP's forward pass in float64 NumPy from its weights."""
    w = {name: p.data.astype(np.float64) for name, p in model.named_parameters()}
    h = silu_ref(X @ w["0.weight"].T + w["0.bias"].reshape(1, -1))
    return h @ w["2.weight"].T + w["2.bias"].reshape(1, -1)


def test_mlp_with_the_user_family_trains_in_the_compiled_loop(user_silu):
    X, y = nn.datasets.load_digits()
    X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, 0.2, seed=0)
    X_train, X_test = nn.datasets.standardize(X_train, X_test)
    nn.set_seed(0)
    model = mlp(user_silu, 64, 32, 10)
    trainer = nn.Trainer(model, nn.Adam(lr=1e-3), nn.CrossEntropyLoss())
    history = trainer.fit(nn.DataLoader(X_train, y_train, batch_size=32), epochs=8,
                          n_iter_no_change=None, verbose=False)
    losses = history["train_loss"].to_numpy()
    assert np.all(np.diff(losses) < 0), losses
    assert np.mean(trainer.predict(X_test) == y_test) > 0.85
    # The program is one compiled op per SiLU record and no Python op, so the fit never
    # returned to Python for it; what the records computed is x * sigmoid(x):
    opcodes = trainer.program.records[:, 0].tolist()
    assert opcodes.count(user_silu.SILU) == 1
    assert not trainer.program.tape.python_ops
    np.testing.assert_allclose(model.predict(X_test), numpy_forward(model, X_test),
                               rtol=2e-4, atol=2e-4)


def test_user_family_gradients_match_finite_differences_in_float64(user_silu):
    nn.set_seed(3)
    model = mlp(user_silu, 5, 6, 3)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(7, 5)) * 2.0, rng.normal(size=(7, 3))
    np.testing.assert_allclose(trainer.predict_outputs(X), numpy_forward(model, X),
                               rtol=1e-12, atol=1e-12)
    grads = trainer.gradients(X, Y)
    numeric = finite_difference_gradients(trainer, model, X, Y)
    assert set(grads) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    for name in grads:
        np.testing.assert_allclose(grads[name], numeric[name], rtol=1e-6, atol=1e-9,
                                   err_msg=name)


def test_a_spec_without_a_dispatcher_branch_stops_with_unknown_opcode(user_silu):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return user_silu.forgotten(self.fc(x))

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(10, 4)).astype(np.float32), rng.integers(0, 3, 10)
    model = Net()
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.CrossEntropyLoss())
    before = [p.data.copy() for p in model.parameters()]
    code = user_silu.FAMILY.opcode("FORGOTTEN")
    with pytest.raises(nn.UnknownOpcodeError,
                       match=rf"op 1 of layer 'Net' is forgotten \(opcode {code}\)"):
        trainer.fit(nn.DataLoader(X, y, batch_size=5), epochs=1, verbose=False)
    for a, b in zip(before, model.parameters()):  # stopped before any step
        np.testing.assert_array_equal(a, b.data)


def test_a_user_opcode_in_a_build_without_its_family_stops_with_unknown_opcode(user_silu):
    """A record of the user family replayed by a build that does not include the family (here
    the base build, forged after tracing an MLP) reaches the end of the dispatch chain."""
    X = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    trainer = nn.Trainer(model)
    trainer.predict_outputs(X)
    records = trainer.program.records
    assert records[1, 0] == ops.registry.opcode("RELU")  # the ReLU of layer '1'
    records[1, 0] = user_silu.SILU
    with pytest.raises(nn.UnknownOpcodeError,
                       match=rf"op 1 of layer '1' is silu \(opcode {user_silu.SILU}\)"):
        trainer.predict_outputs(X)


def test_an_unregistered_family_or_opcode_is_refused_when_the_model_is_traced():
    """Nothing is compiled or run for an op no registered family owns: tracing stops first."""
    def handles_nothing(op, i, ctx):
        return False

    family = ops.OpFamily("never_registered", [
        ops.OpSpec("NEVER_REGISTERED", 1, "(B,F)->(B,F)", reference=silu_ref, grad_inputs=(0,))],
        handles_nothing, handles_nothing)

    class Net(nn.Module):
        def __init__(self, opcode):
            super().__init__()
            self.opcode = opcode
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            h = self.fc(x)
            return h.tape.record(self.opcode(), [h], h.rows, h.cols)

    X = np.zeros((4, 4), np.float32)
    with pytest.raises((RuntimeError, ValueError),
                       match="'never_registered' has no opcodes before it is registered"):
        nn.Trainer(Net(lambda: family.opcode("NEVER_REGISTERED"))).predict_outputs(X)
    with pytest.raises((RuntimeError, ValueError),
                       match=r"^Net: opcode 4242 belongs to no registered op family"):
        nn.Trainer(Net(lambda: 4242)).predict_outputs(X)


# -- editing the kernel file recompiles ----------------------------------------------------------
PRINT_OUTPUT = '''\
import json, sys
import numpy as np
import nnjit as nn
import edited_family

class SiLU(nn.Module):
    def forward(self, x):
        return edited_family.silu(x)

model = nn.Sequential(nn.Linear(3, 3), SiLU())
model.load_state_dict({"0.weight": np.eye(3, dtype=np.float32),
                       "0.bias": np.zeros(3, np.float32)})
x = np.array([[-2.0, 0.5, 3.0]], dtype=np.float32)
print(json.dumps(model.predict(x).tolist()))
'''


def run_user_script(folder: Path) -> tuple[np.ndarray, list[str]]:
    """The script's printed outputs, and what it compiled: the compile notice's start lines
    (it speaks only when numba compiles, not when it loads from its cache). The script uses this
    session's compiled-code cache (the training loop is compiled once for every test); the user
    family's entries are its own, keyed by the files in ``folder``."""
    env = dict(os.environ, NNJIT_COMPILE_NOTICE="1",
               PYTHONPATH=os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    env.pop("NUMBA_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, "-c", PRINT_OUTPUT], cwd=folder, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    outputs = np.array(json.loads(out.stdout.strip().splitlines()[-1]))
    return outputs, [line for line in out.stderr.splitlines() if "nnjit: compiling" in line]


def test_editing_the_kernel_file_recompiles_on_the_next_run(tmp_path):
    """Three processes share one numba cache: the first compiles the family's build, the
    second runs after an edit of the kernel file (not the file of the dispatchers, and not
    nnjit's: numba's cache alone would load the first build) and must compute the edited
    kernel, the third runs the same files again and loads that build from the cache."""
    folder = tmp_path / "user"
    kernels, family = write_family(folder, "edited")
    assert kernels.parent == family.parent and kernels != family
    x = np.array([[-2.0, 0.5, 3.0]])

    first, compiled = run_user_script(folder)
    np.testing.assert_allclose(first, silu_ref(x), rtol=1e-5)
    assert any("family" in line for line in compiled), compiled

    kernels.write_text(KERNELS.replace("SCALE = 1.0", "SCALE = 2.0"), encoding="utf-8")
    second, compiled = run_user_script(folder)
    np.testing.assert_allclose(second, 2.0 * silu_ref(x), rtol=1e-5)
    # the edited family alone: the training loop and the rest come from the cache
    assert compiled and all("family" in line for line in compiled), compiled

    third, compiled = run_user_script(folder)
    np.testing.assert_array_equal(third, second)
    assert not compiled, "an unchanged family compiled again: its build was not cached"
