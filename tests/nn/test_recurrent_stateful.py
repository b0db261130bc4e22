"""stateful=True recurrent layers (truncated backpropagation through time): a fit whose batches
continue each other row by row against PyTorch's manual loop (final states carried, detached,
reset at every epoch by the fit itself), float64; reset_states(), and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from nnjit.train.callbacks import Callback

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

B, T, IN, H, BATCHES = 4, 5, 3, 6, 3


class Last(nn.Module):
    """A stateful layer, then a Linear of the last layer's final state."""

    def __init__(self, kind, **kwargs):
        super().__init__()
        self.rnn = getattr(nn, kind)(IN, H, batch_first=True, stateful=True, batch_size=B,
                                     **kwargs)
        self.fc = nn.Linear(self.rnn.state_size, 1)

    def forward(self, x):
        _, h_n = self.rnn(x)
        h_n = h_n[0] if isinstance(h_n, tuple) else h_n
        return self.fc(h_n.flatten()[:, -self.rnn.state_size:])  # the last layer and direction


class ResetStates(Callback):
    """Keras' reset at every epoch, as a user would write it."""

    def on_epoch_begin(self, trainer, epoch, logs=None):
        trainer.model.rnn.reset_states()


def series(seed=0):
    """BATCHES batches of B windows: row i of batch k continues row i of batch k - 1."""
    rng = np.random.default_rng(seed)
    long = rng.normal(size=(B, BATCHES * T, IN))
    X = np.concatenate([long[:, k * T:(k + 1) * T] for k in range(BATCHES)])
    return X, rng.normal(size=(BATCHES * B, 1))


def torch_fit(kind, state_dict, X, y, epochs, lr, **kwargs):
    rnn = getattr(torch.nn, kind)(IN, H, batch_first=True, **kwargs).double()
    fc = torch.nn.Linear(kwargs.get("proj_size") or H, 1).double()
    rnn.load_state_dict({k[4:]: torch.from_numpy(v) for k, v in state_dict.items()
                         if k.startswith("rnn.")})
    fc.load_state_dict({k[3:]: torch.from_numpy(v) for k, v in state_dict.items()
                        if k.startswith("fc.")})
    opt = torch.optim.SGD(list(rnn.parameters()) + list(fc.parameters()), lr=lr)
    for _ in range(epochs):
        state = None  # reset at every epoch
        for k in range(BATCHES):
            x = torch.from_numpy(X[k * B:(k + 1) * B])
            _, state = rnn(x, state)
            h_n = state[0] if isinstance(state, tuple) else state
            target = torch.from_numpy(y[k * B:(k + 1) * B])
            loss = torch.nn.functional.mse_loss(fc(h_n[-1]), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            state = (tuple(s.detach() for s in state) if isinstance(state, tuple)
                     else state.detach())
    named = {f"rnn.{k}": v for k, v in rnn.state_dict().items()}
    named.update({f"fc.{k}": v for k, v in fc.state_dict().items()})
    return {k: v.numpy() for k, v in named.items()}


@pytest.mark.parametrize("kind,kwargs", [("LSTM", {}), ("GRU", {"num_layers": 2}),
                                         ("LSTM", {"bidirectional": True, "proj_size": 2})],
                         ids=["lstm", "gru_2_layers", "lstm_bidirectional_proj"])
def test_a_stateful_fit_matches_pytorchs_manual_loop(kind, kwargs):
    X, y = series()
    with nn.seeded(0):
        model = Last(kind, **kwargs)
    for p in model.parameters():
        p.data = p.data.astype(np.float64)
    start = {k: np.array(v, np.float64) for k, v in model.state_dict().items()}
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
    trainer.fit(X, y, batch_size=B, shuffle=False, epochs=2, verbose=0,
                n_iter_no_change=None)  # (each epoch starts from zero states: the fit's reset)
    want = torch_fit(kind, start, X, y, 2, 0.1, **kwargs)
    got = model.state_dict()
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12, err_msg=name)
    # the carried states are the last batch's final ones
    assert np.abs(np.asarray(model.rnn.carried_h)).max() > 0
    model.rnn.reset_states()
    assert not np.asarray(model.rnn.carried_h).any()


def test_without_carrying_the_fit_differs():
    # the same fit from zero states at every batch (a plain layer) ends elsewhere: the carried
    # state is what the test above compares
    X, y = series()
    ends = []
    for stateful in (True, False):
        with nn.seeded(0):
            model = Last("GRU")
        if not stateful:
            model.rnn.stateful = False
        trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
        trainer.fit(X, y, batch_size=B, shuffle=False, epochs=1, verbose=0,
                    n_iter_no_change=None)
        ends.append(model.state_dict()["fc.weight"])
    assert not np.allclose(ends[0], ends[1])


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match=r"LSTM: stateful=True needs batch_size="):
        nn.LSTM(3, 4, stateful=True)
    with pytest.raises(ValueError, match=r"reset_states\(\) is for stateful=True layers"):
        nn.GRU(3, 4).reset_states()
    with pytest.raises(ValueError, match=r"a stateful=True layer starts from its carried"):
        model = Last("GRU")
        x = np.zeros((B, T, IN), np.float32)

        class WithState(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = model

            def forward(self, x):
                return self.inner.rnn(x, x.flatten()[:, :H].view(-1, 1, H))[0].flatten()

        WithState().predict(x)


def test_each_epoch_starts_from_zero_states_without_a_callback():
    """The fit zeroes the carried states at every epoch's start: the same as the user's own
    reset callback, bit for bit, on either path of a repeated fit; without any reset (states
    carried from the last batch of one epoch into the next) the weights end elsewhere."""
    X, y = series()

    def fit(callbacks=None, reset=True, fits=1):
        with nn.seeded(0):
            model = Last("GRU")
        trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), dtype=np.float64, seed=0)
        if not reset:
            trainer.fit = _without_reset(trainer.fit)
        for _ in range(fits):
            trainer.fit(X, y, batch_size=B, shuffle=False, epochs=3, verbose=0,
                        n_iter_no_change=None, callbacks=callbacks)
        return model.state_dict()

    auto, by_hand = fit(), fit([ResetStates()])
    for name in auto:
        np.testing.assert_array_equal(auto[name], by_hand[name], err_msg=name)
    twice, twice_by_hand = fit(fits=2), fit([ResetStates()], fits=2)
    for name in twice:
        np.testing.assert_array_equal(twice[name], twice_by_hand[name], err_msg=name)
    carried = fit(reset=False)
    assert not np.allclose(auto["fc.weight"], carried["fc.weight"])


def _without_reset(fit):
    """``fit`` with the per-epoch reset switched off (states carried across epochs)."""
    from nnjit.train import stateful

    def run(*args, **kwargs):
        saved = stateful.ResetStatefulLayers.on_epoch_begin
        stateful.ResetStatefulLayers.on_epoch_begin = lambda *a, **k: None
        try:
            return fit(*args, **kwargs)
        finally:
            stateful.ResetStatefulLayers.on_epoch_begin = saved
    return run


@pytest.mark.parametrize("how", ["fit_default", "fit_shuffle", "loader"])
def test_shuffled_batches_are_refused_naming_the_argument_and_the_layer(how):
    X, y = series()
    model = Last("LSTM")
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.MSELoss(), seed=0)
    X, y = X.astype(np.float32), y.astype(np.float32)
    with pytest.raises(ValueError, match=r"fit: shuffle=True reorders the batches, but LSTM "
                                         r"'rnn' is stateful=True .* pass shuffle=False"):
        if how == "loader":
            trainer.fit(nn.DataLoader(X, y, batch_size=B, shuffle=True), verbose=0)
        else:
            trainer.fit(X, y, batch_size=B, verbose=0,
                        **({"shuffle": True} if how == "fit_shuffle" else {}))
