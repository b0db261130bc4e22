"""nn.RNNCell / nn.GRUCell / nn.LSTMCell against torch.nn's cells: a loop of steps written in
forward (the state of one step feeding the next), outputs and every gradient in float64 within
1e-10, with and without an initial state, with and without biases; and their errors."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.nn import functional as F

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

F64 = {"rtol": 1e-10, "atol": 1e-12}
B, STEPS, I, H = 4, 3, 3, 5
CELLS = {"rnn_tanh": (nn.RNNCell, torch.nn.RNNCell), "rnn_relu": (nn.RNNCell, torch.nn.RNNCell),
         "lstm": (nn.LSTMCell, torch.nn.LSTMCell), "gru": (nn.GRUCell, torch.nn.GRUCell)}


class Loop(nn.Module):
    """STEPS steps of the cell over the columns of a (B, STEPS * I) input; the states of every
    step side by side."""

    def __init__(self, cell, h0):
        super().__init__()
        self.cell = cell
        self.h0 = None if h0 is None else nn.Parameter(h0)

    def forward(self, x):
        tape = x.tape
        state = None
        if self.h0 is not None:
            h = tape.parameter(self.h0, "h0")
            state = (h, h) if self.cell.mode == "lstm" else h
        outs = []
        for t in range(STEPS):
            state = self.cell(x[:, t * I:(t + 1) * I], state)
            outs += list(state) if isinstance(state, tuple) else [state]
        return F.cat(outs)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "h0"])
@pytest.mark.parametrize("kind", list(CELLS))
def test_a_loop_of_cells_matches_torch(kind, with_state, bias):
    rng = np.random.default_rng(0)
    ours_cls, torch_cls = CELLS[kind]
    extra = {"nonlinearity": kind[4:]} if kind.startswith("rnn") else {}
    with nn.seeded(1):
        cell = ours_cls(I, H, bias=bias, **extra)
    theirs = torch_cls(I, H, bias=bias, **extra).double()
    theirs.load_state_dict({k: torch.from_numpy(np.array(v, np.float64))
                            for k, v in cell.state_dict().items()})
    h0 = rng.normal(size=(B, H)) if with_state else None
    model = Loop(cell, h0)
    X = rng.normal(size=(B, STEPS * I))
    n_out = STEPS * H * (2 if kind == "lstm" else 1)
    Y = rng.normal(size=(B, n_out))
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64)
    grads = trainer.gradients(X, Y)
    out = trainer.predict_outputs(X)

    th0 = torch.tensor(h0, requires_grad=True) if with_state else None
    state = None if th0 is None else ((th0, th0) if kind == "lstm" else th0)
    x, outs = torch.from_numpy(X), []
    for t in range(STEPS):
        state = theirs(x[:, t * I:(t + 1) * I], state)
        outs += list(state) if isinstance(state, tuple) else [state]
    joined = torch.cat(outs, dim=1)
    torch.nn.functional.mse_loss(joined, torch.from_numpy(Y)).backward()
    np.testing.assert_allclose(out, joined.detach().numpy(), **F64)
    want = {f"cell.{k}": p.grad.numpy() for k, p in theirs.named_parameters()}
    if with_state:
        want["h0"] = th0.grad.numpy()
    assert grads.keys() == want.keys()
    for name in grads:
        np.testing.assert_allclose(grads[name], want[name], err_msg=name, **F64)


def test_cell_names_shapes_and_errors():
    cell = nn.LSTMCell(3, 4)
    assert list(cell.state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert cell.weight_ih.shape == (16, 3) and cell.bias_hh.shape == (16,)
    assert repr(nn.GRUCell(2, 3, bias=False)) == "GRUCell(2, 3, bias=False)"

    class One(nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.cell = cell

        def forward(self, x):
            return self.cell(x)

    with pytest.raises(ValueError, match=r"GRUCell 'cell': expected a float input of shape "
                                         r"\(batch, 3\), got \(2, 4\)"):
        One(nn.GRUCell(3, 4)).predict(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="RNNCell: nonlinearity must be one of"):
        nn.RNNCell(3, 4, nonlinearity="gelu")
