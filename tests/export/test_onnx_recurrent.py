"""ONNX export of the recurrent layers and cells: one ONNX RNN/GRU/LSTM node per layer direction,
checked with onnxruntime against nnjit's predict_outputs: every kind, 1 layer and 2
bidirectional ones, lengths (sequence_lens) and initial states computed from another input,
token ids through an Embedding, and a loop of cells."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn

onnx = pytest.importorskip("onnx", reason="the export extra is not installed")
ort = pytest.importorskip("onnxruntime", reason="the export extra is not installed")

F = nn.functional
KINDS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn_tanh": nn.RNN, "rnn_relu": nn.RNN}
STEPS, H = 6, 4


class Sequence(nn.Module):
    """The layer on (B, STEPS, 3) with lengths and an initial state made from a context input;
    returns the outputs, the final states and a Linear of the last layer's, side by side."""

    def __init__(self, kind, num_layers, bidirectional, lengths, state):
        super().__init__()
        extra = {"nonlinearity": "relu"} if kind == "rnn_relu" else {}
        self.rnn = KINDS[kind](3, H, num_layers=num_layers, bidirectional=bidirectional,
                               batch_first=True, **extra)
        self.use_lengths, self.use_state = lengths, state
        self.init = nn.Linear(2, self.rnn.num_layers * self.rnn.num_directions * H)
        self.fc = nn.Linear(H, 2)

    def forward(self, seq, lengths, context):
        hx = None
        if self.use_state:
            h0 = self.init(context).view(-1, self.rnn.num_layers * self.rnn.num_directions, H)
            hx = (h0, F.tanh(h0)) if self.rnn.mode == "lstm" else h0
        out, h_n = self.rnn(seq, hx, lengths if self.use_lengths else None)
        finals = list(h_n) if isinstance(h_n, tuple) else [h_n]
        return F.cat([out.flatten()] + [f.flatten() for f in finals]
                     + [self.fc(finals[0].flatten()[:, -H:])])


def data(dtype):
    rng = np.random.default_rng(0)
    return {"seq": rng.normal(size=(5, STEPS, 3)).astype(dtype),
            "lengths": np.array([[6], [2], [5], [1], [3]]),
            "context": rng.normal(size=(5, 2)).astype(dtype)}


def round_trip(model, feeds, tmp_path, dtype=np.float32):
    trainer = nn.Trainer(model, dtype=dtype)
    want = trainer.predict_outputs(tuple(feeds.values()))
    path = tmp_path / "m.onnx"
    model.save_onnx(path)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, dict(zip([i.name for i in proto.graph.input], feeds.values())))[0]
    return got, want, proto


@pytest.mark.parametrize(("lengths", "state"), [(False, False), (True, True)],
                         ids=["full", "lengths_and_state"])
@pytest.mark.parametrize(("num_layers", "bidirectional"), [(1, False), (2, True)],
                         ids=["1_layer", "2_bidirectional"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_recurrent_layers_round_trip_in_onnxruntime(kind, num_layers, bidirectional, lengths,
                                                    state, tmp_path):
    with nn.seeded(0):
        model = Sequence(kind, num_layers, bidirectional, lengths, state)
    got, want, proto = round_trip(model, data(np.float32), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    op = {"lstm": "LSTM", "gru": "GRU"}.get(kind, "RNN")
    assert [n.op_type for n in proto.graph.node].count(op) == num_layers * (1 + bidirectional)


def test_float64_files_are_valid_onnx(tmp_path):
    # onnxruntime 1.32 has no float64 kernel for RNN, GRU or LSTM ("does not support double
    # yet"): the float64 file is checked as ONNX, its numbers by the float32 round trips
    with nn.seeded(0):
        model = Sequence("gru", 2, True, True, True)
    for p in model.parameters():
        p.data = p.data.astype(np.float64)
    nn.Trainer(model, dtype=np.float64).predict_outputs(tuple(data(np.float64).values()))
    path = tmp_path / "gru64.onnx"
    model.save_onnx(path)  # (the traced inputs: lengths an integer one)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    gru = [n for n in proto.graph.node if n.op_type == "GRU"]
    weights = {i.name: i for i in proto.graph.initializer}
    assert len(gru) == 4 and weights[gru[0].input[1]].data_type == onnx.TensorProto.DOUBLE


def test_token_ids_through_an_embedding_and_an_lstm(tmp_path):
    class Text(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 5)
            self.lstm = nn.LSTM(5, 8, batch_first=True)
            self.fc = nn.Linear(8, 2)

        def forward(self, tokens, lengths):
            _, (h_n, _) = self.lstm(self.emb(tokens), lengths=lengths)
            return self.fc(h_n.view(-1, 8))

    rng = np.random.default_rng(1)
    feeds = {"tokens": rng.integers(0, 20, (6, 7)), "lengths": rng.integers(1, 8, (6, 1))}
    got, want, proto = round_trip(Text(), feeds, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert [i.name for i in proto.graph.input] == ["tokens", "lengths"]


def test_a_loop_of_cells(tmp_path):
    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru, self.lstm = nn.GRUCell(3, 4), nn.LSTMCell(4, 4)

        def forward(self, x):
            h, state = None, None
            for t in range(3):
                h = self.gru(x[:, 3 * t:3 * t + 3], h)
                state = self.lstm(h, state)
            return F.cat(list(state))

    feeds = {"input": np.random.default_rng(2).normal(size=(5, 9)).astype(np.float32)}
    got, want, _ = round_trip(Loop(), feeds, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_an_lstm_with_projections_is_refused_naming_the_layer(tmp_path):
    # ONNX's LSTM has no weight_hr: proj_size > 0 has no ONNX form
    class Projected(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.LSTM(3, H, proj_size=2, batch_first=True)

        def forward(self, seq):
            return self.encoder(seq)[0].flatten()

    model = Projected()
    nn.Trainer(model).predict_outputs(data(np.float32)["seq"])
    with pytest.raises(NotImplementedError, match=r"layer .*encoder.* projection \(LSTM "
                                                  r"proj_size > 0"):
        model.save_onnx(tmp_path / "projected.onnx")


def test_a_stateful_layer_is_refused_naming_the_layer(tmp_path):
    class Streaming(nn.Module):
        def __init__(self):
            super().__init__()
            self.stream = nn.GRU(3, H, batch_first=True, stateful=True, batch_size=5)

        def forward(self, seq):
            return self.stream(seq)[0].flatten()

    model = Streaming()
    nn.Trainer(model).predict_outputs(data(np.float32)["seq"])
    with pytest.raises(NotImplementedError, match=r"layer .*stream.* stateful=True"):
        model.save_onnx(tmp_path / "streaming.onnx")
