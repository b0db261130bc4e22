"""nn.RNN / nn.GRU / nn.LSTM against torch.nn's: the same state dict in both, then outputs, final
states and every gradient (the parameters' and the initial states') in float64 within 1e-10,
for 1 and 2 layers, both directions, ``batch_first`` both ways and variable lengths
(``pack_padded_sequence`` on torch's side)."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.nn import functional as F

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

F64 = {"rtol": 1e-10, "atol": 1e-12}
B, T, IN, H = 5, 6, 3, 4
CLASSES = {"rnn_tanh": nn.RNN, "rnn_relu": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
TORCH = {"rnn_tanh": torch.nn.RNN, "rnn_relu": torch.nn.RNN, "lstm": torch.nn.LSTM,
         "gru": torch.nn.GRU}


def layer(kind, hidden=H, **kwargs):
    """The nnjit and torch layers of ``kind`` with nnjit's initial weights in both."""
    extra = {"nonlinearity": kind[4:]} if kind.startswith("rnn") else {}
    ours = CLASSES[kind](IN, hidden, **extra, **kwargs)
    theirs = TORCH[kind](IN, hidden, **extra, **kwargs).double()
    theirs.load_state_dict({k: torch.from_numpy(np.array(v, np.float64))
                            for k, v in ours.state_dict().items()})
    return ours, theirs


class Probe(nn.Module):
    """The layer on (B, T, IN) data, initial states as parameters (their gradients are checked),
    lengths as a second, integer input; returns output, h_n (and c_n) side by side."""

    def __init__(self, rnn, states: bool, rng):
        super().__init__()
        self.rnn = rnn
        k = rnn.num_layers * rnn.num_directions
        self.h0 = nn.Parameter(rng.normal(size=(B, k * rnn.state_size))) if states else None
        self.c0 = (nn.Parameter(rng.normal(size=(B, k * rnn.hidden_size)))
                   if states and rnn.mode == "lstm" else None)

    def forward(self, x, lengths=None):
        tape = x.tape
        hx = None
        if self.h0 is not None:
            hx = tape.parameter(self.h0, "h0")
            if self.c0 is not None:
                hx = (hx, tape.parameter(self.c0, "c0"))
        out, h_n = self.rnn(x, hx, lengths) if lengths is not None else self.rnn(x, hx)
        finals = list(h_n) if isinstance(h_n, tuple) else [h_n]
        return F.cat([out.flatten()] + [f.flatten() for f in finals])


def run_torch(rnn, X, Y, h0, c0, lengths, batch_first):
    """torch's (output, h_n[, c_n]) side by side as Probe's, and the gradients by name."""
    H = rnn.hidden_size
    x = torch.from_numpy(X)
    inp = x if batch_first else x.transpose(0, 1)
    hx = None
    if h0 is not None:
        def state(a, width):  # nnjit's (B, L*D*H) -> torch's (L*D, B, H)
            return torch.tensor(a.reshape(B, -1, width).transpose(1, 0, 2), requires_grad=True)
        hp = getattr(rnn, "proj_size", 0) or H
        hx = state(h0, hp) if c0 is None else (state(h0, hp), state(c0, H))
    if lengths is not None:
        inp = torch.nn.utils.rnn.pack_padded_sequence(
            inp, torch.from_numpy(lengths), batch_first=batch_first, enforce_sorted=False)
    out, h_n = rnn(inp, hx)
    if lengths is not None:
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=batch_first,
                                                        total_length=T)
    out = out if batch_first else out.transpose(0, 1)
    finals = list(h_n) if isinstance(h_n, tuple) else [h_n]
    joined = torch.cat([out.reshape(B, -1)] + [f.transpose(0, 1).reshape(B, -1)
                                               for f in finals], dim=1)
    torch.nn.functional.mse_loss(joined, torch.from_numpy(Y)).backward()
    grads = {f"rnn.{n}": p.grad.numpy() for n, p in rnn.named_parameters()}
    if h0 is not None:
        states = [hx] if c0 is None else list(hx)
        for name, st in zip(("h0", "c0"), states):
            grads[name] = st.grad.numpy().transpose(1, 0, 2).reshape(B, -1)
    return joined.detach().numpy(), grads


def check_parity(kind, num_layers, bidirectional, batch_first, bias=True, states=True,
                 ragged=False, seed=0, hidden=H, **extra):
    rng = np.random.default_rng(seed)
    with nn.seeded(seed):
        ours, theirs = layer(kind, hidden, num_layers=num_layers, bidirectional=bidirectional,
                             batch_first=batch_first, bias=bias, **extra)
    model = Probe(ours, states, rng)
    X = rng.normal(size=(B, T, IN))
    lengths = rng.integers(1, T + 1, size=B) if ragged else None
    if ragged:
        lengths[0] = T  # torch's padded output has T steps only if one sequence has
    layers = num_layers * ours.num_directions
    width = T * ours.num_directions * ours.state_size + layers * ours.state_size + (
        layers * hidden if kind == "lstm" else 0)
    Y = rng.normal(size=(B, width))
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    data = X if lengths is None else (X, lengths.astype(np.int64)[:, None])
    grads = trainer.gradients(data, Y)
    out = trainer.predict_outputs(data)
    t_out, t_grads = run_torch(theirs, X, Y, None if model.h0 is None else model.h0.data,
                               None if model.c0 is None else model.c0.data, lengths,
                               batch_first)
    np.testing.assert_allclose(out, t_out, **F64)
    assert grads.keys() == t_grads.keys()
    for name in grads:
        np.testing.assert_allclose(grads[name], t_grads[name], err_msg=name, **F64)
    return out, lengths


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["forward", "bidirectional"])
@pytest.mark.parametrize("num_layers", [1, 2], ids=["1_layer", "2_layers"])
@pytest.mark.parametrize("kind", list(CLASSES))
def test_outputs_and_gradients_match_torch(kind, num_layers, bidirectional, batch_first):
    # initial states given when batch_first (their gradients compared), zeros otherwise
    check_parity(kind, num_layers, bidirectional, batch_first, states=batch_first,
                 bias=num_layers == 1 or bidirectional)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["forward", "bidirectional"])
@pytest.mark.parametrize("kind", list(CLASSES))
def test_variable_lengths_match_torch_packed_sequences(kind, bidirectional):
    out, lengths = check_parity(kind, 2, bidirectional, True, ragged=True, seed=3)
    assert (lengths < T).any()
    # padded steps of the output are 0 (pad_packed_sequence's padding value)
    steps = out[:, :T * H * (2 if bidirectional else 1)].reshape(B, T, -1)
    for b, n in enumerate(lengths):
        assert not steps[b, n:].any() and steps[b, :n].any()


@pytest.mark.parametrize("kind", list(CLASSES))
def test_packed_recurrent_product_matches_torch(kind):
    # 16 hidden units (2 and 4-8 vectors of 8 float64 lanes), 5 rows (a tile of 4 and an edge
    # one): the scan's packed W_hh product (nnjit.kernels.recurrent_product), forward and backward
    check_parity(kind, 2, True, True, hidden=16)
    check_parity(kind, 1, False, True, ragged=True, seed=3, hidden=16)


@pytest.mark.parametrize("hidden,proj", [(H, 3), (24, 16)], ids=["proj3_of_4", "proj16_of_24"])
@pytest.mark.parametrize("num_layers,bidirectional,ragged",
                         [(1, False, False), (2, True, False), (2, False, True)],
                         ids=["1_layer", "2_layers_bidirectional", "2_layers_ragged"])
def test_lstm_projections_match_torch(hidden, proj, num_layers, bidirectional, ragged):
    # PyTorch's proj_size: weight_hr_l{k} (P, H), h and the outputs P wide, c H wide; 16 of 24:
    # the packed products (2 strips of 8 float64 lanes for P, 12 for the gates)
    check_parity("lstm", num_layers, bidirectional, True, ragged=ragged, seed=5, hidden=hidden,
                 proj_size=proj)


def test_lstm_projection_parameters_are_pytorchs():
    ours = nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2)
    theirs = torch.nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    for name, value in theirs.state_dict().items():
        assert ours.state_dict()[name].shape == tuple(value.shape), name
    with pytest.raises(ValueError, match=r"LSTM: proj_size=6 must be smaller than hidden_size"):
        nn.LSTM(3, 6, proj_size=6)
