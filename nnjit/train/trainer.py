"""``Trainer`` (alias ``JITCompiler``): traces a model once and fits it in compiled code."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from nnjit.config import DEFAULT_DTYPE, SUPPORTED_DTYPES
from nnjit.data.loader import DataLoader, check_features
from nnjit.graph import interpreter as it
from nnjit.graph import status as st
from nnjit.graph.program import Program
from nnjit.graph.tape import Tape, Tensor
from nnjit.kernels import loss as kl
from nnjit.losses import CrossEntropyLoss, Loss, get_loss
from nnjit.nn.module import Module
from nnjit.optim import Optimizer, get_optimizer
from nnjit.optim.adam import Adam
from nnjit.random import next_seed
from nnjit.regularizers import Regularizer
from nnjit.schedulers import ReduceLROnPlateau, Scheduler
from nnjit.train.callbacks import CallbackList
from nnjit.train.history import history_frame
from nnjit.train.threads import single_threaded_blas

if TYPE_CHECKING:  # pandas costs ~100 ms at import; it is loaded when the first history is built
    import pandas as pd

MONITORS = {
    "val_loss": it.MONITOR_VAL_LOSS,
    "val_accuracy": it.MONITOR_VAL_ACCURACY,
    "train_loss": it.MONITOR_TRAIN_LOSS,
}


class Trainer:
    """Compile a model with an optimizer and a loss, then fit, evaluate and predict.

    The whole fit (shuffling, minibatches, forward, loss, backward, optimizer step, validation,
    early stopping with best-weight restore) runs in one compiled call with the GIL released and
    BLAS pinned to one thread; it is split into one call per epoch only when Python must run
    between epochs (``callbacks``, ``verbose=2``) or at Python ops (:class:`nnjit.Op`).

    Args:
        model: the :class:`~nnjit.nn.Module` to train.
        optimizer: an :class:`~nnjit.optim.Optimizer` or a name (default ``Adam()``).
        loss: a :class:`~nnjit.losses.Loss` or a name (default cross-entropy).
        regularizer: optional :class:`~nnjit.regularizers.L2Regularizer` or
            :class:`~nnjit.regularizers.SklearnL2Regularizer`.
        dtype: arena dtype, ``np.float32`` (default) or ``np.float64``.
        seed: seed of this trainer's RNG (shuffling, dropout); drawn from
            :func:`nnjit.set_seed`'s generator when omitted.

    Example:
        >>> trainer = Trainer(model, Adam(lr=0.01), CrossEntropyLoss())
        >>> history = trainer.fit(DataLoader(X, y, batch_size=16), epochs=100, val=(Xv, yv))
        >>> trainer.predict(X_test)
    """

    def __init__(self, model: Module, optimizer=None, loss=None, regularizer=None, *,
                 dtype=None, seed: int | None = None):
        if not isinstance(model, Module):
            raise TypeError(f"Trainer: model must be an nnjit Module, got {type(model).__name__}")
        model._check_init()
        if not model.parameters():
            raise ValueError(f"Trainer: the model {type(model).__name__} has no parameters to "
                             "train; register layers or Parameters as attributes in __init__")
        self.model = model
        self.optimizer: Optimizer = Adam() if optimizer is None else get_optimizer(optimizer)
        self.loss: Loss = CrossEntropyLoss() if loss is None else get_loss(loss)
        if regularizer is not None and not isinstance(regularizer, Regularizer):
            raise TypeError(f"Trainer: regularizer must be an L2Regularizer or "
                            f"SklearnL2Regularizer, got {type(regularizer).__name__}")
        self.regularizer = regularizer
        self.dtype = np.dtype(DEFAULT_DTYPE if dtype is None else dtype)
        if self.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"Trainer: dtype must be float32 or float64, got {self.dtype}")
        self.seed = next_seed() if seed is None else int(seed)
        self.program: Program | None = None
        self.history_: "pd.DataFrame | None" = None
        self._state = np.zeros(it.STATE_WIDTH, dtype=np.float64)
        self._cfg = np.zeros(it.CONFIG_WIDTH, dtype=np.float64)
        self._perm: np.ndarray | None = None
        self._pending_rng: np.ndarray | None = None
        self.stop_training = False  # a callback may set it to stop after the current epoch

    # -- compilation -----------------------------------------------------------------------------
    def _trace(self, n_features: int, max_batch: int):
        tape = Tape(self.dtype, max_batch)
        self._modules = list(self.model.named_modules())  # traversed once per trace
        self._named_params = []
        seen = set()
        for path, module in self._modules:
            object.__setattr__(module, "_path", path)
            for name, p in module._parameters.items():  # as Module.named_parameters()
                if id(p) not in seen:
                    seen.add(id(p))
                    self._named_params.append((f"{path}.{name}" if path else name, p))
        for name, p in self._named_params:
            tape.parameter(p, name)
        x = tape.input(n_features, "input")
        with tape.recording():
            out = self.model(x)
        if not isinstance(out, Tensor) or out.tape is not tape:
            raise TypeError(f"{type(self.model).__name__}.forward must return the output tensor "
                            f"of its last layer, got {type(out).__name__}")
        return tape, x, out

    def _compile(self, X: np.ndarray, y, max_batch: int, where: str):
        """Trace and lay out the model if needed; return (X, Y) in the arena dtype."""
        n_features = X.shape[1]
        program = self.program
        if program is not None:
            self._check_feature_count(X, where)
        n_outputs = program.output_cols if program is not None else None
        tape = None
        if n_outputs is None:
            tape, x, out = self._trace(n_features, max_batch)
            n_outputs = out.cols
        Y = None if y is None else y(n_outputs)
        target_cols = Y.shape[1] if Y is not None else (
            program.target_cols if program is not None else (1 if self.loss.is_classification
                                                             and n_outputs > 1 else n_outputs))
        if program is not None and (program.target_cols != target_cols
                                    or program.max_batch < max_batch):
            tape = None
            program = None
        if program is None:
            if tape is None:
                tape, x, out = self._trace(n_features, max(max_batch, self._max_batch()))
            target = tape.input(target_cols, "target")
            loss = self.loss.record(tape, out, target)
            program = Program(tape, x, target, out, loss, seed=self.seed)
            self._install(program)
        return Y

    def _set_training(self, mode: bool) -> None:
        """``model.train(mode)`` over the modules found when tracing (no second traversal)."""
        for _, module in self._modules:
            module.__dict__["training"] = mode

    def _max_batch(self) -> int:
        return self.program.max_batch if self.program is not None else 1

    def _install(self, program: Program) -> None:
        """Move parameters into the new arena and keep optimizer state and RNG position."""
        old = self.program
        if old is not None:
            program.rng[:] = old.rng
        elif self._pending_rng is not None:
            program.rng[:] = self._pending_rng
        self.param_spans = {}
        slots = program.slots.tolist()
        for name, p in self._named_params:
            off, rows, cols, _ = slots[program.param_slots[name]]
            view = program.values[off : off + rows * cols].reshape(p.data.shape)
            view[...] = p.data
            p.data = view
            p.grad = program.grads[off : off + rows * cols].reshape(view.shape)
            self.param_spans[name] = (off, rows * cols)
        self.optimizer.build(program.n_params, self.dtype)
        self._best = np.empty(program.n_params, dtype=self.dtype)
        spans = self.regularizer.spans(self.param_spans) if self.regularizer else np.zeros((0, 2))
        self._reg_spans = np.ascontiguousarray(spans, dtype=np.int64)
        self.program = program
        self.model._trainer = self

    # -- data ------------------------------------------------------------------------------------
    def _as_loader(self, data, y, where: str, batch_size=None) -> DataLoader:
        if isinstance(data, DataLoader):
            if y is not None:
                raise ValueError(f"{where}: pass targets inside the DataLoader, not as y")
            return data
        if isinstance(data, tuple) and len(data) == 2 and y is None:
            data, y = data
        if y is None:
            raise ValueError(f"{where}: expected a DataLoader or (X, y), got "
                             f"{type(data).__name__} without targets")
        size = batch_size(len(data)) if callable(batch_size) else (batch_size or 256)
        return DataLoader(data, y, batch_size=size, shuffle=False)

    def _empty(self, cols: int) -> np.ndarray:
        """A (0, cols) array in the arena dtype (shared: it has nothing to write)."""
        key = (self.dtype, cols)
        empty = _EMPTIES.get(key)
        if empty is None:
            empty = _EMPTIES[key] = np.zeros((0, cols), dtype=self.dtype)
        return empty

    # -- fitting ---------------------------------------------------------------------------------
    def fit(self, train, epochs: int = 100, val=None, *, val_dataloader=None, tol: float = 1e-4,
            n_iter_no_change: int | None = 10, monitor: str | None = None,
            restore_best: bool = True, verbose=True, callbacks=None, scheduler=None,
            grad_clip_norm: float | None = None, accumulation_steps: int = 1,
            log_batches: bool = False) -> pd.DataFrame:
        """Train for up to ``epochs`` epochs; validate every epoch when ``val`` is given.

        Early stopping follows scikit-learn's rule: an epoch counts as *no improvement* unless
        the monitored value beats the best so far by more than ``tol``; training stops once that
        has happened more than ``n_iter_no_change`` times in a row (``None`` or 0 disables it).
        With validation data, the weights of the best epoch are restored at the end
        (``restore_best``) and when training diverges.

        Args:
            train: a :class:`DataLoader` or ``(X, y)``.
            epochs: maximum number of epochs (>= 1).
            val (alias val_dataloader): validation data, a DataLoader or ``(X, y)``.
            tol: minimum improvement.
            n_iter_no_change: patience in epochs.
            monitor: ``"val_loss"`` (default with validation data), ``"val_accuracy"``, or
                ``"train_loss"`` (default without).
            restore_best: restore the best validated weights at the end.
            verbose: False/0 silent; True/1 a progress bar over the epochs when stderr is a
                terminal, and one summary line; 2 one line per epoch.
            callbacks: :class:`~nnjit.train.callbacks.Callback` objects, or callables
                ``f(history_dataframe)`` run after every epoch; returning False stops training.
            scheduler: a learning-rate scheduler from :mod:`nnjit.schedulers`, applied inside
                the compiled loop (per step; ``ReduceLROnPlateau`` watches ``monitor``).
            grad_clip_norm: clip the gradient's global L2 norm to this value (PyTorch's
                ``clip_grad_norm_``), after regularisation, before the optimizer step.
            accumulation_steps: take one optimizer step per this many minibatches, with their
                mean gradient (the last group of an epoch may be shorter).
            log_batches: also record every training batch (epoch, batch, lr, loss, accuracy)
                in ``trainer.batch_history_``, a DataFrame (during the fit: up to the current
                epoch, for callbacks).

        Returns:
            The history, a DataFrame with one row per epoch run: ``epoch, train_loss,
            train_accuracy, val_loss, val_accuracy, lr, seconds``. ``history.attrs`` holds
            ``stop_reason``, ``best_epoch`` and ``restored_best``. Also kept as
            ``trainer.history_``. Its contents are built on first use (a fit whose history is
            never read does not pay for pandas; see :mod:`nnjit.train.history`).

        Raises:
            ValueError: bad arguments or data (the message names the argument or layer).
            TrainingDivergedError: the loss became NaN/inf (best weights restored first).
        """
        if val is not None and val_dataloader is not None:
            raise ValueError("fit: pass val or val_dataloader, not both")
        val = val if val is not None else val_dataloader
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
            raise ValueError(f"fit: epochs must be an int >= 1, got {epochs!r}")
        tol = float(tol)
        if not math.isfinite(tol) or tol < 0:
            raise ValueError(f"fit: tol must be a finite number >= 0, got {tol!r}")
        patience = 0 if n_iter_no_change is None else n_iter_no_change
        if isinstance(patience, bool) or not isinstance(patience, (int, np.integer)) or patience < 0:
            raise ValueError(f"fit: n_iter_no_change must be an int >= 0 or None, "
                             f"got {n_iter_no_change!r}")
        monitor = monitor or ("val_loss" if val is not None else "train_loss")
        if monitor not in MONITORS:
            raise ValueError(f"fit: unknown monitor {monitor!r}; available: {', '.join(MONITORS)}")
        if monitor.startswith("val_") and val is None:
            raise ValueError(f"fit: monitor={monitor!r} needs validation data (val=...)")
        if monitor == "val_accuracy" and not self.loss.is_classification:
            raise ValueError(f"fit: monitor='val_accuracy' needs a classification loss, "
                             f"not {type(self.loss).__name__}; use 'val_loss'")
        callbacks = list(callbacks or [])
        if verbose == 1 or verbose is True:
            from nnjit.train.builtin_callbacks import ProgressBar

            if ProgressBar.default_enabled():  # a terminal: one bar over the epochs
                callbacks.append(ProgressBar())
        callbacks = CallbackList(callbacks)
        if grad_clip_norm is not None and not (math.isfinite(grad_clip_norm)
                                               and grad_clip_norm > 0):
            raise ValueError(f"fit: grad_clip_norm must be a number > 0 or None, "
                             f"got {grad_clip_norm!r}")
        if (isinstance(accumulation_steps, bool) or not isinstance(accumulation_steps,
                                                                   (int, np.integer))
                or accumulation_steps < 1):
            raise ValueError(f"fit: accumulation_steps must be an int >= 1, "
                             f"got {accumulation_steps!r}")
        if scheduler is not None and not isinstance(scheduler, Scheduler):
            raise TypeError(f"fit: scheduler must be one of nnjit.schedulers' classes, got "
                            f"{type(scheduler).__name__}")

        train = self._as_loader(train, None, "fit: train")
        # Validation given as arrays runs in batches no larger than needed (the arena is laid
        # out for the largest batch, so 256 rows for 12 validation rows would only cost memory).
        val_loader = None if val is None else self._as_loader(
            val, None, "fit: val", batch_size=lambda n: max(train.batch_size, min(n, 256)))
        dtype = self.dtype
        X = train.features(dtype)
        max_batch = max(train.batch_size, val_loader.batch_size if val_loader else 1)
        Y = self._compile(X, lambda k: train.targets(self.loss, k, dtype), max_batch, "fit")
        program = self.program
        if val_loader is not None:
            Xv = val_loader.features(dtype)
            if Xv.shape[1] != X.shape[1]:
                raise ValueError(f"fit: val X has {Xv.shape[1]} features, train X has {X.shape[1]}")
            Yv = val_loader.targets(self.loss, program.output_cols, dtype)
            if Yv.shape[1] != Y.shape[1]:
                raise ValueError(f"fit: val y has {Yv.shape[1]} columns, train y has {Y.shape[1]}"
                                 " (use the same target form for both)")
        else:
            Xv, Yv = self._empty(X.shape[1]), self._empty(Y.shape[1])

        cfg = self._cfg
        cfg[it.C_BATCH] = train.batch_size
        cfg[it.C_EVAL_BATCH] = program.max_batch
        cfg[it.C_SHUFFLE] = train.shuffle
        cfg[it.C_DROP_LAST] = train.drop_last
        cfg[it.C_TOL] = tol
        cfg[it.C_PATIENCE] = patience
        cfg[it.C_MONITOR] = MONITORS[monitor]
        cfg[it.C_RESTORE_BEST] = bool(restore_best)
        cfg[it.C_EPOCHS] = epochs
        per_epoch = bool(callbacks) or verbose == 2
        cfg[it.C_CHUNK] = 1 if per_epoch else 0
        cfg[it.C_OPT_KIND] = self.optimizer.kind
        cfg[it.C_REG_COEF] = self.regularizer.coef if self.regularizer else 0.0
        cfg[it.C_REG_PER_BATCH] = bool(self.regularizer and self.regularizer.per_batch)
        cfg[it.C_CLIP_NORM] = grad_clip_norm or 0.0
        cfg[it.C_ACCUM_STEPS] = accumulation_steps
        lr_table, plateau = self._schedule(scheduler, monitor, epochs,
                                           -(-len(train) // accumulation_steps))
        cfg[it.C_PLATEAU] = plateau.size > 0

        state = self._state
        state[:] = 0.0
        state[it.ST_STEP] = self.optimizer.iterations
        state[it.ST_BEST] = -np.inf if monitor == "val_accuracy" else np.inf
        state[it.ST_BEST_EPOCH] = -1
        state[it.ST_JOB] = -1
        state[it.ST_LR] = self.optimizer.lr
        history = np.zeros((epochs, len(it.HISTORY_COLUMNS)), dtype=np.float64)
        batch_log = (np.zeros((epochs * len(train), len(it.BATCH_COLUMNS))) if log_batches
                     else None)
        self._batch_log, self.batch_history_ = batch_log, None
        # The shuffle order carries over between fits (and checkpoints), so fitting 4 then 2
        # epochs is the same as fitting 6.
        if self._perm is None or len(self._perm) != len(X):
            self._perm = np.arange(len(X), dtype=np.int64)
        perm = self._perm
        opt_hyper = self.optimizer.hyper_vector()

        def on_epoch():
            self.optimizer.iterations = int(state[it.ST_STEP])  # checkpoints see the real count
            self.history_ = frame = self._history_frame(history, state, monitor)
            self._batch_frame(state)
            logs = frame.iloc[-1].to_dict()
            if verbose == 2:
                print(_epoch_line(logs))
            epoch = len(frame)
            keep_going = callbacks.on_epoch_end(self, epoch, logs) is not False
            keep_going = keep_going and not self.stop_training
            if keep_going and epoch < epochs:
                callbacks.on_epoch_begin(self, epoch + 1)
            return keep_going

        self._set_training(True)
        self.stop_training = False
        if callbacks:
            callbacks.on_train_begin(self, {"epochs": epochs})
            callbacks.on_epoch_begin(self, 1)
        status = None
        interrupted = False
        try:
            with single_threaded_blas():
                accum = (np.empty(program.n_params, self.dtype) if accumulation_steps > 1
                         else _empty_1d(self.dtype))
                status = program.run(
                    it.TASK_FIT, (X, Y, Xv, Yv, perm),
                    (cfg, opt_hyper, self.optimizer.state, self._reg_spans, lr_table, plateau,
                     accum),
                    state, self._best, history, self._empty(1),
                    on_pause=on_epoch if per_epoch else None, batch_log=batch_log)
        except KeyboardInterrupt:
            # Ctrl-C: Python sees it when a compiled call returns, i.e. between epochs when the
            # fit is chunked (callbacks, progress bar). Stop cleanly: the epoch that ran is kept,
            # the best weights are restored and the callbacks (a run folder) finish normally.
            if state[it.ST_JOB] >= 0:  # interrupted inside a Python op: the epoch is incomplete
                raise
            interrupted = True
        finally:
            self.optimizer.iterations = int(state[it.ST_STEP])
            self._set_training(False)
            self.history_ = self._history_frame(history, state, monitor)
            self._batch_frame(state)
        if status == st.PAUSED or interrupted:  # stopped early: apply the best-weights rule
            it._restore_best(cfg, state, program.params, self._best)
            self.history_.attrs["restored_best"] = bool(state[it.ST_RESTORED])
            self.history_.attrs["stop_reason"] = ("interrupted (KeyboardInterrupt)" if interrupted
                                                  else "stopped by a callback")
        if callbacks:  # (building the logs costs pandas work a plain fit should not pay)
            callbacks.on_train_end(self, self.history_.iloc[-1].to_dict()
                                   if len(self.history_) else {})
        if verbose:
            print(_summary_line(self.history_, patience, tol))
        return self.history_

    def _schedule(self, scheduler, monitor: str, epochs: int, steps_per_epoch: int):
        """(lr_table, plateau) arrays for the compiled loop; empty arrays mean "not used"."""
        none = _NONE
        if scheduler is None:
            return none, none
        if isinstance(scheduler, ReduceLROnPlateau):
            if (scheduler.mode == "max") != (monitor == "val_accuracy"):
                raise ValueError(f"fit: ReduceLROnPlateau(mode={scheduler.mode!r}) does not fit "
                                 f"monitor={monitor!r}; use mode='max' for accuracy, 'min' for "
                                 "losses")
            return none, np.concatenate([scheduler.plateau_params(),
                                         scheduler.plateau_state(self.optimizer.lr)])
        return scheduler.lr_table(self.optimizer.lr, epochs, steps_per_epoch), none

    def _batch_frame(self, state) -> None:
        """``batch_history_`` from the compiled per-batch log, up to the last finished epoch."""
        if self._batch_log is None:
            return
        import pandas as pd

        log = self._batch_log
        rows = log[(log[:, 0] > 0) & (log[:, 0] <= state[it.ST_EPOCH])]  # finished epochs
        frame = pd.DataFrame(rows, columns=list(it.BATCH_COLUMNS))
        frame[["epoch", "batch"]] = frame[["epoch", "batch"]].astype(np.int64)
        if not self.loss.is_classification:
            frame["train_accuracy"] = np.nan
        self.batch_history_ = frame

    def _history_frame(self, history, state, monitor) -> pd.DataFrame:
        """The history of the epochs run so far, a DataFrame built on first use (see
        :mod:`nnjit.train.history`); ``history`` rows up to the last epoch must not change."""
        best = int(state[it.ST_BEST_EPOCH])
        attrs = {
            "monitor": monitor,
            "best_epoch": best + 1 if best >= 0 else None,
            "restored_best": bool(state[it.ST_RESTORED]),
            "stop_reason": ("early stopping: " + monitor + " did not improve")
            if state[it.ST_STOPPED] else "reached the epoch limit",
        }
        return history_frame(history[: int(state[it.ST_EPOCH])], self.loss.is_classification,
                             attrs)

    # -- inference -------------------------------------------------------------------------------
    def _require_fitted(self, what: str) -> None:
        if self.program is None:
            raise RuntimeError(f"Trainer.{what}() called before fit(): the model is not compiled "
                               "or trained yet; call fit() first")

    def _check_X(self, X, what: str) -> np.ndarray:
        self._require_fitted(what)
        X = check_features(X, f"{what}: X")
        self._check_feature_count(X, what)
        return np.ascontiguousarray(X, dtype=self.dtype)

    def _check_feature_count(self, X, where: str) -> None:
        """Reject X whose width differs from the compiled model's input, naming the first layer."""
        program = self.program
        if X.shape[1] != program.n_features:
            first = next((n for n in program.nodes if program.input_slot in n.inputs), None)
            layer = first.owner if first is not None else type(self.model).__name__
            raise ValueError(f"{where}: layer '{layer}' expects input with {program.n_features} "
                             f"features, got array of shape {X.shape}")

    def _run_simple(self, task, X, Y, out):
        state = np.zeros(it.STATE_WIDTH, dtype=np.float64)
        state[it.ST_JOB] = -1
        cfg = self._cfg.copy()
        cfg[it.C_EVAL_BATCH] = self.program.max_batch
        with single_threaded_blas():
            self.program.run(task, (X, Y, X, Y, np.zeros(0, np.int64)), self._no_training(cfg),
                             state, self._best, np.zeros((1, 7)), out)
        return state

    def _no_training(self, cfg):
        """The training arrays for tasks that take no optimizer step."""
        none = np.zeros(0, dtype=np.float64)
        return (cfg, self.optimizer.hyper_vector(), self.optimizer.state, self._reg_spans, none,
                none, np.zeros(0, dtype=self.dtype))

    def predict_outputs(self, X) -> np.ndarray:
        """Raw network outputs ``(N, out_features)`` (logits for classification losses)."""
        X = self._check_X(X, "predict")
        out = np.empty((len(X), self.program.output_cols), dtype=self.dtype)
        self._run_simple(it.TASK_PREDICT, X, self._empty(self.program.target_cols), out)
        return out

    def predict(self, X) -> np.ndarray:
        """Class indices for classification losses, raw outputs for regression."""
        out = self.predict_outputs(X)
        if self.loss.opcode == CrossEntropyLoss.opcode and out.shape[1] > 1:
            return np.argmax(out, axis=1)
        if self.loss.is_classification:  # binary logits: class 1 where the logit is positive
            labels = (out > 0).astype(np.int64)
            return labels[:, 0] if labels.shape[1] == 1 else labels
        return out

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (softmax for cross-entropy, sigmoid for binary cross-entropy)."""
        if not self.loss.is_classification:
            raise ValueError(f"predict_proba needs a classification loss, not "
                             f"{type(self.loss).__name__}")
        logits = self.predict_outputs(X)
        proba = np.empty_like(logits)
        if self.loss.opcode == CrossEntropyLoss.opcode:
            kl.softmax_rows(logits, proba)
        else:
            kl.sigmoid_all(logits, proba)
        return proba

    def evaluate(self, data, y=None) -> dict:
        """Mean loss (and accuracy for classification) on a DataLoader or ``(X, y)``."""
        self._require_fitted("evaluate")
        loader = self._as_loader(data, y, "evaluate")
        X = self._check_X(loader.X, "evaluate")
        Y = loader.targets(self.loss, self.program.output_cols, self.dtype)
        if Y.shape[1] != self.program.target_cols:
            raise ValueError(f"evaluate: y has {Y.shape[1]} columns, the model was trained with "
                             f"{self.program.target_cols}")
        state = self._run_simple(it.TASK_EVALUATE, X, Y, self._empty(1))
        n = state[it.ST_VAL_N]
        result = {"loss": state[it.ST_VAL_LOSS] / n}
        if self.loss.is_classification:
            result["accuracy"] = state[it.ST_VAL_CORRECT] / n
        return result

    def gradients(self, X, y) -> dict[str, np.ndarray]:
        """Loss gradients of every parameter on ``(X, y)`` as one batch (no update).

        Dropout is active (training mode). Returns copies keyed by dotted parameter name.
        """
        X = check_features(X, "gradients: X")
        loader = DataLoader(X, y, batch_size=len(X), shuffle=False)
        Xa = loader.features(self.dtype)
        Y = self._compile(Xa, lambda k: loader.targets(self.loss, k, self.dtype), len(Xa),
                          "gradients")
        state = np.zeros(it.STATE_WIDTH, dtype=np.float64)
        state[it.ST_JOB] = -1
        with single_threaded_blas():
            self.program.run(it.TASK_GRADIENT, (Xa, Y, Xa, Y, np.arange(len(Xa))),
                             self._no_training(self._cfg), state, self._best, np.zeros((1, 7)),
                             self._empty(1))
        self.last_loss_ = state[it.ST_BATCH_LOSS] / len(Xa)
        return {n: np.array(p.grad, copy=True) for n, p in self.model.named_parameters()}

    # -- checkpoints -----------------------------------------------------------------------------
    def save_checkpoint(self, path, metadata: dict | None = None) -> None:
        """Write weights, optimizer state (moments, step count) and RNG state to a ``.nne`` file,
        with optional extra JSON ``metadata`` (e.g. the epoch)."""
        from nnjit.train.checkpoint import save_module

        rng = self.program.rng if self.program is not None else None
        save_module(self.model, path, optimizer=self.optimizer, rng_state=rng,
                    shuffle_order=self._perm, metadata=metadata)

    def load_checkpoint(self, path) -> None:
        """Restore what :meth:`save_checkpoint` wrote; the model must have the same shape.

        Raises:
            StateMismatchError: listing every missing, unexpected or mis-shaped tensor.
            NNEFormatError: the file is not a valid ``.nne`` file.
        """
        from nnjit.train.checkpoint import OPTIMIZER, RNG, params_group
        from nnjit.train.nne import NNEFormatError, load_nne

        nne = load_nne(path)
        state = nne.groups.get(OPTIMIZER, {}).get("state")
        if state is not None:  # check everything before changing anything
            info = nne.metadata.get("optimizer", {})
            if info.get("class") != type(self.optimizer).__name__:
                raise NNEFormatError(f"{path}: optimizer state of {info.get('class')}, but this "
                                     f"trainer uses {type(self.optimizer).__name__}")
            n_params = self.model.num_parameters()
            if state.shape != (max(self.optimizer.n_buffers, 1), n_params):
                raise NNEFormatError(f"{path}: optimizer state has shape {state.shape}, "
                                     f"expected ({self.optimizer.n_buffers}, {n_params})")
        self.model.load_state_dict(params_group(nne, path), where=str(path))
        if state is not None:
            self.optimizer.state = np.array(state, dtype=self.dtype)
            self.optimizer.iterations = int(nne.metadata["optimizer"].get("iterations", 0))
        rng = nne.groups.get(RNG, {})
        if "shuffle_order" in rng:
            self._perm = np.array(rng["shuffle_order"], dtype=np.int64)
        if "state" in rng:
            self._pending_rng = np.array(rng["state"], dtype=np.int64)
            if self.program is not None:
                self.program.rng[:] = self._pending_rng

    def __repr__(self) -> str:
        return (f"Trainer(model={type(self.model).__name__}, optimizer={self.optimizer!r}, "
                f"loss={self.loss!r}, regularizer={self.regularizer!r})")


JITCompiler = Trainer

# Empty arrays passed where the compiled loop expects an array that is not used (never written:
# they have no elements), shared so a fit does not allocate them.
_NONE = np.zeros(0, dtype=np.float64)
_EMPTIES: dict = {}


def _empty_1d(dtype) -> np.ndarray:
    key = (dtype, None)
    empty = _EMPTIES.get(key)
    if empty is None:
        empty = _EMPTIES[key] = np.zeros(0, dtype=dtype)
    return empty


def _epoch_line(row) -> str:
    parts = [f"epoch {int(row['epoch'])}", f"loss {row['train_loss']:.4f}"]
    if not np.isnan(row["val_loss"]):
        parts.append(f"val_loss {row['val_loss']:.4f}")
    if not np.isnan(row["val_accuracy"]):
        parts.append(f"val_accuracy {row['val_accuracy']:.4f}")
    parts.append(f"{row['seconds'] * 1e3:.2f} ms")
    return " - ".join(parts)


def _summary_line(history: pd.DataFrame, patience: int, tol: float) -> str:
    if history.empty:
        return "fit: no epoch completed"
    last = history.iloc[-1]
    text = (f"fit: {len(history)} epochs in {history['seconds'].sum():.3f} s "
            f"({history.attrs['stop_reason']}); final loss {last['train_loss']:.4f}")
    best = history.attrs.get("best_epoch")
    monitor = history.attrs.get("monitor")
    if best is not None and monitor in history.columns:
        text += f"; best {monitor} {history[monitor].iloc[best - 1]:.4f} at epoch {best}"
        if history.attrs.get("restored_best"):
            text += " (weights restored)"
    return text
