"""Every bad input gets a clear error naming the argument, layer or file at fault."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nnjit as nn

ROOT = Path(__file__).resolve().parents[2]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(nn.functional.relu(self.fc1(x)))


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(20, 4)).astype(np.float32), rng.integers(0, 3, 20)


def fit(X, y, **kw):
    trainer = nn.Trainer(Net(), nn.Adam(), nn.CrossEntropyLoss())
    return trainer.fit(nn.DataLoader(X, y, batch_size=4), epochs=1, verbose=False, **kw)


def test_wrong_feature_count_names_first_layer(data):
    X, y = data
    with pytest.raises(ValueError, match=r"Linear 'fc1': expected input with 4 features, got "
                                         r"array of shape \(4, 5\)"):
        fit(np.zeros((20, 5), np.float32), y)


def test_wrong_feature_count_after_fit_names_first_layer(data):
    X, y = data
    trainer = nn.Trainer(Net())
    trainer.fit(nn.DataLoader(X, y, batch_size=4), epochs=1, verbose=False)
    with pytest.raises(ValueError, match=r"layer 'fc1' expects input with 4 features, got array "
                                         r"of shape \(2, 6\)"):
        trainer.predict(np.zeros((2, 6)))


@pytest.mark.parametrize("X", [np.zeros(4)])  # ((N, H, W) is an image-shaped input)
def test_x_not_2d(X):
    with pytest.raises(ValueError, match=r"DataLoader: X must be 2-D"):
        nn.DataLoader(X, np.zeros(len(X)))


def test_y_length_differs(data):
    X, y = data
    with pytest.raises(ValueError, match=r"DataLoader: y has 19 rows but X has 20"):
        nn.DataLoader(X, y[:-1])


@pytest.mark.parametrize("y, match", [
    (np.full(20, 3), r"label 3 out of range for a model with 3 outputs"),
    (np.full(20, -1), r"label -1 out of range"),
    (np.full(20, 0.5), r"class labels must be integers"),
])
def test_labels_out_of_range_or_not_integer(data, y, match):
    X, _ = data
    with pytest.raises(ValueError, match=match):
        fit(X, y)


@pytest.mark.parametrize("where", ["X", "y"])
def test_nan_or_inf(data, where):
    X, y = data
    X, y = X.copy(), y.astype(np.float32)
    if where == "X":
        X[3, 2] = np.nan
        match = r"X contains NaN or inf \(first at row 3, column 2\)"
    else:
        y[5] = np.inf
        match = r"y contains NaN or inf \(first at row 5\)"
    with pytest.raises(ValueError, match=match):
        nn.DataLoader(X, y)


def test_empty_dataset():
    with pytest.raises(ValueError, match=r"DataLoader: X is empty \(0 samples\)"):
        nn.DataLoader(np.zeros((0, 4)), np.zeros(0))


@pytest.mark.parametrize("batch_size", [0, -3, 2.5, True])
def test_bad_batch_size(data, batch_size):
    X, y = data
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1"):
        nn.DataLoader(X, y, batch_size=batch_size)


@pytest.mark.parametrize("make, match", [
    (lambda: nn.Adam(lr=0), r"Adam: invalid lr 0.0"),
    (lambda: nn.Adam(learning_rate=-1), r"Adam: invalid learning_rate -1.0"),
    (lambda: nn.SGD(lr=float("nan")), r"SGD: invalid lr"),
    (lambda: nn.Adam(betas=(1.0, 0.999)), r"invalid beta parameter at index 0"),
    (lambda: nn.Adam(betas=(0.9, -0.1)), r"invalid beta parameter at index 1"),
    (lambda: nn.Adam(eps=0), r"invalid eps"),
    (lambda: nn.SGD(momentum=1.0), r"invalid momentum"),
    (lambda: nn.SGD(lr=0.1, nesterov=True), r"Nesterov momentum requires a momentum"),
    (lambda: nn.RMSprop(alpha=1.5), r"invalid alpha"),
    (lambda: nn.Adam(lr=0.1, learning_rate=0.2), r"pass lr or learning_rate, not both"),
])
def test_bad_optimizer_hyperparameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_float64_x_is_cast_to_arena_dtype_and_integer_x_stays_integer(data):
    X, y = data
    history = fit(X.astype(np.float64), y)
    assert len(history) == 1
    # an integer array is an integer input (indices for an Embedding), as in PyTorch: a Linear
    # refuses it, naming the layer
    with pytest.raises(ValueError, match=r"fc1: dense takes float inputs, input 0 holds "
                                         r"integers"):
        fit(np.round(X * 10).astype(np.int64), y)


def test_model_without_parameters():
    with pytest.raises(ValueError, match=r"the model Sequential has no parameters"):
        nn.Trainer(nn.Sequential(nn.ReLU()))


def test_module_without_super_init():
    class Broken(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(RuntimeError, match=r"Broken.__init__ must call super\(\).__init__\(\)"):
        Broken()


def test_predict_before_fit_checks_its_input(data):
    """Predicting needs no fit (tests/train/test_inference.py); bad X is still named."""
    X, _ = data
    trainer = nn.Trainer(Net())
    with pytest.raises(ValueError, match=r"predict: X contains NaN or inf"):
        trainer.predict(np.full_like(X, np.nan))
    with pytest.raises(ValueError, match=r"Net.predict: X has no features"):
        Net().predict(X[:, :0])


def test_load_weights_into_other_shape(tmp_path, data):
    X, y = data
    model = Net()
    model.save_weights(tmp_path / "net.nne")

    class Other(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 9)
            self.out = nn.Linear(9, 3)

    other = Other()
    before = other.state_dict()
    with pytest.raises(nn.StateMismatchError) as err:
        other.load_weights(tmp_path / "net.nne")
    text = str(err.value)
    assert "net.nne" in text
    for expected in ("fc1.weight", "fc2.weight", "fc2.bias", "out.weight", "out.bias"):
        assert expected in text
    for name, arr in other.state_dict().items():  # nothing was changed
        np.testing.assert_array_equal(arr, before[name])


def test_unknown_monitor_lists_options(data):
    X, y = data
    with pytest.raises(ValueError, match=r"available: val_loss, val_accuracy, train_loss"):
        fit(X, y, monitor="val_f1")


def test_val_accuracy_needs_classification(data):
    X, _ = data
    trainer = nn.Trainer(Net(), loss=nn.MSELoss())
    with pytest.raises(ValueError, match=r"needs a classification loss"):
        trainer.fit(nn.DataLoader(X, np.zeros((20, 3))), val=(X, np.zeros((20, 3))),
                    monitor="val_accuracy", verbose=False)


def test_bad_epochs(data):
    X, y = data
    with pytest.raises(ValueError, match=r"epochs must be an int >= 1"):
        nn.Trainer(Net()).fit(nn.DataLoader(X, y), epochs=0)


def test_unknown_names_list_valid_ones():
    with pytest.raises(ValueError, match=r"valid names: sgd, adam, adamw, rmsprop, adagrad, "
                                         r"adadelta, adamax, nadam, radam"):
        nn.get_optimizer("lamb")
    with pytest.raises(ValueError, match=r"valid names: cross_entropy"):
        nn.get_loss("hinge")
    with pytest.raises(ValueError, match=r"unknown init 'he'; valid: glorot_uniform, torch"):
        nn.Linear(2, 2, init="he")


# -- empty inputs: errors naming the argument (zero rows used to spin the compiled loop) ---------
def _gcn():
    class G(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.GCNConv(4, 3)

        def forward(self, x, edges):
            return self.conv(x, edges)

    return G()


def _graph(**masks):
    rng = np.random.default_rng(0)
    return nn.Graph.from_arrays(rng.normal(size=(10, 4)), rng.integers(0, 10, (2, 20)),
                                rng.integers(0, 3, 10), **masks)


@pytest.mark.parametrize("call, match", [
    (lambda t: t.fit((np.zeros((0, 4)), np.zeros(0)), epochs=1), r"fit: train: X is empty"),
    (lambda t: t.predict(np.zeros((0, 4))), r"predict: X is empty"),
    (lambda t: t.evaluate(np.zeros((0, 4)), np.zeros(0)), r"evaluate: X is empty"),
    (lambda t: t.gradients(np.zeros((0, 4)), np.zeros(0)), r"gradients: X is empty"),
    (lambda t: nn.DataLoader(np.zeros((0, 4)), np.zeros(0)), r"DataLoader: X is empty"),
    (lambda t: nn.DataLoader(np.zeros((5, 0)), np.zeros(5)), r"DataLoader: X has no features"),
])
def test_empty_data_is_an_error_naming_it(call, match):
    with pytest.raises(ValueError, match=match):
        call(nn.Trainer(Net()))


@pytest.mark.parametrize("x", [np.zeros((0, 4)), np.zeros((5, 0))])
def test_graph_without_nodes_or_features_is_refused(x):
    with pytest.raises(ValueError, match=r"Expected 'x' to have at least one node \(row\) and "
                                         r"one feature"):
        nn.Graph.from_arrays(x, np.zeros((2, 0), np.int64))


def test_empty_masks_are_errors_naming_the_mask():
    none = np.zeros(10, bool)
    trainer = nn.Trainer(_gcn())
    with pytest.raises(ValueError, match=r"the graph's train_mask selects no node \(0 of 10\)"):
        trainer.fit(_graph(train_mask=none), epochs=1, verbose=False)  # used to train nothing
    graph = _graph(train_mask=~none, test_mask=none)
    with pytest.raises(ValueError, match=r"the graph's test_mask selects no node"):
        trainer.evaluate(graph, "test")  # used to return NaN
    with pytest.raises(ValueError, match=r"mask selects no node"):
        trainer.gradients(graph, none)  # used to return zeros
    assert np.isfinite(trainer.evaluate(graph)["loss"])  # every node: fine


# -- values checked after the cast to the arena dtype ------------------------------------------
def test_float64_beyond_float32_range_is_an_error_naming_row_and_column(data):
    X, y = data
    big = X.astype(np.float64)
    big[7, 2] = 1e300  # finite in float64, inf in the float32 arena
    trainer = nn.Trainer(Net())
    with pytest.raises(ValueError, match=r"predict: X has a value beyond float32's range "
                                         r"\(first at row 7, column 2: 1e\+300\)"):
        trainer.predict(big)
    with pytest.raises(ValueError, match=r"DataLoader: X has a value beyond float32's range "
                                         r"\(first at row 7, column 2"):
        fit(big, y)
    target = np.zeros((20, 3))
    target[4, 1] = -1e200
    mse = nn.Trainer(Net(), loss="mse")
    with pytest.raises(ValueError, match=r"y has a value beyond float32's range \(first at row 4,"
                                         r" column 1"):
        mse.fit((X, target), epochs=1, verbose=False)
    assert nn.Trainer(Net(), dtype=np.float64).predict(big).shape == (20,)  # float64: fine


@pytest.mark.parametrize("row, match", [
    ([-1.0, 2.0, 0.0], r"y: one-hot / probability targets must lie in \[0, 1\]; row 3 is "
                       r"\[-1.0, 2.0, 0.0\]"),
    ([0.5, 0.6, 0.0], r"y: one-hot / probability target rows must sum to 1; row 3 sums to 1.1"),
    ([0.0, 0.0, 0.0], r"row 3 sums to 0"),
])
def test_cross_entropy_targets_must_be_probabilities(data, row, match):
    X, y = data
    Y = np.eye(3)[y]
    Y[3] = row
    with pytest.raises(ValueError, match=match):
        fit(X, Y)


def test_cross_entropy_accepts_soft_labels_as_pytorch(data):
    """Class probabilities (label smoothing) are targets, as in torch.nn.CrossEntropyLoss."""
    torch = pytest.importorskip("torch")
    X, y = data
    smooth = (np.eye(3)[y] * 0.9 + 0.1 / 3).astype(np.float32)
    nn.set_seed(0)
    trainer = nn.Trainer(Net(), dtype=np.float64)
    got = trainer.evaluate(X, smooth)["loss"]
    logits = torch.tensor(trainer.predict_outputs(X))
    want = torch.nn.CrossEntropyLoss()(logits, torch.tensor(smooth, dtype=torch.float64)).item()
    assert got == pytest.approx(want, rel=1e-6)


# -- numeric arguments of the wrong type: TypeError naming the argument --------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: fit(np.zeros((4, 4), np.float32), np.zeros(4, np.int64), grad_clip_norm="1"),
     "fit: grad_clip_norm"),
    (lambda: fit(np.zeros((4, 4), np.float32), np.zeros(4, np.int64), tol="0.1"), "fit: tol"),
    (lambda: fit(np.zeros((4, 4), np.float32), np.zeros(4, np.int64), n_iter_no_change=2.0),
     "fit: n_iter_no_change"),
    (lambda: fit(np.zeros((4, 4), np.float32), np.zeros(4, np.int64), accumulation_steps="2"),
     "fit: accumulation_steps"),
    (lambda: nn.Trainer(Net()).fit((np.zeros((4, 4)), np.zeros(4)), epochs=2.0),
     "fit: epochs"),
    (lambda: nn.Trainer(Net(), seed="1"), "Trainer: seed"),
    (lambda: nn.DataLoader(np.zeros((4, 4)), np.zeros(4), batch_size="8"),
     "DataLoader: batch_size"),
    (lambda: nn.Adam(lr="0.1"), "Adam: lr"),
    (lambda: nn.SGD(learning_rate="0.1"), "SGD: learning_rate"),
    (lambda: nn.RMSprop(momentum=[0.9]), "RMSprop: momentum"),
    (lambda: nn.schedulers.StepLR("2"), "StepLR.step_size"),
    (lambda: nn.schedulers.ReduceLROnPlateau(factor="0.5"), "ReduceLROnPlateau.factor"),
    (lambda: nn.L2Regularizer("1e-4"), "L2Regularizer: coef"),
    (lambda: nn.Dropout("0.5"), "Dropout: p"),
    (lambda: nn.LeakyReLU("0.1"), "LeakyReLU: negative_slope"),
    (lambda: nn.Linear(4.0, 3), "Linear: in_features"),
    (lambda: nn.set_seed("0"), "set_seed: seed"),
])
def test_numeric_argument_of_wrong_type_names_it(call, name):
    with pytest.raises(TypeError, match=f"^{re.escape(name)} must be .*, got .*") as info:
        call()
    assert isinstance(info.value, ValueError)  # (what some of these raised before)


# -- the arena holds the rows that can occur -----------------------------------------------------
def test_arena_is_sized_by_the_rows_not_the_batch_size(data):
    X, y = data
    small = {}
    for batch_size in (20, 10**7, 10**9):  # 10**9 used to fail: "Unable to allocate 89.4 GiB"
        nn.set_seed(0)
        trainer = nn.Trainer(Net(), seed=0)
        trainer.fit(nn.DataLoader(X, y, batch_size=batch_size), epochs=3, verbose=False)
        assert trainer.program.max_batch == 20
        small[batch_size] = [p.data.copy() for p in trainer.model.parameters()]
    for a, b in zip(small[20], small[10**9]):  # one batch of all rows, bit for bit
        np.testing.assert_array_equal(a, b)


def test_an_arena_that_cannot_fit_names_batch_size():
    from nnjit.engine.program import physical_memory

    class Wide(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(1, 2**16)
            self.out = nn.Linear(2**16, 2)

        def forward(self, x):
            return self.out(self.fc(x))

    rows = physical_memory() // (4 * 2**16) + 1  # the wide layer's float32 output alone
    X = np.broadcast_to(np.float32(1.0), (rows, 1))  # no memory of its own
    loader = nn.DataLoader(X, np.zeros(rows, np.int64), batch_size=rows)
    with pytest.raises(MemoryError, match=r"fit: batch_size: batches of [\d,]+ rows need "
                                          r"[\d.]+ GiB \([\d.]+ GiB of values, [\d.]+ GiB of "
                                          r"gradients\) of arena memory for Wide; more than "
                                          r"this machine's [\d.]+ GiB of RAM\. Use a smaller "
                                          r"batch_size"):
        nn.Trainer(Wide()).fit(loader, epochs=1, verbose=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs RLIMIT_AS and /proc")
def test_an_arena_allocation_that_fails_states_the_sizes_and_the_limit():
    """(issue 23) Under an address-space limit smaller than the arenas (ulimit -v, far below the
    RAM) the message states the arenas' sizes and the limit: it said "11.5 GiB, more than this
    machine has (23.5 GiB)", which was neither."""
    code = """
import resource, numpy as np
import nnjit as nn
X, y = np.zeros((256, 4), np.float32), np.zeros(256, np.int64)
nn.Trainer(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))).fit(X, y, epochs=1, verbose=False)
with open("/proc/self/status") as f:
    mapped = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (mapped + 300 * 2**20, resource.RLIM_INFINITY))
model = nn.Sequential(nn.Linear(4, 2**20, init_values=False), nn.Linear(2**20, 2))
try:
    nn.Trainer(model).fit(X, y, epochs=1, verbose=False, batch_size=256)
except MemoryError as e:
    print(e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, cwd=str(ROOT))
    assert re.search(r"^fit: batch_size: batches of 256 rows need [\d.]+ GiB \([\d.]+ GiB of "
                     r"values, [\d.]+ GiB of gradients\) of arena memory for Sequential; allocating them "
                     r"failed: this process may map [\d.]+ [GM]iB \(ulimit -v\), [\d.]+ [GM]iB of "
                     r"it already mapped; .*the machine has [\d.]+ GiB of its [\d.]+ GiB of RAM "
                     r"available\. Use a smaller batch_size$", out.stdout.strip()), out.stdout + out.stderr


def test_a_huge_epoch_count_stopped_by_a_callback_grows_its_history():
    """(issue 24, item 10) ``epochs=10**12`` with a callback that stops after 3 epochs: the
    history grows as epochs run (before: "Unable to allocate 50.9 TiB" before training)."""
    from nnjit.train.callbacks import Callback

    class StopAfter3(Callback):
        def on_epoch_end(self, trainer, epoch, logs):
            return epoch < 3

    X = np.random.default_rng(0).standard_normal((60, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 2)), nn.SGD(learning_rate=0.1),
                         nn.CrossEntropyLoss(), seed=0)
    history = trainer.fit(X, y, epochs=10**12, batch_size=16, verbose=0, callbacks=[StopAfter3()],
                          log_batches=True)
    assert list(history["epoch"]) == [1, 2, 3]
    assert len(trainer.batch_history_) == 3 * 4
    # past the first history chunk: the rows are copied as the array grows
    def fitted(callbacks):
        with nn.seeded(5):
            trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 2)), nn.SGD(learning_rate=0.1),
                                 nn.CrossEntropyLoss(), seed=0)
        history = trainer.fit(X, y, epochs=150, batch_size=16, verbose=0, callbacks=callbacks,
                              n_iter_no_change=None, log_batches=True)
        return trainer, history

    long, grown = fitted([Callback()])  # paused every epoch: grown past the first chunk
    _, once = fitted(None)  # one compiled call: every row up front
    assert list(grown["epoch"]) == list(range(1, 151))
    np.testing.assert_array_equal(grown["train_loss"], once["train_loss"])
    assert len(long.batch_history_) == 150 * 4


def test_a_huge_epoch_count_in_one_compiled_call_names_epochs():
    X = np.random.default_rng(0).standard_normal((60, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 2)), loss=nn.CrossEntropyLoss(), seed=0)
    with pytest.raises(ValueError, match=r"epochs=1000000000000 needs .* GiB"):
        trainer.fit(X, y, epochs=10**12, batch_size=16, verbose=0)


def test_a_batch_size_beyond_the_rows_is_one_batch_of_every_row():
    """(issue 24, item 10) ``batch_size=2**63-1`` said "the data has no rows"."""
    X = np.random.default_rng(0).standard_normal((60, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    weights = []
    for batch_size in (60, 2**63 - 1):
        with nn.seeded(1):
            trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 2)), nn.SGD(learning_rate=0.1),
                                 nn.CrossEntropyLoss(), seed=0)
        trainer.fit(X, y, epochs=3, batch_size=batch_size, verbose=0)
        weights.append([p.data.copy() for p in trainer.model.parameters()])
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)
