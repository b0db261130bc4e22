"""PyTorch-eager and JAX implementations of the benchmark MLPs (the peers nnjit is measured by).

Both train ``Linear - ReLU - ... - Linear`` classifiers with softmax cross-entropy and Adam, with
the L2 flavour of ``torch.optim.Adam(weight_decay=...)`` (``g += wd * w`` on every parameter,
every step: the same as ``nnjit.L2Regularizer``), shuffle every epoch, keep the short last batch,
and optionally validate every epoch with scikit-learn's early-stopping rule on the validation
loss (what nnjit's ``monitor='val_loss'`` does):

* an epoch counts as *no improvement* unless ``val_loss <= best - tol``;
* the best value (and, for the restore, the weights) is updated whenever ``val_loss < best``;
* training stops once more than ``n_iter_no_change`` epochs in a row brought no improvement,
  and the best epoch's weights are restored.

:func:`torch_fit` is a standard eager PyTorch loop (``torch.randperm`` + index slicing, one
``loss.item()`` per step, no ``torch.utils.data.DataLoader``), one thread; PyTorch's default
layer initialisation. :class:`JaxFit` compiles the *whole* fit -- initialisation (Glorot
uniform, zero biases, as nnjit), every epoch's shuffle, the minibatch steps (``lax.scan``), the
validation pass and early stopping (``lax.while_loop``) -- into one jitted function, so it pays
no Python cost per step or per epoch; XLA is limited to one thread.

Nothing here is imported by nnjit; torch and jax are imported lazily, and
:func:`torch_missing` / :func:`jax_missing` say why a peer cannot run.
"""

from __future__ import annotations

import math
import os
import time

# One XLA thread, like every other contender (set before jax is first imported; a value the
# user already set is respected).
_XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def torch_missing() -> str | None:
    """None when PyTorch can be imported, else the reason."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return f"PyTorch not installed ({e}); pip install '.[parity]'"
    return None


def jax_missing() -> str | None:
    """None when JAX can be imported, else the reason."""
    os.environ.setdefault("XLA_FLAGS", _XLA_ONE_THREAD)
    try:
        import jax  # noqa: F401
    except ImportError as e:
        return f"JAX not installed ({e}); pip install '.[bench]'"
    return None


# -- PyTorch eager -------------------------------------------------------------------------------
def torch_setup_threads() -> dict:
    """Pin PyTorch to one intra-op and (if still possible) one inter-op thread."""
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work already ran
        pass
    return {"num_threads": torch.get_num_threads(),
            "num_interop_threads": torch.get_num_interop_threads()}


def torch_tensors(X, y):
    """float32 features and int64 labels as tensors sharing memory with the arrays."""
    import numpy as np
    import torch

    return (torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32)),
            torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64)))


def torch_mlp(sizes):
    """``Linear(sizes[0], sizes[1]) - ReLU - ... - Linear(sizes[-2], sizes[-1])``."""
    import torch

    layers = []
    for i in range(len(sizes) - 1):
        if i:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
    return torch.nn.Sequential(*layers)


def torch_train_epoch(model, opt, loss_fn, X, y, batch_size: int) -> float:
    """One eager epoch: ``torch.randperm`` shuffle, index slicing, one step per minibatch.

    Returns the sum over minibatches of ``loss * rows`` (divide by ``len(X)`` for the mean)."""
    import torch

    n = len(X)
    perm = torch.randperm(n)
    loss_sum = 0.0
    for i in range(0, n, batch_size):
        idx = perm[i:i + batch_size]
        xb, yb = X[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        loss_sum += loss.item() * len(idx)
    return loss_sum


def torch_fit(sizes, X, y, Xv=None, yv=None, *, batch_size: int, lr: float,
              weight_decay: float = 0.0, epochs: int = 100, tol: float = 1e-4,
              n_iter_no_change: int | None = 10, seed: int = 0) -> dict:
    """Build and train an MLP in eager PyTorch; ``X``, ``y``, ... are :func:`torch_tensors`.

    Returns ``{"model", "epochs", "epoch_s" (per-epoch wall times, validation included),
    "best_epoch" (1-based or None), "val_loss" (per epoch)}``. With validation data the loop
    stops early on the validation loss (module docstring) and restores the best weights.
    """
    import torch

    torch.manual_seed(seed)
    model = torch_mlp(sizes)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    validate = Xv is not None
    best, best_epoch, bad, best_state = math.inf, None, 0, None
    epoch_s, val_losses = [], []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        model.train()
        torch_train_epoch(model, opt, loss_fn, X, y, batch_size)
        stop = False
        if validate:
            model.eval()
            with torch.no_grad():
                vl = loss_fn(model(Xv), yv).item()
            val_losses.append(vl)
            bad = 0 if vl <= best - tol else bad + 1
            if vl < best:
                best, best_epoch = vl, epoch + 1
                best_state = [p.detach().clone() for p in model.parameters()]
            stop = bool(n_iter_no_change) and bad > n_iter_no_change
        epoch_s.append(time.perf_counter() - t0)
        if stop:
            break
    if best_state is not None:
        with torch.no_grad():
            for p, b in zip(model.parameters(), best_state):
                p.copy_(b)
    model.eval()
    return {"model": model, "epochs": len(epoch_s), "epoch_s": epoch_s,
            "best_epoch": best_epoch, "val_loss": val_losses}


def torch_predict(model, X):
    """Class indices (numpy) for a float32 tensor ``X``."""
    import torch

    with torch.no_grad():
        return model(X).argmax(1).numpy()


# -- JAX: the whole fit in one jitted call -------------------------------------------------------
class JaxFit:
    """An MLP fit compiled into one XLA computation for fixed data shapes.

    ``JaxFit(sizes, n_train, n_val, batch_size=..., lr=..., ...)`` then :meth:`compile` (returns
    the compile time: tracing + lowering + XLA compile) and :meth:`run` (one whole fit; blocks
    until the result is ready). The shuffle, the minibatch loop (``lax.scan`` over the full
    batches, then one step on the short last batch), validation and early stopping
    (``lax.while_loop`` over epochs) all happen inside. ``n_val=0`` trains exactly ``epochs``
    epochs without validation.
    """

    def __init__(self, sizes, n_train: int, n_val: int, *, batch_size: int, lr: float,
                 weight_decay: float = 0.0, epochs: int = 100, tol: float = 1e-4,
                 n_iter_no_change: int | None = 10, betas=(0.9, 0.999), eps: float = 1e-8):
        jax_missing()  # sets XLA_FLAGS before the first import
        self.sizes = tuple(int(s) for s in sizes)
        self.n_train, self.n_val = int(n_train), int(n_val)
        self.batch_size = int(batch_size)
        self.epochs = int(epochs)
        self.hyper = dict(lr=float(lr), weight_decay=float(weight_decay), tol=float(tol),
                          patience=int(n_iter_no_change or 0), b1=float(betas[0]),
                          b2=float(betas[1]), eps=float(eps))
        self._compiled = None

    # The function that XLA compiles (pure; every size is a Python constant).
    def _build(self):
        import jax
        import jax.numpy as jnp
        from jax import lax

        sizes, n, n_val, bs = self.sizes, self.n_train, self.n_val, self.batch_size
        h = self.hyper
        lr, wd, tol, patience = h["lr"], h["weight_decay"], h["tol"], h["patience"]
        b1, b2, eps = h["b1"], h["b2"], h["eps"]
        n_full, rem = divmod(n, bs)
        max_epochs = self.epochs
        validate = n_val > 0

        def init(key):
            params = []
            for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
                key, sub = jax.random.split(key)
                limit = math.sqrt(6.0 / (fan_in + fan_out))
                w = jax.random.uniform(sub, (fan_in, fan_out), jnp.float32, -limit, limit)
                params.append((w, jnp.zeros((fan_out,), jnp.float32)))
            return params

        def forward(params, x):
            for i, (w, b) in enumerate(params):
                x = x @ w + b
                if i < len(params) - 1:
                    x = jax.nn.relu(x)
            return x

        def mean_ce(params, x, y):
            logits = forward(params, x)
            logz = jax.nn.logsumexp(logits, axis=1)
            picked = jnp.take_along_axis(logits, y[:, None], axis=1)[:, 0]
            return jnp.mean(logz - picked)

        grad_fn = jax.value_and_grad(mean_ce)

        def adam_step(state, xb, yb):
            params, m, v, t = state
            loss, g = grad_fn(params, xb, yb)
            t = t + 1
            g = jax.tree_util.tree_map(lambda gi, p: gi + wd * p, g, params)
            m = jax.tree_util.tree_map(lambda mi, gi: b1 * mi + (1 - b1) * gi, m, g)
            v = jax.tree_util.tree_map(lambda vi, gi: b2 * vi + (1 - b2) * gi * gi, v, g)
            tf = t.astype(jnp.float32)
            step_size = lr / (1 - b1 ** tf)
            bc2 = jnp.sqrt(1 - b2 ** tf)
            params = jax.tree_util.tree_map(
                lambda p, mi, vi: p - step_size * mi / (jnp.sqrt(vi) / bc2 + eps), params, m, v)
            return (params, m, v, t), loss

        def epoch(carry, X, y, Xv, yv):
            params, m, v, t, key, best, best_params, bad, e = carry
            key, sub = jax.random.split(key)
            perm = jax.random.permutation(sub, n)
            state = (params, m, v, t)
            if n_full:
                idx = perm[:n_full * bs].reshape(n_full, bs)

                def body(s, ib):
                    return adam_step(s, X[ib], y[ib])

                state, _ = lax.scan(body, state, idx)
            if rem:
                ib = perm[n_full * bs:]
                state, _ = adam_step(state, X[ib], y[ib])
            params, m, v, t = state
            if validate:
                vl = mean_ce(params, Xv, yv)
                bad = jnp.where(vl <= best - tol, 0, bad + 1)
                better = vl < best
                best_params = jax.tree_util.tree_map(
                    lambda p, bp: jnp.where(better, p, bp), params, best_params)
                best = jnp.where(better, vl, best)
            return (params, m, v, t, key, best, best_params, bad, e + 1)

        def fit(key, X, y, Xv, yv):
            key, sub = jax.random.split(key)
            params = init(sub)
            zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
            carry = (params, zeros, zeros, jnp.int32(0), key, jnp.float32(jnp.inf), params,
                     jnp.int32(0), jnp.int32(0))

            def cond(c):
                go = c[-1] < max_epochs
                if validate and patience > 0:
                    go = go & (c[7] <= patience)
                return go

            carry = lax.while_loop(cond, lambda c: epoch(c, X, y, Xv, yv), carry)
            params, best, best_params, epochs_run = carry[0], carry[5], carry[6], carry[8]
            if validate:
                params = best_params
            return params, epochs_run, best

        self._forward = jax.jit(forward)
        return fit

    def compile(self, X, y, Xv=None, yv=None, seed: int = 0) -> float:
        """Trace, lower and compile for these arrays; returns the wall time it took."""
        import jax

        args = self.device_args(X, y, Xv, yv, seed)
        t0 = time.perf_counter()
        self._compiled = jax.jit(self._build()).lower(*args).compile()
        return time.perf_counter() - t0

    def device_args(self, X, y, Xv=None, yv=None, seed: int = 0):
        """(key, X, y, Xv, yv) as device arrays (validation arrays empty when not validating)."""
        import jax
        import jax.numpy as jnp
        import numpy as np

        if len(X) != self.n_train:
            raise ValueError(f"JaxFit was built for {self.n_train} training rows, got {len(X)}")
        if Xv is None:
            Xv = np.zeros((0, X.shape[1]), np.float32)
            yv = np.zeros(0, np.int32)
        if len(Xv) != self.n_val:
            raise ValueError(f"JaxFit was built for {self.n_val} validation rows, got {len(Xv)}")
        arrays = [jnp.asarray(np.asarray(a, np.float32)) if i % 2 == 0
                  else jnp.asarray(np.asarray(a, np.int32)) for i, a in enumerate((X, y, Xv, yv))]
        key = jax.random.PRNGKey(seed)
        out = (key, *arrays)
        jax.block_until_ready(out)
        return out

    def run(self, args) -> dict:
        """One whole fit on ``device_args(...)``: ``{"params", "epochs", "best_val_loss"}``."""
        import jax

        if self._compiled is None:
            raise RuntimeError("JaxFit.run before compile()")
        params, epochs, best = jax.block_until_ready(self._compiled(*args))
        return {"params": params, "epochs": int(epochs), "best_val_loss": float(best)}

    def predict(self, params, X):
        import jax.numpy as jnp
        import numpy as np

        return np.asarray(jnp.argmax(self._forward(params, jnp.asarray(X, jnp.float32)), axis=1))


def jax_versions() -> dict:
    import jax
    import jaxlib

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "xla_flags": os.environ.get("XLA_FLAGS"), "backend": jax.default_backend()}
