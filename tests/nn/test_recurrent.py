"""nn.RNN / nn.GRU / nn.LSTM beyond parity: a text classifier (Embedding -> LSTM -> last state ->
Linear) fitted end to end on token ids with lengths, padded tokens that change nothing, no
allocation per epoch, PyTorch weights loaded 1:1 (state dict and safetensors), a 3-layer
bidirectional stack against torch, float32, and the errors for bad arguments and inputs."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.engine.status import BadInputError
from tests.nn.test_recurrent_parity import check_parity

VOCAB, T, DIM, HIDDEN = 20, 10, 8, 16


class TextClassifier(nn.Module):
    """Token ids (B, T) and their lengths (B, 1) -> 2 logits from the LSTM's last state."""

    def __init__(self, cell=nn.LSTM):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.rnn = cell(DIM, HIDDEN, batch_first=True)
        self.fc = nn.Linear(HIDDEN, 2)

    def forward(self, tokens, lengths):
        _, h_n = self.rnn(self.emb(tokens), lengths=lengths)
        h_n = h_n[0] if isinstance(h_n, tuple) else h_n
        return self.fc(h_n.view(-1, HIDDEN))


def token_data(n, seed):
    """Sequences of 2..T tokens; label 1 iff token 3 is among the valid ones. The padding
    holds random tokens, token 3 included: a model that read it would be wrong."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(4, VOCAB, size=(n, T))
    lengths = rng.integers(2, T + 1, size=n)
    y = rng.integers(0, 2, size=n)
    for b in range(n):
        if y[b]:
            tokens[b, rng.integers(0, lengths[b])] = 3
        tokens[b, lengths[b]:] = rng.integers(0, VOCAB, size=T - lengths[b])
    return tokens, lengths[:, None], y


@pytest.fixture(scope="module")
def fitted():
    tokens, lengths, y = token_data(480, seed=0)
    val = token_data(160, seed=1)
    with nn.seeded(0):
        model = TextClassifier()
    trainer = nn.Trainer(model, nn.Adam(lr=0.02), nn.CrossEntropyLoss(), seed=0)
    history = trainer.fit(nn.DataLoader((tokens, lengths), y, batch_size=32), epochs=25,
                          val=(val[:2], val[2]), verbose=False, n_iter_no_change=None)
    return trainer, history, val


def test_text_classifier_fits_end_to_end(fitted):
    trainer, history, (tokens, lengths, y) = fitted
    assert history["train_loss"].iloc[-1] < 0.5 * history["train_loss"].iloc[0]
    assert trainer.evaluate((tokens, lengths), y)["accuracy"] > 0.95
    assert trainer.predict_outputs((tokens, lengths)).dtype == np.float32


def test_padded_tokens_change_no_output(fitted):
    trainer, _, (tokens, lengths, _) = fitted
    other = tokens.copy()
    rng = np.random.default_rng(5)
    for b, n in enumerate(lengths[:, 0]):
        other[b, n:] = rng.integers(0, VOCAB, size=T - n)
    assert (other != tokens).any()
    np.testing.assert_array_equal(trainer.predict_outputs((tokens, lengths)),
                                  trainer.predict_outputs((other, lengths)))
    # while a valid token does change it
    other[:, 0] = (tokens[:, 0] + 1) % VOCAB
    assert (trainer.predict_outputs((tokens, lengths))
            != trainer.predict_outputs((other, lengths))).any()


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_zero_nrt_allocations_per_epoch(cell):
    from tests.helpers import count_allocations

    tokens, lengths, y = token_data(96, seed=2)
    trainer = nn.Trainer(TextClassifier(cell), nn.Adam(lr=0.01), nn.CrossEntropyLoss())
    loader = nn.DataLoader((tokens, lengths), y, batch_size=32)

    def fit(epochs):
        trainer.fit(loader, epochs=epochs, val=((tokens, lengths), y), verbose=False,
                    n_iter_no_change=None)

    fit(1)
    two, twelve = count_allocations(fit, repeats=(2, 12))
    assert twelve == two, f"{twelve - two} NRT allocations over 10 extra epochs"


def test_three_bidirectional_layers_match_torch():
    check_parity("lstm", 3, True, True, seed=7)
    check_parity("gru", 3, True, False, ragged=True, seed=8)


def test_a_torch_state_dict_loads_one_to_one_also_through_safetensors(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from safetensors.torch import save_file

    torch.manual_seed(0)
    theirs = torch.nn.LSTM(DIM, HIDDEN, num_layers=2, bidirectional=True, batch_first=True)
    ours = nn.LSTM(DIM, HIDDEN, num_layers=2, bidirectional=True, batch_first=True)
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    assert list(ours.state_dict()) == list(state)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape
                                                                  for k, v in state.items()}
    ours.load_state_dict(state)
    x = np.random.default_rng(0).normal(size=(4, T, DIM)).astype(np.float32)
    want = theirs(torch.from_numpy(x))[0].detach().numpy().reshape(4, -1)

    class Wrap(nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            return self.rnn(x)[0].flatten()

    np.testing.assert_allclose(Wrap(ours)(x), want, rtol=1e-5, atol=1e-6)
    path = tmp_path / "lstm.safetensors"
    save_file({f"rnn.{k}": v for k, v in theirs.state_dict().items()}, str(path))
    fresh = Wrap(nn.LSTM(DIM, HIDDEN, num_layers=2, bidirectional=True, batch_first=True))
    fresh.load_safetensors(path)
    np.testing.assert_allclose(fresh(x), want, rtol=1e-5, atol=1e-6)


def test_initialisation_is_pytorchs_uniform_bound():
    with nn.seeded(1):
        gru = nn.GRU(5, 25, num_layers=2)
    for name, p in gru.named_parameters():
        assert np.abs(p.data).max() <= 1 / 5 and np.abs(p.data).max() > 0.18, name
        assert p.data.dtype == np.float32
    assert gru.weight_ih_l1.shape == (75, 25) and gru.bias_hh_l0.shape == (75,)


class Bare(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0].flatten()


class WithState(Bare):
    def forward(self, x, hx):
        return self.rnn(x, hx)[0].flatten()


class WithLengths(Bare):
    def forward(self, x, lengths):
        return self.rnn(x, lengths=lengths)[0].flatten()


def test_bad_arguments_and_inputs_name_the_layer_and_the_shape():
    with pytest.raises(ValueError, match=r"LSTM: hidden_size must be a positive int, got 0"):
        nn.LSTM(3, 0)
    with pytest.raises(ValueError, match="LSTM: proj_size=4 must be smaller than hidden_size=4"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="RNN: nonlinearity must be one of"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    x = np.zeros((4, T, 3), np.float32)
    with pytest.raises(ValueError, match=r"LSTM 'rnn': expected a float input of shape "
                                         r"\(batch, steps, 5\), got \(4, 10, 3\)"):
        Bare(nn.LSTM(5, 4)).predict(x)
    with pytest.raises(ValueError, match=r"expected a float input .* \(integer token ids go "
                                         r"through an Embedding first\)"):
        Bare(nn.GRU(3, 4)).predict(np.zeros((4, T, 3), np.int64))
    with pytest.raises(ValueError, match=r"GRU 'rnn': lengths must be an integer tensor of "
                                         r"shape \(batch,\)"):
        WithLengths(nn.GRU(3, 4)).predict((x, np.full((4, 1), 3.0)))
    with pytest.raises(ValueError, match=r"GRU 'rnn': hx must be a float tensor of shape "
                                         r"\(batch, 2, 4\)"):
        WithState(nn.GRU(3, 4, bidirectional=True)).predict((x, np.zeros((4, 4), np.float32)))
    with pytest.raises(TypeError, match=r"LSTM 'rnn': hx must be a tuple \(h_0, c_0\)"):
        WithState(nn.LSTM(3, 4)).predict((x, np.zeros((4, 4), np.float32)))


def test_a_length_outside_1_to_T_stops_with_an_error_naming_the_layer():
    model = WithLengths(nn.RNN(3, 4))
    x = np.zeros((4, T, 3), np.float32)
    lengths = np.full((4, 1), T, np.int64)
    assert model.predict((x, lengths)).shape == (4, T * 4)
    for value in (0, -1, T + 1):
        bad = lengths.copy()
        bad[2] = value
        with pytest.raises(BadInputError, match=rf"rnn.*sequence length {value} is out of "
                                                r"range: lengths must be 1\.\.10"):
            model.predict((x, bad))


@pytest.mark.parametrize("kind,hidden", [("GRU", 5), ("LSTM", 16), ("GRU", 32)])
def test_float32_matches_torch(kind, hidden):
    # 16 and 32 hidden units: the packed W_hh product (16 float32 lanes), 6 rows (an edge tile)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    ours = getattr(nn, kind)(3, hidden, num_layers=2, bidirectional=True, batch_first=True)
    theirs = getattr(torch.nn, kind)(3, hidden, num_layers=2, bidirectional=True,
                                     batch_first=True)
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})
    x = rng.normal(size=(6, 7, 3)).astype(np.float32)
    want = theirs(torch.from_numpy(x))[0].detach().numpy().reshape(6, -1)
    np.testing.assert_allclose(Bare(ours).predict(x), want, rtol=1e-5, atol=2e-6)
