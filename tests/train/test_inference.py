"""Inference without training: predict, predict_proba, predict_outputs, evaluate, model.predict
and model(X) on fresh, loaded (load_weights in a new process, load_checkpoint) and trained
weights; a later fit is unchanged, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nnjit as nn
from nnjit.nn import functional as F


def _iris():
    X, y = nn.datasets.load_iris()
    return nn.datasets.standardize(X).astype(np.float32), y


def _mlp(seed=0, dropout=0.0):
    nn.set_seed(seed)
    layers = [nn.Linear(4, 16), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(16, 3))


def _reference_outputs(model, X):
    """The MLP's forward in float64 NumPy (dropout is the identity when predicting)."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    h = np.maximum(X.astype(np.float64) @ linears[0].weight.data.T + linears[0].bias.data, 0)
    return h @ linears[1].weight.data.T + linears[1].bias.data


def test_every_method_works_before_fit_on_fresh_weights():
    X, y = _iris()
    model = _mlp(dropout=0.5)
    expected = _reference_outputs(model, X)
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss())
    assert trainer.program is None

    outputs = trainer.predict_outputs(X)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(trainer.predict(X), np.argmax(outputs, axis=1))
    proba = trainer.predict_proba(X)
    softmax = np.exp(expected - expected.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    np.testing.assert_allclose(proba, softmax, rtol=1e-5, atol=1e-6)
    result = trainer.evaluate(X, y)
    loss = -np.mean(np.log(softmax[np.arange(len(y)), y]))
    assert result["loss"] == pytest.approx(loss, rel=1e-5)
    assert result["accuracy"] == pytest.approx(np.mean(np.argmax(expected, 1) == y))
    # Same outputs through the model, and dropout stayed off however often it runs.
    np.testing.assert_array_equal(model.predict(X), outputs)
    np.testing.assert_array_equal(model(X), outputs)


def test_model_predict_without_any_trainer():
    X, _ = _iris()
    model = _mlp(3)
    expected = _reference_outputs(model, X)
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-5, atol=1e-5)
    assert model.predict(X).dtype == np.float32
    assert model.predict(X[:5]).shape == (5, 3)  # a smaller X runs on the same layout


def test_the_internal_trainer_draws_nothing_from_set_seed():
    """model.predict before building the real trainer does not change its seed (so its fit)."""
    nn.set_seed(11)
    plain = nn.Trainer(_mlp(1)).seed
    nn.set_seed(11)
    model = _mlp(1)
    model.predict(np.zeros((2, 4), np.float32))
    assert nn.Trainer(model).seed == plain


# Runs in a new process that never fits (Trainer.fit is replaced by a failure): it builds the
# model with other initial weights, loads the .nne and writes every inference path's outputs.
_NEW_PROCESS = textwrap.dedent("""
    import sys
    import numpy as np
    import nnjit as nn

    def no_fit(*args, **kwargs):
        raise AssertionError("this process must not fit")

    nn.Trainer.fit = no_fit
    weights, X_path, out_path = sys.argv[1:]
    X = np.load(X_path)
    nn.set_seed(123)  # other initial weights than the fitted model's
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    model.load_weights(weights)
    model_predict = model.predict(X)
    model_call = model(X)

    nn.set_seed(123)
    fresh = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    trainer = nn.Trainer(fresh, loss=nn.CrossEntropyLoss())
    fresh.load_weights(weights)
    np.savez(out_path, model_predict=model_predict, model_call=model_call,
             outputs=trainer.predict_outputs(X), labels=trainer.predict(X),
             proba=trainer.predict_proba(X))
""")


def test_load_weights_in_a_new_process_predicts_what_the_fitting_process_did(tmp_path):
    X, y = _iris()
    model = _mlp(7, dropout=0.3)
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss(), seed=2)
    trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=5, verbose=False)
    model.save_weights(tmp_path / "model.nne")
    np.save(tmp_path / "X.npy", X)
    script = tmp_path / "predict.py"
    script.write_text(_NEW_PROCESS)

    done = subprocess.run([sys.executable, str(script), str(tmp_path / "model.nne"),
                           str(tmp_path / "X.npy"), str(tmp_path / "out.npz")],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=600)
    assert done.returncode == 0, done.stderr
    got = np.load(tmp_path / "out.npz")
    outputs = trainer.predict_outputs(X)
    for key in ("model_predict", "model_call", "outputs"):
        np.testing.assert_array_equal(got[key], outputs, err_msg=key)
    np.testing.assert_array_equal(got["labels"], trainer.predict(X))
    np.testing.assert_array_equal(got["proba"], trainer.predict_proba(X))


def _fit(trainer, X, y, epochs, **kw):
    trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=epochs, n_iter_no_change=None,
                verbose=False, **kw)


def _make(X):
    model = _mlp(4, dropout=0.2)
    return model, nn.Trainer(model, nn.Adam(lr=0.01), seed=9)


def test_predicting_before_fit_changes_no_bit_of_the_fit():
    X, y = _iris()
    straight, trainer = _make(X)
    _fit(trainer, X, y, 3)
    model, trainer = _make(X)
    trainer.predict(X)  # laid out for inference (256 rows), replaced by fit's own layout
    trainer.evaluate(X, y)
    _fit(trainer, X, y, 3)
    assert trainer.program.max_batch == 16
    for a, b in zip(straight.parameters(), model.parameters()):
        np.testing.assert_array_equal(a.data, b.data)


def test_the_same_weights_predict_the_same_whatever_the_model_was_fit_with():
    """A trained model's own predict and a fresh model holding its weights give the same bits
    (the products' kernels depend on the rows per chunk: once, the trained model predicted in
    chunks of its 37-row validation batch and differed by 1.9e-6). Fitting again after
    predicting is unchanged too."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(569, 30)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)

    def mlp(seed):
        nn.set_seed(seed)
        return nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 2))

    trained = mlp(0)
    trainer = nn.Trainer(trained, nn.Adam(lr=0.01), seed=0)
    train, val = (nn.DataLoader(X[:500], y[:500], batch_size=32),
                  nn.DataLoader(X[500:537], y[500:537], batch_size=37))
    trainer.fit(train, epochs=2, val=val, verbose=False)
    outputs, scores = trainer.predict_outputs(X), trainer.evaluate(X, y)
    fresh = mlp(1)
    fresh.load_state_dict(trained.state_dict())
    other = nn.Trainer(fresh)
    np.testing.assert_array_equal(other.predict_outputs(X), outputs)
    assert other.evaluate(X, y) == scores
    np.testing.assert_array_equal(fresh.predict(X), outputs)
    trainer.fit(train, epochs=1, val=val, verbose=False)  # back on the fit's own layout
    assert trainer.program.max_batch == 37


def test_load_checkpoint_then_predict_then_resume_is_bit_exact(tmp_path):
    X, y = _iris()
    straight, trainer = _make(X)
    _fit(trainer, X, y, 6)
    expected = trainer.predict_outputs(X)

    first, trainer = _make(X)
    _fit(trainer, X, y, 4)
    trainer.save_checkpoint(tmp_path / "ckpt.nne")
    at_4 = trainer.predict_outputs(X)

    resumed, trainer = _make(X)
    trainer.load_checkpoint(tmp_path / "ckpt.nne")
    # Every inference call works on the loaded weights and lays the program out on demand.
    np.testing.assert_array_equal(trainer.predict_outputs(X), at_4)
    np.testing.assert_array_equal(trainer.predict(X), np.argmax(at_4, axis=1))
    assert trainer.predict_proba(X).shape == (150, 3)
    assert trainer.evaluate(X, y)["accuracy"] == pytest.approx(np.mean(at_4.argmax(1) == y))
    assert trainer.optimizer.iterations == 4 * 10
    _fit(trainer, X, y, 6, initial_epoch=4)  # optimizer moments and RNG survived the layout
    for a, b in zip(straight.parameters(), resumed.parameters()):
        np.testing.assert_array_equal(a.data, b.data)
    np.testing.assert_array_equal(trainer.predict_outputs(X), expected)


def test_load_checkpoint_after_an_inference_layout_keeps_the_loaded_state(tmp_path):
    """The other order: laid out first (fresh weights), then loaded into the arena."""
    X, y = _iris()
    straight, trainer = _make(X)
    _fit(trainer, X, y, 6)
    first, trainer = _make(X)
    _fit(trainer, X, y, 4)
    trainer.save_checkpoint(tmp_path / "ckpt.nne")
    at_4 = trainer.predict_outputs(X)

    resumed, trainer = _make(X)
    trainer.predict(X)
    trainer.load_checkpoint(tmp_path / "ckpt.nne")
    np.testing.assert_array_equal(trainer.predict_outputs(X), at_4)
    _fit(trainer, X, y, 6, initial_epoch=4)
    for a, b in zip(straight.parameters(), resumed.parameters()):
        np.testing.assert_array_equal(a.data, b.data)


def test_weights_loaded_before_the_layout_are_the_ones_it_holds(tmp_path):
    X, _ = _iris()
    source = _mlp(5)
    source.save_weights(tmp_path / "w.nne")
    model = _mlp(6)
    trainer = nn.Trainer(model)
    model.load_weights(tmp_path / "w.nne")  # into the module's own arrays
    np.testing.assert_array_equal(trainer.predict_outputs(X), source.predict(X))
    for a, b in zip(source.parameters(), model.parameters()):
        np.testing.assert_array_equal(a.data, b.data)
        assert np.shares_memory(b.data, trainer.program.params)


def test_parameters_follow_the_model_between_trainers(tmp_path):
    """A layer called on data (its own internal trainer) or a second trainer takes the
    parameters into its arena; the first trainer takes them back with their current values."""
    X, y = _iris()
    model = _mlp(8)
    trainer = nn.Trainer(model, nn.Adam(lr=0.01))
    _fit(trainer, X, y, 2)
    first = model[0]
    hidden = first(X)  # the layer alone: x @ W.T + b
    np.testing.assert_allclose(hidden, X @ first.weight.data.T + first.bias.data, rtol=1e-5,
                               atol=1e-5)
    _mlp(9).save_weights(tmp_path / "other.nne")
    model.load_weights(tmp_path / "other.nne")
    np.testing.assert_array_equal(trainer.predict_outputs(X), _mlp(9).predict(X))
    assert model._trainer is trainer
    _fit(trainer, X, y, 1)  # trains what the model holds, visible in the model
    for name, p in model.named_parameters():
        off, size = trainer.param_spans[name]
        np.testing.assert_array_equal(p.data.ravel(), trainer.program.values[off:off + size])


def test_model_call_on_arrays_keeps_the_training_mode():
    X, _ = _iris()
    model = _mlp(2, dropout=0.9)
    assert model.training
    out = model(X)
    assert model.training  # unchanged: the call runs in evaluation mode regardless
    np.testing.assert_array_equal(model(X), out)  # dropout is off
    np.testing.assert_allclose(out, _reference_outputs(model, X), rtol=1e-5, atol=1e-5)
    model.eval()
    np.testing.assert_array_equal(model(X), out)
    assert not model.training


def test_model_call_errors_say_what_to_pass():
    X, _ = _iris()
    model = _mlp()
    with pytest.raises(ValueError, match=r"Sequential\(X\): Sequential.forward\(x\) takes 1 "
                                         r"input, the data has 2 arrays"):
        model(X, X)  # (one array per input of forward)
    with pytest.raises(TypeError, match=r"Sequential was called with no arguments"):
        model()
    with pytest.raises(ValueError, match=r"Sequential\(X\): X must be 2-D"):
        model(X[0])
    with pytest.raises(TypeError, match=r"ReLU has no parameters"):
        nn.ReLU()(X)

    class ArrayInForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(np.zeros((1, 4)))

    with pytest.raises(TypeError, match=r"Linear was called on arrays while the model is being "
                                        r"traced"):
        ArrayInForward().predict(X)


def test_error_messages_name_the_method_called():
    X, y = _iris()
    regression = nn.Trainer(_mlp(), loss=nn.MSELoss())
    with pytest.raises(ValueError, match=r"predict_proba\(\) needs a classification loss, but "
                                         r"this trainer's loss is MSELoss"):
        regression.predict_proba(X)
    trainer = nn.Trainer(_mlp())
    for method in ("predict", "predict_proba", "predict_outputs"):
        with pytest.raises(ValueError, match=rf"^{method}: X must be 2-D"):
            getattr(trainer, method)(X[0])
    with pytest.raises(ValueError, match=r"^evaluate: .*DataLoader or \(X, y\)"):
        trainer.evaluate(X)
    trainer.predict(X)
    for method in ("predict", "predict_proba", "predict_outputs"):
        with pytest.raises(ValueError, match=rf"^{method}: layer '0' expects input with 4 "
                                             r"features, got array of shape \(150, 5\)"):
            getattr(trainer, method)(np.zeros((150, 5)))
    with pytest.raises(ValueError, match=r"Sequential.predict: layer '0' expects input with 4"):
        trainer.model.predict(np.zeros((3, 5)))


class GCN(nn.Module):
    def __init__(self, f, hidden, classes):
        super().__init__()
        self.conv1 = nn.GCNConv(f, hidden)
        self.drop = nn.Dropout(0.5)
        self.conv2 = nn.GCNConv(hidden, classes)

    def forward(self, x, edges):
        return self.conv2(self.drop(F.relu(self.conv1(x, edges))), edges)


def _graph(n=40, e=120, f=5, classes=3):
    rng = np.random.default_rng(0)
    train = np.zeros(n, bool)
    train[: n // 2] = True
    return nn.Graph.from_arrays(rng.normal(size=(n, f)), rng.integers(0, n, (2, e)),
                                rng.integers(0, classes, n), train_mask=train)


def test_graph_model_predicts_after_load_weights_without_fit(tmp_path):
    graph = _graph()
    nn.set_seed(0)
    model = GCN(5, 8, 3)
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), seed=1)
    trainer.fit(graph, epochs=5, verbose=False)
    model.save_weights(tmp_path / "gcn.nne")
    expected = trainer.predict_outputs(graph)

    nn.set_seed(99)
    loaded = GCN(5, 8, 3)
    loaded.load_weights(tmp_path / "gcn.nne")
    np.testing.assert_array_equal(loaded.predict(graph), expected)
    np.testing.assert_array_equal(loaded(graph), expected)
    fresh = nn.Trainer(GCN(5, 8, 3))
    fresh.model.load_weights(tmp_path / "gcn.nne")
    np.testing.assert_array_equal(fresh.predict(nn.FullBatch(graph)), expected.argmax(1))
    assert fresh.evaluate(graph, "train") == pytest.approx(trainer.evaluate(graph, "train"))
    with pytest.raises(ValueError, match=r"GCN is a graph model \(layer GCNConv 'conv1'\); "
                                         r"pass the Graph"):
        nn.Trainer(GCN(5, 8, 3)).predict(graph.x)


def test_run_checkpoint_outputs_match_the_trainer(tmp_path):
    from nnjit.experiment import Checkpoints, ModelConfig, NetConfig, RunConfig, TrainConfig
    from nnjit.experiment.train_run import train_run

    X, y = _iris()
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,))),
                    train=TrainConfig(epochs=3, batch_size=16, seed=0, patience=None,
                                      restore_best=False))
    run, trainer, _ = train_run(cfg, X, y, X[:30], y[:30], tmp_path)
    np.testing.assert_array_equal(run.checkpoint_outputs(X, Checkpoints.LAST),
                                  trainer.predict_outputs(X))
