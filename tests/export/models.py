"""Small models with PyTorch twins, and nnjit outputs for the export tests."""

from __future__ import annotations

import numpy as np

import nnjit as nn
from nnjit.ops.opcodes import ACTIVATIONS
from nnjit.tape.tape import Tape

#: Every nnjit activation layer with its PyTorch twin (non-default parameters where there are any).
ACTIVATION_PAIRS = {
    "ReLU": (lambda: nn.ReLU(), lambda torch: torch.nn.ReLU()),
    "LeakyReLU": (lambda: nn.LeakyReLU(0.1), lambda torch: torch.nn.LeakyReLU(0.1)),
    "ELU": (lambda: nn.ELU(0.7), lambda torch: torch.nn.ELU(0.7)),
    "SELU": (lambda: nn.SELU(), lambda torch: torch.nn.SELU()),
    "Tanh": (lambda: nn.Tanh(), lambda torch: torch.nn.Tanh()),
    "Sigmoid": (lambda: nn.Sigmoid(), lambda torch: torch.nn.Sigmoid()),
    "Softplus": (lambda: nn.Softplus(), lambda torch: torch.nn.Softplus()),
    "GELU": (lambda: nn.GELU(), lambda torch: torch.nn.GELU()),
}


def traced_opcodes(layer) -> set:
    """The opcodes a layer records on a (3, 4) input."""
    tape = Tape()
    x = tape.input(4)
    with tape.recording():
        layer(x)
    return {node.opcode for node in tape.nodes}


def assert_every_activation_covered() -> None:
    covered = set().union(*(traced_opcodes(make()) for make, _ in ACTIVATION_PAIRS.values()))
    assert covered == set(ACTIVATIONS), f"add the missing activations: {set(ACTIVATIONS) - covered}"


def mlp_pair(torch, activation: str, dtype, n_in=5, hidden=7, n_out=3):
    """``Linear -> activation -> Dropout -> Linear`` in nnjit and PyTorch (eval mode, same dtype;
    the PyTorch weights are its own random initialisation)."""
    make, make_torch = ACTIVATION_PAIRS[activation]
    ours = nn.Sequential(nn.Linear(n_in, hidden), make(), nn.Dropout(0.3), nn.Linear(hidden, n_out))
    theirs = torch.nn.Sequential(torch.nn.Linear(n_in, hidden), make_torch(torch),
                                 torch.nn.Dropout(0.3), torch.nn.Linear(hidden, n_out))
    return ours, theirs.to(torch.float64 if dtype == np.float64 else torch.float32).eval()


def compiled(model, dtype, n_features: int) -> nn.Trainer:
    """A trainer that has compiled ``model`` in ``dtype`` (its parameters now live in the arena,
    in that dtype) without changing any weight: one prediction lays it out."""
    trainer = nn.Trainer(model, dtype=dtype, seed=0)
    trainer.predict_outputs(np.zeros((2, n_features)))
    return trainer


def torch_outputs(torch, module, X) -> np.ndarray:
    with torch.no_grad():
        return module(torch.from_numpy(X)).numpy()


def inputs(n_features: int, dtype, rows: int = 12, seed: int = 0) -> np.ndarray:
    """Normal rows plus a few large ones (both tails of every activation, overflow-prone exps)."""
    X = np.random.default_rng(seed).normal(scale=2.0, size=(rows, n_features))
    X[:2] *= 25.0
    return X.astype(dtype)
