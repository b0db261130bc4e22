"""Parity with PyTorch: forward, gradients, optimizer steps, L2 flavours and minibatching.

Every test builds the same network twice, in nnjit and in torch, with identical weights (nnjit's
``Linear.weight`` is ``(out_features, in_features)`` like torch's), runs both and compares
results: float32 within float32 round-off, float64 within 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

F32 = dict(rtol=1e-5, atol=1e-6)
F64 = dict(rtol=1e-10, atol=1e-12)
TOL = {np.float32: F32, np.float64: F64}
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}

# (nnjit factory, torch factory) pairs; non-default arguments check they are passed through.
# Pre-activations here stay well below 20: above it torch's Softplus returns x itself (its
# ``threshold``), while nnjit keeps x + log1p(exp(-x)), 2e-9 away (see tests/kernels).
ACTIVATIONS = {
    "relu": (nn.ReLU, torch.nn.ReLU),
    "tanh": (nn.Tanh, torch.nn.Tanh),
    "gelu": (nn.GELU, torch.nn.GELU),
    "elu": (lambda: nn.ELU(alpha=0.7), lambda: torch.nn.ELU(alpha=0.7)),
    "leaky_relu": (lambda: nn.LeakyReLU(0.05), lambda: torch.nn.LeakyReLU(0.05)),
    "softplus": (nn.Softplus, torch.nn.Softplus),
    "sigmoid": (nn.Sigmoid, torch.nn.Sigmoid),
    "selu": (nn.SELU, torch.nn.SELU),
}
# Layer widths and the activation after each hidden layer.
ARCHS = {
    "relu_tanh": ((5, 16, 8, 3), ("relu", "tanh")),
    "smooth": ((5, 16, 12, 10, 8, 8, 6, 3),
               ("gelu", "elu", "leaky_relu", "softplus", "sigmoid", "selu")),
}


def make_pair(arch="relu_tanh", dtype=np.float32, seed=0, n_out=None):
    """The same MLP in nnjit and torch, with identical weights of ``dtype``."""
    widths, acts = ARCHS[arch]
    widths = widths[:-1] + (n_out or widths[-1],)
    rng = np.random.default_rng(seed)
    ours, theirs = [], []
    for i, (n_in, n_out_) in enumerate(zip(widths[:-1], widths[1:])):
        w = (rng.normal(size=(n_out_, n_in)) * 1.5 / np.sqrt(n_in)).astype(dtype)
        b = (rng.normal(size=n_out_) * 0.3).astype(dtype)
        lin = nn.Linear(n_in, n_out_)
        lin.weight.data = w.copy()
        lin.bias.data = b.copy()
        tlin = torch.nn.Linear(n_in, n_out_, dtype=TORCH_DTYPE[dtype])
        with torch.no_grad():
            tlin.weight.copy_(torch.from_numpy(w))
            tlin.bias.copy_(torch.from_numpy(b))
        ours.append(lin)
        theirs.append(tlin)
        if i < len(acts):
            ours.append(ACTIVATIONS[acts[i]][0]())
            theirs.append(ACTIVATIONS[acts[i]][1]())
    return nn.Sequential(*ours), torch.nn.Sequential(*theirs)


def data(n=32, n_features=5, n_classes=3, dtype=np.float32, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features)).astype(dtype)
    y = rng.integers(0, n_classes, size=n)
    return X, y


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def params_of(model):
    return {name: np.array(p.data, copy=True) for name, p in model.named_parameters()}


def assert_params_equal(model, tmodel, tol, what=""):
    ours = params_of(model)
    theirs = {name: p.detach().numpy() for name, p in tmodel.named_parameters()}
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], err_msg=f"{what} {name}", **tol)


# -- 1. forward --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("arch", list(ARCHS))
def test_forward_matches_torch(arch, dtype):
    model, tmodel = make_pair(arch, dtype)
    X, y = data(dtype=dtype)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.CrossEntropyLoss(), dtype=dtype)
    trainer.gradients(X, y)  # compiles the program without touching the weights
    out = trainer.predict_outputs(X)
    assert out.dtype == dtype
    expected = tmodel(t(X)).detach().numpy()
    np.testing.assert_allclose(out, expected, **TOL[dtype])
    # the eval-batch path (rows split over several eval batches) gives the same rows
    X_big = np.concatenate([X] * 5)
    np.testing.assert_allclose(trainer.predict_outputs(X_big), np.concatenate([expected] * 5),
                               **TOL[dtype])
    # the weights were not changed by gradients() nor predict
    assert_params_equal(model, tmodel, dict(rtol=0, atol=0))


# -- 2. gradients ------------------------------------------------------------------------------

def _targets(kind, y, n, dtype):
    """(nnjit targets, nnjit loss, torch loss, torch targets, number of outputs) for a kind."""
    rng = np.random.default_rng(2)
    if kind == "ce_index":
        return y, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), t(y), 3
    if kind == "ce_onehot":
        Y = np.eye(3, dtype=dtype)[y]
        return Y, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), t(Y), 3
    if kind == "ce_soft":  # probability rows
        P = rng.dirichlet(np.ones(3), size=n).astype(dtype)
        return P, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), t(P), 3
    if kind == "mse":
        Y = rng.normal(size=(n, 3)).astype(dtype)
        return Y, nn.MSELoss(), torch.nn.MSELoss(), t(Y), 3
    if kind == "bce_multi":
        Y = rng.integers(0, 2, size=(n, 3)).astype(dtype)
        return Y, nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss(), t(Y), 3
    if kind == "bce_single":  # one output, targets (N,)
        Y = rng.integers(0, 2, size=n).astype(dtype)
        return Y, nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss(), t(Y.reshape(-1, 1)), 1
    raise AssertionError(kind)


GRAD_TOL = {np.float32: dict(rtol=1e-4, atol=1e-6), np.float64: F64}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["ce_index", "ce_onehot", "ce_soft", "mse", "bce_multi",
                                  "bce_single"])
@pytest.mark.parametrize("arch", list(ARCHS))
def test_gradients_match_autograd(arch, kind, dtype):
    X, y = data(dtype=dtype)
    ours_y, loss, tloss, ty, n_out = _targets(kind, y, len(X), dtype)
    model, tmodel = make_pair(arch, dtype, n_out=n_out)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), loss, dtype=dtype)
    grads = trainer.gradients(X, ours_y)

    value = tloss(tmodel(t(X)), ty)
    value.backward()
    expected = {name: p.grad.numpy() for name, p in tmodel.named_parameters()}
    assert grads.keys() == expected.keys()
    for name in expected:
        assert grads[name].shape == expected[name].shape
        np.testing.assert_allclose(grads[name], expected[name], err_msg=name, **GRAD_TOL[dtype])
    assert trainer.last_loss_ == pytest.approx(value.item(), rel=TOL[dtype]["rtol"])
    assert trainer.evaluate(X, ours_y)["loss"] == pytest.approx(value.item(),
                                                                rel=TOL[dtype]["rtol"])


# -- 3. optimizer steps ------------------------------------------------------------------------

OPTIMIZERS = {
    "adam": (lambda: nn.Adam(lr=0.01),
             lambda p: torch.optim.Adam(p, lr=0.01)),
    "adam_l2": (lambda: nn.Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
                lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6,
                                           weight_decay=0.1)),
    "adamw": (lambda: nn.AdamW(lr=0.01, weight_decay=0.5),
              lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.5)),
    "adamw_default": (lambda: nn.AdamW(lr=0.01),
                      lambda p: torch.optim.AdamW(p, lr=0.01)),
    "sgd": (lambda: nn.SGD(lr=0.1),
            lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_nesterov": (lambda: nn.SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                               weight_decay=0.01)),
    "sgd_dampening": (lambda: nn.SGD(lr=0.1, momentum=0.8, dampening=0.3),
                      lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.8, dampening=0.3)),
    "rmsprop": (lambda: nn.RMSprop(lr=0.01),
                lambda p: torch.optim.RMSprop(p, lr=0.01)),
    "rmsprop_momentum": (lambda: nn.RMSprop(lr=0.01, alpha=0.9, momentum=0.5, weight_decay=0.1),
                         lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.5,
                                                       weight_decay=0.1)),
    "adagrad": (lambda: nn.Adagrad(lr=0.05, lr_decay=0.01, weight_decay=0.01),
                lambda p: torch.optim.Adagrad(p, lr=0.05, lr_decay=0.01, weight_decay=0.01)),
    "adadelta": (lambda: nn.Adadelta(weight_decay=0.01),
                 lambda p: torch.optim.Adadelta(p, weight_decay=0.01)),
    "adamax": (lambda: nn.Adamax(lr=0.01, weight_decay=0.01),
               lambda p: torch.optim.Adamax(p, lr=0.01, weight_decay=0.01)),
    "nadam": (lambda: nn.NAdam(lr=0.01, weight_decay=0.01, decoupled_weight_decay=True),
              lambda p: torch.optim.NAdam(p, lr=0.01, weight_decay=0.01,
                                          decoupled_weight_decay=True)),
    "radam": (lambda: nn.RAdam(lr=0.01, weight_decay=0.01),
              lambda p: torch.optim.RAdam(p, lr=0.01, weight_decay=0.01)),
}


def torch_epochs(tmodel, topt, tloss, X, y, batch_size, epochs, penalty=None):
    """torch's loop over the same unshuffled batches; returns the mean loss of each epoch."""
    losses = []
    for _ in range(epochs):
        total = 0.0
        for start in range(0, len(X), batch_size):
            xb, yb = t(X[start:start + batch_size]), t(y[start:start + batch_size])
            topt.zero_grad()
            value = tloss(tmodel(xb), yb)
            if penalty is not None:
                value = value + penalty(tmodel, len(xb))
            value.backward()
            topt.step()
            total += value.item() * len(xb)
        losses.append(total / len(X))
    return losses


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_three_full_batch_steps_match_torch(opt, dtype):
    X, y = data(dtype=dtype)
    model, tmodel = make_pair("relu_tanh", dtype)
    make_ours, make_theirs = OPTIMIZERS[opt]
    trainer = nn.Trainer(model, make_ours(), nn.CrossEntropyLoss(), dtype=dtype)
    history = trainer.fit(nn.DataLoader(X, y, batch_size=len(X), shuffle=False), epochs=3,
                          n_iter_no_change=None, verbose=False)
    previous = torch.get_default_dtype()  # (NAdam keeps its momentum product in it)
    torch.set_default_dtype(torch.float64 if dtype == np.float64 else torch.float32)
    try:
        losses = torch_epochs(tmodel, make_theirs(tmodel.parameters()),
                              torch.nn.CrossEntropyLoss(), X, y, len(X), 3)
    finally:
        torch.set_default_dtype(previous)
    assert trainer.optimizer.iterations == 3
    assert_params_equal(model, tmodel, TOL[dtype], opt)
    np.testing.assert_allclose(history["train_loss"], losses, rtol=TOL[dtype]["rtol"])


def test_second_fit_continues_the_optimizer_state():
    """fit twice (2 + 1 epochs) equals three torch steps: Adam's moments and step count persist."""
    X, y = data()
    model, tmodel = make_pair("relu_tanh")
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.CrossEntropyLoss())
    loader = nn.DataLoader(X, y, batch_size=len(X), shuffle=False)
    trainer.fit(loader, epochs=2, n_iter_no_change=None, verbose=False)
    trainer.fit(loader, epochs=1, n_iter_no_change=None, verbose=False)
    torch_epochs(tmodel, torch.optim.Adam(tmodel.parameters(), lr=0.01),
                 torch.nn.CrossEntropyLoss(), X, y, len(X), 3)
    assert_params_equal(model, tmodel, F32)


# -- 4. L2 flavours ----------------------------------------------------------------------------

L2_OPTIMIZERS = {  # nnjit optimizer, torch optimizer given its weight_decay
    "sgd": (lambda: nn.SGD(lr=0.1), lambda p, wd: torch.optim.SGD(p, lr=0.1, weight_decay=wd)),
    "sgd_momentum": (lambda: nn.SGD(lr=0.1, momentum=0.9),
                     lambda p, wd: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=wd)),
    "adam": (lambda: nn.Adam(lr=0.01),
             lambda p, wd: torch.optim.Adam(p, lr=0.01, weight_decay=wd)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opt", list(L2_OPTIMIZERS))
def test_l2_regularizer_is_torch_weight_decay(opt, dtype):
    """L2Regularizer(lam) adds lam*p to every gradient (biases too), not divided by the batch:
    torch's coupled weight_decay=lam (SGD's, and Adam's, which is also L2 in the gradient)."""
    lam = 0.3
    X, y = data(dtype=dtype)
    model, tmodel = make_pair("relu_tanh", dtype)
    make_ours, make_theirs = L2_OPTIMIZERS[opt]
    trainer = nn.Trainer(model, make_ours(), nn.CrossEntropyLoss(), nn.L2Regularizer(lam),
                         dtype=dtype)
    history = trainer.fit(nn.DataLoader(X, y, batch_size=len(X), shuffle=False), epochs=2,
                          n_iter_no_change=None, verbose=False)
    topt = make_theirs(tmodel.parameters(), lam)
    # the reported loss includes the penalty 0.5*lam*||p||^2 over every parameter (biases too)
    expected = []
    for _ in range(2):
        with torch.no_grad():
            penalty = 0.5 * lam * sum(float((p**2).sum()) for p in tmodel.parameters())
        expected.append(torch_epochs(tmodel, topt, torch.nn.CrossEntropyLoss(), X, y, len(X),
                                     1)[0] + penalty)
    assert_params_equal(model, tmodel, TOL[dtype], opt)
    np.testing.assert_allclose(history["train_loss"], expected, rtol=TOL[dtype]["rtol"])


def sklearn_penalty(alpha):
    """scikit-learn's MLP penalty: 0.5*alpha*||W||^2 / batch rows, weights only (no biases)."""
    def penalty(tmodel, rows):
        return 0.5 * alpha * sum((p**2).sum() for name, p in tmodel.named_parameters()
                                 if name.endswith("weight")) / rows
    return penalty


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, batch_size", [(12, 4), (10, 4)])
def test_sklearn_l2_regularizer_is_weight_penalty_over_batch_size(n, batch_size, dtype):
    """Full batches of 4 (12 rows) and a short last batch (10 rows: divided by its 2 rows)."""
    alpha = 0.5
    X, y = data(n=n, dtype=dtype)
    model, tmodel = make_pair("relu_tanh", dtype)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.CrossEntropyLoss(),
                         nn.SklearnL2Regularizer(alpha), dtype=dtype)
    history = trainer.fit(nn.DataLoader(X, y, batch_size=batch_size, shuffle=False), epochs=2,
                          n_iter_no_change=None, verbose=False)
    losses = torch_epochs(tmodel, torch.optim.SGD(tmodel.parameters(), lr=0.1),
                          torch.nn.CrossEntropyLoss(), X, y, batch_size, 2,
                          penalty=sklearn_penalty(alpha))
    assert_params_equal(model, tmodel, TOL[dtype])
    np.testing.assert_allclose(history["train_loss"], losses, rtol=TOL[dtype]["rtol"])


def test_sklearn_l2_leaves_biases_alone():
    """One full-batch SGD step with and without the penalty: the weights differ, the biases are
    bit-identical (the penalty never touches a bias gradient)."""
    X, y = data()
    results = []
    for reg in (None, nn.SklearnL2Regularizer(5.0)):
        model, _ = make_pair("relu_tanh")
        nn.Trainer(model, nn.SGD(lr=0.1), nn.CrossEntropyLoss(), reg).fit(
            nn.DataLoader(X, y, batch_size=len(X), shuffle=False), epochs=1,
            n_iter_no_change=None, verbose=False)
        results.append(params_of(model))
    plain, regularised = results
    for name in plain:
        if name.endswith("bias"):
            np.testing.assert_array_equal(regularised[name], plain[name])
        else:
            assert not np.allclose(regularised[name], plain[name])


# -- 5. minibatches ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opt", ["sgd", "adam", "sgd_nesterov"])
def test_unshuffled_minibatches_with_short_last_batch_match_torch(opt, dtype):
    X, y = data(n=10, dtype=dtype)
    model, tmodel = make_pair("smooth", dtype)
    make_ours, make_theirs = OPTIMIZERS[opt]
    trainer = nn.Trainer(model, make_ours(), nn.CrossEntropyLoss(), dtype=dtype)
    history = trainer.fit(nn.DataLoader(X, y, batch_size=4, shuffle=False), epochs=1,
                          n_iter_no_change=None, verbose=False)
    losses = torch_epochs(tmodel, make_theirs(tmodel.parameters()), torch.nn.CrossEntropyLoss(),
                          X, y, 4, 1)
    assert trainer.optimizer.iterations == 3  # 4 + 4 + 2 rows
    assert_params_equal(model, tmodel, TOL[dtype], opt)
    # the epoch loss is the row-weighted mean of the batch means
    np.testing.assert_allclose(history["train_loss"], losses, rtol=TOL[dtype]["rtol"])


def test_drop_last_skips_the_short_batch_like_torch():
    X, y = data(n=10)
    model, tmodel = make_pair("relu_tanh")
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.CrossEntropyLoss())
    trainer.fit(nn.DataLoader(X, y, batch_size=4, shuffle=False, drop_last=True), epochs=2,
                n_iter_no_change=None, verbose=False)
    torch_epochs(tmodel, torch.optim.SGD(tmodel.parameters(), lr=0.1),
                 torch.nn.CrossEntropyLoss(), X[:8], y[:8], 4, 2)
    assert trainer.optimizer.iterations == 4
    assert_params_equal(model, tmodel, F32)
