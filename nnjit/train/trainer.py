"""``Trainer`` (alias ``JITCompiler``): traces a model once and fits it in compiled code."""

from __future__ import annotations

import contextlib
import math
import sys
from typing import TYPE_CHECKING

import numpy as np

from nnjit.checks import check_int, check_real
from nnjit.config import DEFAULT_DTYPE, SUPPORTED_DTYPES
from nnjit.data.full_batch import FullBatch
from nnjit.data.graph import Graph
from nnjit.data.loader import DataLoader, check_features, to_arena
from nnjit.data.neighbor_loader import NeighborLoader
from nnjit.graph import interpreter as it
from nnjit.graph import status as st
from nnjit.graph.program import ArenaTooLarge, Program, format_bytes, physical_memory
from nnjit.graph.tape import Tape, Tensor
from nnjit.kernels import loss as kl
from nnjit.losses import CrossEntropyLoss, Loss, get_loss
from nnjit.nn.module import Module, walk_modules
from nnjit.optim import Optimizer, get_optimizer
from nnjit.optim.adam import Adam
from nnjit.random import next_seed
from nnjit.regularizers import Regularizer
from nnjit.schedulers import PLATEAU_PARAMS, ReduceLROnPlateau, Scheduler
from nnjit.train.callbacks import CallbackList
from nnjit.train.history import history_frame
from nnjit.train.threads import dense_forward_mode, single_threaded_blas

if TYPE_CHECKING:  # pandas costs ~100 ms at import; it is loaded when the first history is built
    import pandas as pd

MONITORS = {
    "val_loss": it.MONITOR_VAL_LOSS,
    "val_accuracy": it.MONITOR_VAL_ACCURACY,
    "train_loss": it.MONITOR_TRAIN_LOSS,
}

# fit() writes the config row as one tuple in this order.
_CONFIG_ORDER = (it.C_BATCH, it.C_EVAL_BATCH, it.C_SHUFFLE, it.C_DROP_LAST, it.C_TOL, it.C_PATIENCE,
                 it.C_MONITOR, it.C_RESTORE_BEST, it.C_EPOCHS, it.C_CHUNK, it.C_OPT_KIND,
                 it.C_REG_COEF, it.C_REG_PER_BATCH, it.C_CLIP_NORM, it.C_ACCUM_STEPS, it.C_PLATEAU,
                 it.C_DENSE_MODE)
if _CONFIG_ORDER != tuple(range(it.CONFIG_WIDTH)):
    raise ImportError("nnjit.train.trainer: fit()'s config row no longer matches the C_* fields")


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

    ``predict``, ``predict_proba``, ``predict_outputs`` and ``evaluate`` need no fit: the first
    call lays the model out on its current weights (fresh, :meth:`Module.load_weights`,
    :meth:`load_checkpoint`).

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
        self.seed = next_seed() if seed is None else check_int(seed, "Trainer: seed",
                                                                 "an int or None")
        self.program: Program | None = None
        self.history_: "pd.DataFrame | None" = None
        self._state = np.zeros(it.STATE_WIDTH, dtype=np.float64)
        self._cfg = np.zeros(it.CONFIG_WIDTH, dtype=np.float64)
        self._cfg[it.C_DENSE_MODE] = dense_forward_mode()
        self._perm: np.ndarray | None = None
        self._pending_rng: np.ndarray | None = None
        self._inference_layout = False  # the program was laid out by predict/evaluate, not fit
        self.stop_training = False  # a callback may set it to stop after the current epoch
        self._graph = None  # GraphStructure of the graph being trained on (graph models)
        self._graph_of = None  # what it was built for: the Graph, or (graph, fan-outs, batch)
        self._resume: dict | None = None  # fit state + callback states for initial_epoch
        self._plateau: np.ndarray | None = None
        self._fit_start = 0
        self.initial_epoch_ = 0

    # -- compilation -----------------------------------------------------------------------------
    def _trace(self, n_features: int, max_batch: int):
        tape = Tape(self.dtype, self._graph.max_rows if self._graph is not None else max_batch)
        self._modules = walk_modules(self.model)  # traversed once per trace
        self._named_params = named = []
        seen = set()
        for path, module in self._modules:
            module.__dict__["_path"] = path
            for name, p in module._parameters.items():  # as Module.named_parameters()
                if id(p) not in seen:
                    seen.add(id(p))
                    named.append((f"{path}.{name}" if path else name, p))
        tape.parameters(named)
        if self._graph is not None:
            from nnjit.graph.edges import graph_inputs

            x, features, edges = graph_inputs(tape, self._graph, n_features)
            if x is None:  # sparse features: the batch input is an empty placeholder
                x = tape.input(0, "input")
            with tape.recording():
                out = self.model(features, edges)
        else:
            x = tape.input(n_features, "input")
            with tape.recording():
                out = self.model(x)
        if not isinstance(out, Tensor) or out.tape is not tape:
            raise TypeError(f"{type(self.model).__name__}.forward must return the output tensor "
                            f"of its last layer, got {type(out).__name__}")
        return tape, x, out

    def _compile(self, X: np.ndarray, y, max_batch: int, where: str, *, inference: bool = False):
        """Trace and lay out the model if needed; return ``y(n_outputs)`` (the targets in the
        arena dtype), or None without ``y``.

        An inference call (``inference=True``: predict, evaluate) lays out a program only when
        there is none (or the graph changed) and otherwise runs on the one there is, whatever
        batch size it holds. A fit or gradients call replaces a layout made for inference by the
        one it would have made on a fresh trainer, so predicting first changes no bit of a fit.
        """
        n_features = X.shape[1]
        program = self.program
        if program is not None:
            self._adopt_parameters()
            if self._graph is None:
                self._check_feature_count(X, where)
            if inference and program.graph is self._graph:
                return None if y is None else y(program.output_cols)
        n_outputs = program.output_cols if program is not None else None
        tape = None
        if n_outputs is None:
            tape, x, out = self._trace(n_features, max_batch)
            n_outputs = out.cols
        Y = None if y is None else y(n_outputs)
        target_cols = Y.shape[1] if Y is not None else (
            program.target_cols if program is not None else (1 if self.loss.is_classification
                                                             and n_outputs > 1 else n_outputs))
        replace_inference_layout = (program is not None and self._inference_layout
                                    and not inference)
        if program is not None and (program.target_cols != target_cols
                                    or program.max_batch < max_batch
                                    or (replace_inference_layout and program.max_batch != max_batch)
                                    or program.graph is not self._graph):
            tape = None
            program = None
        if program is None:
            if tape is None:
                tape, x, out = self._trace(n_features, max_batch if self._inference_layout
                                           else max(max_batch, self._max_batch()))
            target = tape.input(target_cols, "target")
            loss = self.loss.record(tape, out, target)
            try:
                program = Program(tape, x, target, out, loss, seed=self.seed)
            except ArenaTooLarge as e:
                what = ("X's rows (gradients runs them as one batch)" if where == "gradients"
                        else "batch_size")
                raise MemoryError(f"{where}: {what}: batches of {e.max_batch:,} rows need "
                                  f"{format_bytes(e.nbytes)} of arena memory (values and "
                                  f"gradients) for {type(self.model).__name__}, more than can "
                                  f"be allocated here ({format_bytes(physical_memory())} of RAM);"
                                  f" use a smaller {'batch' if where == 'gradients' else what}"
                                  ) from None
            self._install(program)
        self._inference_layout = inference  # a fit's layout stays one (and grows as fits need)
        return Y

    @property
    def _graph_sampled(self) -> bool:
        return self._graph is not None and self._graph.sampled

    def _set_training(self, mode: bool) -> None:
        """``model.train(mode)`` over the modules found when tracing (no second traversal)."""
        for _, module in self._modules:
            module.__dict__["training"] = mode

    def _rows_per_batch(self, train, val_loader, n_rows: int) -> int:
        """The largest batch a fit's arena must hold: the batch size, but never more rows than
        the data has (60 rows with batch_size=10**7 need 60 rows, not 10**7). The validation
        batch is the layout's, so it keeps the batches it had: as many rows as before, or all."""
        batch = max(train.batch_size, val_loader.batch_size if val_loader else 1)
        if self._graph is not None:  # (graph layouts are sized by the graph or its sampler)
            return batch
        rows = min(train.batch_size, n_rows)
        if val_loader is not None:
            rows = max(rows, min(batch, val_loader.n_samples))
        return rows

    def _max_batch(self) -> int:
        return self.program.max_batch if self.program is not None else 1

    def _install(self, program: Program) -> None:
        """Move parameters into the new arena and keep optimizer state and RNG position."""
        old = self.program
        if old is not None:
            program.rng[:] = old.rng
        elif self._pending_rng is not None:
            program.rng[:] = self._pending_rng
        self._bind_parameters(program)
        self.optimizer.build(program.n_params, self.dtype)
        self._best = np.empty(program.n_params, dtype=self.dtype)
        spans = self.regularizer.spans(self.param_spans) if self.regularizer else _NO_SPANS
        if spans.dtype != np.int64 or not spans.flags.c_contiguous:  # (a custom regularizer)
            spans = np.ascontiguousarray(spans, dtype=np.int64)
        self._reg_spans = spans
        self.program = program
        self.model.__dict__["_trainer"] = self  # (as Module.__setattr__ would store it)

    def _bind_parameters(self, program: Program) -> None:
        """Copy the parameters' current values into ``program``'s arena and make each
        ``p.data`` / ``p.grad`` a view of it."""
        self.param_spans = {}
        slots = program.slots.tolist()
        for name, p in self._named_params:
            off, rows, cols, _ = slots[program.param_slots[name]]
            view = program.values[off : off + rows * cols].reshape(p.data.shape)
            view[...] = p.data
            p.data = view
            p.grad = program.grads[off : off + rows * cols].reshape(view.shape)
            self.param_spans[name] = (off, rows * cols)

    def _adopt_parameters(self) -> None:
        """Take the parameters back into this program's arena when another trainer laid them out
        since (a second Trainer of the model, ``model.predict`` or ``layer(X)`` on one of its
        layers): every trainer runs on the parameters' current values, as in PyTorch."""
        values = self.program.values
        for _, p in self._named_params:
            if p.data.base is not values:
                self._bind_parameters(self.program)
                self.model.__dict__["_trainer"] = self
                return

    # -- data ------------------------------------------------------------------------------------
    @staticmethod
    def _graph_arg(data, val, where: str):
        """The Graph that ``data`` is or samples (or None); a graph's validation must be a mask
        of the same graph, batched the same way."""
        graph_loaders = (FullBatch, NeighborLoader)
        if not isinstance(data, (Graph, NeighborLoader)):
            if isinstance(val, (Graph, *graph_loaders)):
                raise ValueError(f"{where}: graph validation data needs graph training data")
            return None
        graph = data.graph if isinstance(data, NeighborLoader) else data
        expected = NeighborLoader if isinstance(data, NeighborLoader) else FullBatch
        if isinstance(val, expected):
            if val.graph is not graph:
                raise ValueError(f"{where}: the validation mask must be on the training graph")
            if expected is NeighborLoader and (val.num_neighbors != data.num_neighbors
                                               or val.batch_size > data.batch_size):
                raise ValueError(f"{where}: validation batches must use the training fan-outs "
                                 f"{data.num_neighbors} and at most {data.batch_size} seeds; use "
                                 "loader.like(mask)")
        elif val is not None:
            raise ValueError(f"{where}: for a graph, pass val={expected.__name__}(graph, mask...) "
                             f"or leave it out (the graph's val_mask), got {type(val).__name__}")
        return graph

    def _use_graph(self, loader) -> None:
        """Trace graph models for ``loader`` (FullBatch, NeighborLoader), or not (other data)."""
        if isinstance(loader, NeighborLoader):
            from nnjit.graph.edges import GraphStructure

            key = (loader.graph, tuple(loader.num_neighbors), loader.batch_size)
            if key != self._graph_of:
                self._graph = GraphStructure.sampled_from(loader.graph, loader.num_neighbors,
                                                          loader.batch_size)
                self._graph_of = key
        elif isinstance(loader, FullBatch):
            from nnjit.graph.edges import GraphStructure

            graph = loader.graph
            if graph is not self._graph_of:
                self._graph = GraphStructure(graph.edge_index, graph.num_nodes,
                                             graph.x if graph.is_sparse else None)
                self._graph_of = graph
        else:
            self._graph = self._graph_of = None

    def _as_loader(self, data, y, where: str, batch_size=None) -> DataLoader:
        if isinstance(data, Graph):  # full batch; y names the mask the loss counts
            return FullBatch(data, y if y is not None else (
                "train" if data.train_mask is not None else None))
        if isinstance(data, DataLoader):
            if y is not None:
                raise ValueError(f"{where}: pass targets inside the DataLoader, not as y")
            return data
        if isinstance(data, tuple) and len(data) == 2 and y is None:
            data, y = data
        if getattr(data, "shape", (1,))[:1] == (0,) or (isinstance(data, list) and not data):
            raise ValueError(f"{where}: X is empty (0 samples)")
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
            log_batches: bool = False, initial_epoch: int = 0,
            schedule_epochs: int | None = None) -> pd.DataFrame:
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
            verbose: False/0 silent (and, without callbacks, the plain single compiled
                call); True/1 progress over the epochs on stderr (a tqdm bar in a terminal or
                a notebook, else a line every few seconds; :class:`ProgressBar`), started after
                the training loop is compiled, and one summary line; 2 one line per epoch.
                Without callbacks, a verbose fit runs its single compiled call in a worker
                thread while the main thread shows the progress. A first run's compile is
                announced on stderr whatever ``verbose`` says (:mod:`nnjit.graph.compile_notice`).
                Ctrl-C during a verbose or callback fit (in the main thread) stops training
                after the current epoch: the history is kept, the best weights restored, the
                callbacks (a run folder) finish, and ``fit`` returns with
                ``stop_reason == "interrupted (KeyboardInterrupt)"``. A second Ctrl-C abandons the
                running epoch before its next minibatch and raises KeyboardInterrupt (best
                weights restored, ``trainer.history_`` keeps the completed epochs). A silent
                fit without callbacks (the plain call) sees Ctrl-C only when it returns.
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
            initial_epoch: Keras' ``initial_epoch``: the epochs already done; training runs
                epochs ``initial_epoch + 1 .. epochs`` (so ``epochs`` is the final epoch, not a
                count), the scheduler continues at step ``initial_epoch * steps_per_epoch`` and
                history rows and callbacks see the absolute epoch numbers. When the trainer
                holds a fit state saved after exactly ``initial_epoch`` epochs (from
                :meth:`load_checkpoint` or the previous fit), early stopping (best value, best
                epoch, bad-epoch count, best weights), ReduceLROnPlateau and the callbacks'
                :meth:`~nnjit.train.callbacks.Callback.state` continue from it, so 5 epochs then
                ``fit(epochs=10, initial_epoch=5)`` equals 10 epochs bit for bit.
            schedule_epochs: the epochs the scheduler's table spans (default ``epochs``); a
                run trained in parts passes its total.

        Returns:
            The history, a DataFrame with one row per epoch run in this call: ``epoch, train_loss,
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
        graph = self._graph_arg(train, val, "fit")
        if graph is not None and val is None and graph.val_mask is not None:
            # validate on the graph's own val mask, as it trains (full batch or sampled)
            val = (train.like("val") if isinstance(train, NeighborLoader)
                   else FullBatch(graph, "val"))
        check_int(epochs, "fit: epochs", "an int >= 1")
        check_int(initial_epoch, "fit: initial_epoch", "an int >= 0")
        check_int(schedule_epochs, "fit: schedule_epochs", "an int >= 1 or None", none_ok=True)
        check_real(tol, "fit: tol", "a number >= 0")
        check_int(n_iter_no_change, "fit: n_iter_no_change", "an int >= 0 or None", none_ok=True)
        check_real(grad_clip_norm, "fit: grad_clip_norm", "a number > 0 or None", none_ok=True)
        check_int(accumulation_steps, "fit: accumulation_steps", "an int >= 1")
        if epochs < 1:
            raise ValueError(f"fit: epochs must be an int >= 1, got {epochs!r}")
        if not 0 <= initial_epoch < epochs:
            raise ValueError(f"fit: initial_epoch must be an int in [0, epochs) = [0, {epochs}) "
                             f"(epochs is the final epoch, as in Keras), got {initial_epoch!r}")
        if schedule_epochs is not None and (isinstance(schedule_epochs, bool) or not isinstance(
                schedule_epochs, (int, np.integer)) or schedule_epochs < 1):
            raise ValueError(f"fit: schedule_epochs must be an int >= 1 or None, "
                             f"got {schedule_epochs!r}")
        epochs, initial_epoch = int(epochs), int(initial_epoch)
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
        if callbacks and (verbose == 1 or verbose is True):
            from nnjit.train.builtin_callbacks import ProgressBar

            callbacks.append(ProgressBar())  # a bar (terminal, notebook) or a line now and then
        callbacks = CallbackList(callbacks) if callbacks else _NO_CALLBACKS
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
        self._use_graph(train)
        # Validation given as arrays runs in batches no larger than needed (the arena is laid
        # out for the largest batch, so 256 rows for 12 validation rows would only cost memory).
        val_loader = None if val is None else self._as_loader(
            val, None, "fit: val", batch_size=lambda n: max(train.batch_size, min(n, 256)))
        dtype = self.dtype
        X = train.features(dtype)
        max_batch = self._rows_per_batch(train, val_loader, len(X))
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

        per_epoch = bool(callbacks) or verbose == 2
        # Without Python between epochs, a verbose fit runs its single compiled call in a worker
        # thread; the main thread draws the progress and turns Ctrl-C into a stop request.
        threaded = bool(verbose) and not per_epoch and _in_main_thread()
        steps_per_epoch = -(-len(train) // accumulation_steps)
        lr_table, plateau = self._schedule(scheduler, monitor, schedule_epochs or epochs,
                                           steps_per_epoch)
        reg = self.regularizer
        cfg = self._cfg
        cfg[:] = (  # the whole row in one assignment, in C_* order (see _CONFIG_ORDER)
            train.batch_size,  # C_BATCH
            # C_EVAL_BATCH; sampled graph batches: the buffers hold the subgraph of at most
            # batch_size seeds
            train.batch_size if self._graph_sampled else program.max_batch,
            train.shuffle,  # C_SHUFFLE
            train.drop_last,  # C_DROP_LAST
            tol,  # C_TOL
            patience,  # C_PATIENCE
            MONITORS[monitor],  # C_MONITOR
            bool(restore_best),  # C_RESTORE_BEST
            epochs,  # C_EPOCHS
            1 if per_epoch else 0,  # C_CHUNK
            self.optimizer.kind,  # C_OPT_KIND
            reg.coef if reg else 0.0,  # C_REG_COEF
            bool(reg and reg.per_batch),  # C_REG_PER_BATCH
            grad_clip_norm or 0.0,  # C_CLIP_NORM
            accumulation_steps,  # C_ACCUM_STEPS
            plateau.size > 0,  # C_PLATEAU
            cfg[it.C_DENSE_MODE],  # C_DENSE_MODE (set once, in __init__)
        )

        saved = None
        if initial_epoch:  # taken before the state is reset
            saved = self._resume if self._resume is not None else (
                {"fit": self.fit_state(), "callbacks": self.callback_states()})
            if self._resume is None:
                self._warn_restored_weights(initial_epoch)
        row = [0.0] * it.STATE_WIDTH  # built as a list: one assignment instead of eight
        row[it.ST_STEP] = self.optimizer.iterations
        row[it.ST_BEST] = -math.inf if monitor == "val_accuracy" else math.inf
        row[it.ST_BEST_EPOCH] = -1
        row[it.ST_JOB] = -1
        row[it.ST_LR] = self.optimizer.lr
        row[it.ST_EPOCH] = initial_epoch
        row[it.ST_FIT_STEP] = initial_epoch * steps_per_epoch
        state = self._state
        state[:] = row
        self._plateau, self._monitor_code = plateau, MONITORS[monitor]
        carried = self._carry_fit_state(initial_epoch, plateau, saved) if initial_epoch else None
        self._fit_start = self.initial_epoch_ = initial_epoch
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

        stop = _StopRequest(state) if per_epoch or threaded else None  # (the plain call: none)

        def on_epoch():
            self.optimizer.iterations = int(state[it.ST_STEP])  # checkpoints see the real count
            self.history_ = frame = self._history_frame(history, state, monitor)
            self._batch_frame(state)
            logs = frame.iloc[-1].to_dict()
            if verbose == 2:
                print(_epoch_line(logs))
            epoch = int(state[it.ST_EPOCH])  # absolute (1-based), as in Keras
            keep_going = callbacks.on_epoch_end(self, epoch, logs) is not False
            keep_going = keep_going and not self.stop_training and not stop.requested
            if keep_going and epoch < epochs:
                callbacks.on_epoch_begin(self, epoch + 1)
            return keep_going

        accum = (np.empty(program.n_params, self.dtype) if accumulation_steps > 1
                 else _empty_1d(self.dtype))
        data = (X, Y, Xv, Yv, perm)

        def training():  # (read at the call: a callback may replace the optimizer state)
            return (cfg, opt_hyper, self.optimizer.state, self._reg_spans, lr_table, plateau,
                    accum)

        if per_epoch or threaded:  # compile (a first run) before any progress clock starts
            program.prepare(it.TASK_FIT, data, training(), state, self._best, history,
                            self._empty(1), batch_log)

        self._set_training(True)
        self.stop_training = False
        self._callbacks = callbacks
        if callbacks:  # (hooks of an empty list still cost a fit's fixed set-up time)
            callbacks.on_train_begin(self, {"epochs": epochs, "initial_epoch": initial_epoch})
            if carried is not None:
                self._load_callback_states(callbacks, carried)
            callbacks.on_epoch_begin(self, initial_epoch + 1)
        # From here the live state is the fit state: checkpoints written during this fit (and a
        # later fit(initial_epoch=...)) carry it and the callbacks' states, not the loaded ones.
        self._resume = None
        status = None
        interrupted = False

        # A chunked fit in the main thread runs long compiled calls in a helper thread, so that
        # a second Ctrl-C reaches the loop mid-epoch (Python ops return to Python every job).
        call = (_EpochCaller(stop, len(X) * program.n_params)
                if per_epoch and _in_main_thread() and not program.python_ops else None)

        def run():
            with single_threaded_blas():
                return program.run(it.TASK_FIT, data, training(), state, self._best, history,
                                   self._empty(1), on_pause=on_epoch if per_epoch else None,
                                   batch_log=batch_log, call=call)

        try:
            if threaded:
                status = self._run_in_worker(run, stop, history, state, epochs, initial_epoch,
                                             verbose)
            elif per_epoch:
                with stop.on_sigint():  # Ctrl-C: stop after the current epoch
                    status = run()
            else:
                status = run()  # the plain single compiled call
        except KeyboardInterrupt:
            # A KeyboardInterrupt raised by a callback (or by Python code when no stop handler
            # could be installed) between epochs: stop cleanly, the epochs that ran are kept, the
            # best weights restored and the callbacks (a run folder) finish normally.
            if state[it.ST_JOB] >= 0:  # interrupted inside a Python op: the epoch is incomplete
                raise
            interrupted = True
        finally:
            self.optimizer.iterations = int(state[it.ST_STEP])
            self._set_training(False)
            requested = stop is not None and stop.requested
            if requested and state[it.ST_STOPPED] in (it.STOP_AFTER_EPOCH, it.STOP_NOW):
                state[it.ST_STOPPED] = 0.0  # a Ctrl-C is not early stopping: a resume goes on
            self.history_ = self._history_frame(history, state, monitor)
            self._batch_frame(state)
        interrupted = interrupted or requested
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

    def _run_in_worker(self, run, stop, history, state, epochs, initial_epoch, verbose):
        """Run the single compiled call ``run`` in a worker thread (it releases the GIL) while
        this (main) thread draws the progress bar from the history rows already written and
        turns Ctrl-C into a stop request that the compiled loop honours after the current epoch.
        """
        from nnjit.train.builtin_callbacks import ProgressBar

        bar = ProgressBar() if verbose == 1 or verbose is True else ProgressBar(verbose=0)
        bar.on_train_begin(self, {"epochs": epochs, "initial_epoch": initial_epoch})
        worker = _Worker(run)
        shown = initial_epoch
        try:
            with stop.on_sigint():
                worker.start()
                while not worker.done.wait(_POLL_SECONDS):
                    shown = _show_rows(bar, self, history, state, shown)
        except BaseException:  # a second Ctrl-C (or an error here): stop before the next job
            _stop_worker(worker, stop)
            if isinstance(worker.outcome.get("error"), KeyboardInterrupt):
                raise worker.outcome["error"] from None  # (its message says what was abandoned)
            raise
        finally:
            _stop_worker(worker, stop)  # never leave the arrays to a running loop
            shown = _show_rows(bar, self, history, state, shown)
            bar.on_train_end(self)
        return worker.result()

    # -- fit state (exact resume) ----------------------------------------------------------------
    def fit_state(self) -> dict | None:
        """What a checkpoint needs to continue this trainer's fit exactly, or None before any
        fit: ``epoch``, ``fit_step``, ``best``, ``best_epoch``, ``bad_epochs``, ``stopped``,
        ``lr``, ``monitor`` (scalars), ``plateau`` (ReduceLROnPlateau's parameters and state;
        empty without it) and ``best_params`` (the best-weights snapshot; empty when not kept).
        """
        if self.program is None or getattr(self, "_plateau", None) is None:
            return None
        state = self._state
        keep_best = (self._cfg[it.C_RESTORE_BEST] != 0.0 and state[it.ST_BEST_EPOCH] >= 0
                     and self._monitor_code != it.MONITOR_TRAIN_LOSS)
        return {
            "epoch": float(state[it.ST_EPOCH]), "fit_step": float(state[it.ST_FIT_STEP]),
            "best": float(state[it.ST_BEST]), "best_epoch": float(state[it.ST_BEST_EPOCH]),
            "bad_epochs": float(state[it.ST_BAD_EPOCHS]),
            "stopped": float(state[it.ST_STOPPED] == 1.0), "lr": float(state[it.ST_LR]),
            "monitor": float(self._monitor_code),
            "plateau": np.array(self._plateau, dtype=np.float64),
            "best_params": (np.array(self._best, copy=True) if keep_best
                            else np.zeros(0, dtype=self.dtype)),
        }

    def _carry_fit_state(self, initial_epoch: int, plateau: np.ndarray, saved):
        """Continue early stopping, the plateau rule and the best snapshot from the saved fit
        state when it was taken after ``initial_epoch`` epochs; returns it (None otherwise)."""
        import warnings

        fit = saved.get("fit")
        if fit is None:  # no fit yet, or a checkpoint written before fit states existed
            return None
        if int(fit["epoch"]) != initial_epoch or int(fit["monitor"]) != self._monitor_code:
            why = (f"was saved after epoch {int(fit['epoch'])}"
                   if int(fit["epoch"]) != initial_epoch else "monitors another metric")
            warnings.warn(f"fit: initial_epoch={initial_epoch} but the trainer's saved fit state "
                          f"{why}: early stopping, ReduceLROnPlateau and callback states start "
                          "afresh", stacklevel=3)
            return None
        state = self._state
        state[it.ST_FIT_STEP] = fit["fit_step"]
        state[it.ST_BEST] = fit["best"]
        state[it.ST_BEST_EPOCH] = fit["best_epoch"]
        state[it.ST_BAD_EPOCHS] = fit["bad_epochs"]
        state[it.ST_STOPPED] = fit["stopped"]
        saved_plateau = fit["plateau"]
        if plateau.size and saved_plateau.size == plateau.size:
            plateau[len(PLATEAU_PARAMS):] = saved_plateau[len(PLATEAU_PARAMS):]
            state[it.ST_LR] = fit["lr"]
        best = fit["best_params"]
        if best.size == self._best.size:
            self._best[:] = best
        return saved

    def _warn_restored_weights(self, initial_epoch: int) -> None:
        """Warn when the previous fit ended by restoring an earlier epoch's weights: continuing
        from them is not the uninterrupted fit that ``initial_epoch`` suggests."""
        state = self._state
        best = int(state[it.ST_BEST_EPOCH]) + 1  # 1-based, as epochs are counted
        if (self.program is not None and state[it.ST_RESTORED] == 1.0
                and int(state[it.ST_EPOCH]) == initial_epoch and best != initial_epoch):
            import warnings

            warnings.warn(f"fit: initial_epoch={initial_epoch} continues from the weights of "
                          f"epoch {best}, which the previous fit restored (restore_best) when "
                          f"it ended, not from epoch {initial_epoch}'s: to continue exactly, "
                          "save a checkpoint during the fit (in a callback's on_epoch_end) and "
                          "load it", stacklevel=3)

    def _load_callback_states(self, callbacks, saved) -> None:
        states = saved.get("callbacks") or {}
        for key, cb in _callback_keys(callbacks):
            if key in states:
                cb.load_state(states[key])

    def callback_states(self) -> dict:
        """``{key: state}`` of the current fit's callbacks that have a state (see
        :meth:`Callback.state`); keys are class names, with ``#2``, ``#3`` for repeats."""
        callbacks = getattr(self, "_callbacks", None)
        if not callbacks:
            return {}
        out = {}
        for key, cb in _callback_keys(callbacks):
            state = cb.state()
            if state is not None:
                out[key] = state
        return out

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
        """The history of this fit's epochs so far, a DataFrame built on first use (see
        :mod:`nnjit.train.history`); ``history`` rows up to the last epoch must not change."""
        start = self._fit_start
        row = state.tolist()  # Python floats: one call instead of four NumPy scalars
        end = max(int(row[it.ST_EPOCH]), start)
        best = int(row[it.ST_BEST_EPOCH])
        attrs = {
            "monitor": monitor,
            "best_epoch": best + 1 if best >= 0 else None,  # absolute, 1-based
            "best_value": row[it.ST_BEST] if best >= 0 else None,
            "restored_best": bool(row[it.ST_RESTORED]),
            "stop_reason": ("early stopping: " + monitor + " did not improve")
            if row[it.ST_STOPPED] else "reached the epoch limit",
        }
        return history_frame(history[start:end], self.loss.is_classification, attrs)

    # -- inference -------------------------------------------------------------------------------
    # predict, predict_proba, predict_outputs and evaluate need no fit: the first call traces the
    # model and lays it out (the forward of the same compiled build fit uses; no new compile) on
    # the parameters' current values: fresh, loaded (load_weights, load_checkpoint) or trained.

    def _graph_features(self, data, what: str):
        """For a Graph (or its FullBatch): trace on it if needed and return the batch input;
        None for other data."""
        if isinstance(data, Graph):
            data = FullBatch(data)
        if not isinstance(data, FullBatch):
            return None
        self._use_graph(data)
        X = data.features(self.dtype)
        self._compile(X, None, data.batch_size, what, inference=True)
        return X

    def _inference_input(self, data, what: str, targets=None) -> np.ndarray:
        """``data`` (an array, a Graph or a FullBatch) as the batch input in the arena dtype, with
        the model laid out for it if it is not yet; ``targets(n_outputs)``, when given, sets the
        target width of a first layout (evaluate)."""
        graph_x = self._graph_features(data, what)
        if graph_x is not None:
            return graph_x
        X = to_arena(check_features(data, f"{what}: X"), self.dtype, f"{what}: X")
        if self.program is None:
            self._use_graph(None)
            _refuse_graph_model(self.model, what)
        else:
            self._check_feature_count(X, what)
        self._compile(X, targets, max(1, min(len(X), _INFERENCE_BATCH)), what, inference=True)
        return X

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

    def _outputs(self, data, what: str) -> np.ndarray:
        """The raw outputs of ``data``; ``what`` (the method called) names it in errors."""
        X = self._inference_input(data, what)
        out = np.empty((len(X), self.program.output_cols), dtype=self.dtype)
        self._run_simple(it.TASK_PREDICT, X, self._empty(self.program.target_cols), out)
        return out

    def predict_outputs(self, X) -> np.ndarray:
        """Raw network outputs ``(N, out_features)`` (logits for classification losses).

        Needs no fit: the first call traces the model and lays it out for the parameters'
        current values (fresh initial weights, :meth:`Module.load_weights`,
        :meth:`load_checkpoint`, or a fit). Dropout is off (evaluation), whatever
        ``model.training`` says; it is not changed.

        Args:
            X: ``(N, in_features)`` array, or a :class:`~nnjit.data.graph.Graph` /
                :class:`~nnjit.data.full_batch.FullBatch` for graph models (every node's row).
        """
        return self._outputs(X, "predict_outputs")

    def predict(self, X) -> np.ndarray:
        """Class indices for classification losses, raw outputs for regression (no fit needed;
        see :meth:`predict_outputs`)."""
        out = self._outputs(X, "predict")
        if self.loss.opcode == CrossEntropyLoss.opcode and out.shape[1] > 1:
            return np.argmax(out, axis=1)
        if self.loss.is_classification:  # binary logits: class 1 where the logit is positive
            labels = (out > 0).astype(np.int64)
            return labels[:, 0] if labels.shape[1] == 1 else labels
        return out

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (softmax for cross-entropy, sigmoid for binary cross-entropy); no
        fit needed (see :meth:`predict_outputs`)."""
        if not self.loss.is_classification:
            raise ValueError(f"predict_proba() needs a classification loss, but this trainer's "
                             f"loss is {type(self.loss).__name__}; use predict() for its outputs")
        logits = self._outputs(X, "predict_proba")
        proba = np.empty_like(logits)
        if self.loss.opcode == CrossEntropyLoss.opcode:
            kl.softmax_rows(logits, proba)
        else:
            kl.sigmoid_all(logits, proba)
        return proba

    def evaluate(self, data, y=None) -> dict:
        """Mean loss (and accuracy for classification) on a DataLoader or ``(X, y)``, or on a
        graph's nodes: ``evaluate(graph, "test")`` (a mask name or bool array; every node when
        omitted). No fit needed (see :meth:`predict_outputs`)."""
        loader = (FullBatch(data, y) if isinstance(data, Graph)
                  else self._as_loader(data, y, "evaluate"))
        if isinstance(loader, FullBatch):
            X = self._inference_input(loader, "evaluate")
        else:
            X = self._inference_input(loader.X, "evaluate",
                                      lambda k: loader.targets(self.loss, k, self.dtype))
        Y = loader.targets(self.loss, self.program.output_cols, self.dtype)
        if Y.shape[1] != self.program.target_cols:
            raise ValueError(f"evaluate: y has {Y.shape[1]} columns, the model was laid out for "
                             f"{self.program.target_cols}")
        state = self._run_simple(it.TASK_EVALUATE, X, Y, self._empty(1))
        n = state[it.ST_VAL_N]
        result = {"loss": state[it.ST_VAL_LOSS] / n}
        if self.loss.is_classification:
            result["accuracy"] = state[it.ST_VAL_CORRECT] / n
        return result

    def gradients(self, X, y=None) -> dict[str, np.ndarray]:
        """Loss gradients of every parameter on ``(X, y)`` as one batch (no update).

        Dropout is active (training mode). Returns copies keyed by dotted parameter name.
        """
        if isinstance(X, Graph):  # y: the mask whose nodes the loss counts (default: all)
            loader = FullBatch(X, y)
            self._use_graph(loader)
        else:
            X = check_features(X, "gradients: X")
            loader = DataLoader(X, y, batch_size=len(X), shuffle=False)
            self._use_graph(None)
        Xa = loader.features(self.dtype)
        Y = self._compile(Xa, lambda k: loader.targets(self.loss, k, self.dtype), len(Xa),
                          "gradients")
        state = np.zeros(it.STATE_WIDTH, dtype=np.float64)
        state[it.ST_JOB] = -1
        with single_threaded_blas():
            self.program.run(it.TASK_GRADIENT, (Xa, Y, Xa, Y, np.arange(len(Xa))),
                             self._no_training(self._cfg), state, self._best, np.zeros((1, 7)),
                             self._empty(1))
        self.last_loss_ = state[it.ST_BATCH_LOSS] / max(state[it.ST_BATCH_COUNT], 1.0)
        return {n: np.array(p.grad, copy=True) for n, p in self.model.named_parameters()}

    # -- checkpoints -----------------------------------------------------------------------------
    def save_checkpoint(self, path, metadata: dict | None = None) -> None:
        """Write weights, optimizer state (moments, step count), RNG and shuffle state, the fit
        state (:meth:`fit_state`: epochs done, scheduler step, early-stopping counters, the
        plateau rule, the best-weights snapshot) and the current fit's callback states to a
        ``.nne`` file, with optional extra JSON ``metadata`` (e.g. the epoch).

        Loading it and calling ``fit(..., epochs=N, initial_epoch=<epochs done>)`` continues
        exactly where the fit was (bit for bit, same RNG and shuffle order)."""
        from nnjit.train.checkpoint import save_module

        rng = self.program.rng if self.program is not None else self._pending_rng
        pending = self._resume  # loaded from a checkpoint and not fitted since: keep it
        save_module(self.model, path, optimizer=self.optimizer, rng_state=rng,
                    shuffle_order=self._perm, metadata=metadata,
                    fit_state=pending["fit"] if pending is not None else self.fit_state(),
                    callback_states=(pending["callbacks"] if pending is not None
                                     else self.callback_states()))

    def load_checkpoint(self, path) -> None:
        """Restore what :meth:`save_checkpoint` wrote; the model must have the same shape.

        The fit state and callback states are kept for the next ``fit(initial_epoch=...)``;
        a file without them (older nnjit) loads too, and that fit then starts early stopping
        and ReduceLROnPlateau afresh (the scheduler table still continues at
        ``initial_epoch * steps_per_epoch``).

        The file is untrusted: every field is checked (type, dtype, shape and range: the RNG
        state is a valid generator state, the shuffle order a permutation, counters whole and
        >= 0, ...) before anything changes, so a failed load leaves the trainer as it was.

        Raises:
            StateMismatchError: listing every missing, unexpected or mis-shaped parameter.
            NNEFormatError: the file is not a valid ``.nne`` file, or a field of the checkpoint
                is missing, of the wrong type, dtype or shape, or out of range, or the optimizer
                state is another optimizer's; the message names the file and the field.
            OSError: the file cannot be read (missing, permission denied).
        """
        from nnjit.train.checkpoint import read_checkpoint
        from nnjit.train.nne import load_nne

        saved = read_checkpoint(load_nne(path), self.model, self.optimizer)  # changes nothing
        self.model.load_state_dict(saved.params, where=str(path))
        if saved.optimizer_state is not None:
            self.optimizer.state = np.array(saved.optimizer_state, dtype=self.dtype)
            self.optimizer.iterations = saved.optimizer_iterations
        if saved.shuffle_order is not None:
            self._perm = np.array(saved.shuffle_order, dtype=np.int64)
        if saved.rng_state is not None:
            self._pending_rng = np.array(saved.rng_state, dtype=np.int64)
            if self.program is not None:
                self.program.rng[:] = self._pending_rng
        self._resume = {"fit": saved.fit, "callbacks": saved.callbacks}

    def __repr__(self) -> str:
        return (f"Trainer(model={type(self.model).__name__}, optimizer={self.optimizer!r}, "
                f"loss={self.loss!r}, regularizer={self.regularizer!r})")


JITCompiler = Trainer

_INFERENCE_BATCH = 256  # the largest batch a layout made for inference holds


def _refuse_graph_model(model: Module, what: str) -> None:
    """A graph model traced on a plain array fails deep in its forward: say what to pass."""
    from nnjit.nn.gnn.base import MessagePassing

    for path, module in walk_modules(model):
        if isinstance(module, MessagePassing):
            layer = f"{type(module).__name__} '{path}'" if path else type(module).__name__
            raise ValueError(f"{what}: {type(model).__name__} is a graph model (layer {layer}); "
                             "pass the Graph (or a FullBatch of it), not an array")

#: ``state[ST_STOPPED]`` value of a stop request (Ctrl-C); early stopping writes 1.0. The
#: compiled loop checks this field before every epoch, so the request is honoured once the
#: current epoch (with its validation and best-weights bookkeeping) is complete. A second
#: Ctrl-C writes ``it.STOP_NOW``, which the loop checks before every job.
_STOP_REQUESTED = it.STOP_AFTER_EPOCH
_POLL_SECONDS = 0.05  # how often the main thread looks at a threaded fit's progress


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


class _StopRequest:
    """Ctrl-C during a fit: ask the compiled loop to stop after the current epoch."""

    def __init__(self, state: np.ndarray):
        self.state = state
        self.requested = False

    def request(self, now: bool = False) -> None:
        """Stop after the current epoch, or (``now``) before the running epoch's next job."""
        self.requested = True
        if now and self.state[it.ST_STOPPED] != 1.0:
            self.state[it.ST_STOPPED] = it.STOP_NOW
        elif self.state[it.ST_STOPPED] == 0.0:
            self.state[it.ST_STOPPED] = _STOP_REQUESTED

    def call_in_thread(self, execute, args):
        """``execute(*args)`` in a helper thread while this (main) thread waits, so Ctrl-C
        handlers run during a compiled epoch; leaving early asks the loop to stop now."""
        worker = _Worker(lambda: execute(*args))
        worker.start()
        try:
            worker.done.wait()
        except KeyboardInterrupt:  # the second Ctrl-C (the handler asked for a stop now)
            _stop_worker(worker, self)
            if worker.outcome.get("result", (None,))[0] == st.INTERRUPTED:
                return worker.outcome["result"]  # Program.run raises it, saying what was abandoned
            raise
        finally:
            _stop_worker(worker, self)
        return worker.result()

    @contextlib.contextmanager
    def on_sigint(self):
        """While inside, SIGINT requests a stop; a second one raises KeyboardInterrupt in the
        Python code that runs (fit treats it as a stop between epochs). Only in the main
        thread, and only when SIGINT has Python's default handler."""
        import signal

        if not _in_main_thread() or signal.getsignal(signal.SIGINT) is not \
                signal.default_int_handler:
            yield
            return

        def handler(signum, frame):
            if self.requested:
                self.request(now=True)  # the compiled loop stops before its next job
                signal.default_int_handler(signum, frame)
            print("\nfit: interrupted (Ctrl-C): stopping after the current epoch; the history is "
                  "kept and the best weights restored", file=sys.stderr, flush=True)
            self.request()

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


class _EpochCaller:
    """Runs a chunked fit's compiled calls: directly while they are short, in a helper thread
    (:meth:`_StopRequest.call_in_thread`, where a second Ctrl-C is seen mid-epoch) once one
    took longer than ``THREAD_AFTER_SECONDS`` or when the epoch looks long from the start
    (rows x parameters). A thread per call costs ~0.1-2 ms (more on a loaded machine)."""

    THREAD_AFTER_SECONDS = 0.05
    LONG_EPOCH_WORK = 5e7  # rows x parameters of an epoch that takes tens of milliseconds

    def __init__(self, stop: _StopRequest, work: float):
        self.stop = stop
        self.threaded = work >= self.LONG_EPOCH_WORK

    def __call__(self, execute, args):
        if self.threaded:
            return self.stop.call_in_thread(execute, args)
        import time

        start = time.perf_counter()
        result = execute(*args)
        self.threaded = time.perf_counter() - start > self.THREAD_AFTER_SECONDS
        return result


class _Worker:
    """``fn()`` in a daemon thread; ``done`` is set when it has returned or raised.

    Completion is an Event, not ``Thread.is_alive()``: on Python 3.11 a ``join`` interrupted by
    KeyboardInterrupt can mark a running thread as stopped, and a process that then exits while
    the compiled loop still writes its arrays crashes (SIGSEGV).
    """

    def __init__(self, fn):
        import threading

        self.outcome: dict = {}
        self.done = threading.Event()

        def work():
            try:
                self.outcome["result"] = fn()
            except BaseException as e:  # re-raised by result()
                self.outcome["error"] = e
            finally:
                self.done.set()

        self.thread = threading.Thread(target=work, name="nnjit-fit", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def result(self):
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["result"]


def _stop_worker(worker: _Worker, stop: _StopRequest) -> None:
    """Wait for a compiled call running in ``worker``, asking it to stop before its next job."""
    while not worker.done.is_set():
        stop.request(now=True)
        worker.done.wait(_POLL_SECONDS)


def _show_rows(bar, trainer, history, state, shown: int) -> int:
    """Feed the history rows the compiled loop finished since ``shown`` to the progress bar."""
    done = int(state[it.ST_EPOCH])  # rows below it are complete (the row is written first)
    if bar.active and done > shown:  # one bar update per poll, with the latest row
        logs = dict(zip(it.HISTORY_COLUMNS, history[done - 1].tolist()))
        if not trainer.loss.is_classification:
            logs["train_accuracy"] = logs["val_accuracy"] = float("nan")
        bar.advance(done - shown, logs)
    return max(done, shown)


def _callback_keys(callbacks):
    """``(key, callback)`` pairs: the class name, ``Name#2`` for its second instance, ..."""
    seen: dict[str, int] = {}
    for cb in callbacks.callbacks:
        name = type(cb).__name__
        seen[name] = seen.get(name, 0) + 1
        yield (name if seen[name] == 1 else f"{name}#{seen[name]}"), cb


# Empty arrays passed where the compiled loop expects an array that is not used (never written:
# they have no elements), shared so a fit does not allocate them.
_NONE = np.zeros(0, dtype=np.float64)
_NO_CALLBACKS = CallbackList()  # a fit without callbacks (never changed)
_NO_SPANS = np.zeros((0, 2), dtype=np.int64)  # no regularizer: no penalised spans
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
    text = (f"fit: {len(history)} epochs of compiled training in {history['seconds'].sum():.3f} s "
            f"({history.attrs['stop_reason']}); final loss {last['train_loss']:.4f}")
    best = history.attrs.get("best_epoch")
    monitor = history.attrs.get("monitor")
    if best is not None and monitor in history.columns:
        value = history.attrs.get("best_value")  # the best epoch may precede initial_epoch
        text += f"; best {monitor} {value:.4f} at epoch {best}"
        if history.attrs.get("restored_best"):
            text += " (weights restored)"
    return text
