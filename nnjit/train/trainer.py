"""``Trainer`` (alias ``JITCompiler``): traces a model once and fits it in compiled code.

A fit, in the order :meth:`Trainer.fit` tells it: the set-up (:mod:`nnjit.train.fit_setup`:
the arguments become a checked plan, the data are adapted once, the model is laid out, the plan
becomes the run's options), or the last fit's set-up again when a plain fit repeats it
(:mod:`nnjit.train.repeat_fit`), or, for a fresh trainer's first plain fit, the set-up an earlier
trainer derived for a model of the same structure on data of the same form
(:mod:`nnjit.train.fresh_fit`); the run state starts afresh or continues a saved fit
(:mod:`nnjit.train.resume`); and the compiled loop runs, with Ctrl-C turned into a stop request
(:mod:`nnjit.train.interrupt`) and the history reported (:mod:`nnjit.train.fit_report`).
Predict, evaluate and gradients are :mod:`nnjit.train.inference`; checkpoints
:mod:`nnjit.train.checkpoint_methods`.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from nnjit.checks import Int
from nnjit.data.adapt import GraphInput, empty_rows
from nnjit.data.full_batch import FullBatch
from nnjit.data.graph import Graph
from nnjit.data.inputs import InputSpec, Inputs, spec_mismatch
from nnjit.dtypes import DEFAULT_DTYPE, SUPPORTED_DTYPES
from nnjit.engine import fields
from nnjit.engine import status as st
from nnjit.engine.loop_arrays import StepArrays
from nnjit.engine.run_options import RunOptions
from nnjit.train.layout_service import Layout, rebind
from nnjit.engine.program import Program
from nnjit.losses import CrossEntropyLoss, Loss, MSELoss, get_loss
from nnjit.nn.module import Module
from nnjit.nn.providers import provide
from nnjit.nn.trace import trace
from nnjit.optim import Adam, Optimizer, get_optimizer
from nnjit.random import next_seed
from nnjit.regularizers import Regularizer
from nnjit.tape.tape import Tape, Tensor
from nnjit.train import fresh_fit, resume
from nnjit.train.checkpoint_methods import CheckpointMethods
from nnjit.train.fit_plan import MONITORS, FitPlan
from nnjit.train.fit_setup import FitSetup, set_up_fit
from nnjit.train.fit_report import (HISTORY_CHUNK, batch_history, epoch_line, fit_history,
                                    grown_history, history_rows, run_with_progress, summary_line)
from nnjit.train.exclusive import exclusive
from nnjit.train.inference import InferenceMethods
from nnjit.train.repeat_fit import RepeatFit, fit_key
from nnjit.train.interrupt import EpochCaller, StopRequest, in_main_thread
from nnjit.train.run_state import RunState, restore_best
from nnjit.train.threads import dense_forward_mode, single_threaded_blas

if TYPE_CHECKING:  # pandas costs ~100 ms at import; it is loaded when the first history is built
    import pandas as pd

__all__ = ["JITCompiler", "MONITORS", "Trainer"]

_SEED = Int(none_ok=True, says="an int or None")  # (None: drawn from set_seed's generator)


class Trainer(InferenceMethods, CheckpointMethods):
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
        distributed: :class:`nnjit.MPI` to fit data-parallel over MPI ranks (every rank runs
            the same script; each global batch is split over the ranks and the gradients are
            averaged inside the compiled loop), or None (this process alone).

    ``predict``, ``predict_proba``, ``predict_outputs`` and ``evaluate`` need no fit: the first
    call lays the model out on its current weights (fresh, :meth:`Module.load_weights`,
    :meth:`load_checkpoint`).

    Example:
        >>> trainer = Trainer(model, Adam(lr=0.01), CrossEntropyLoss())
        >>> history = trainer.fit(DataLoader(X, y, batch_size=16), epochs=100, val=(Xv, yv))
        >>> history = trainer.fit(X, y, epochs=100, batch_size=16)  # as Keras' fit(x, y)
        >>> trainer.predict(X_test)
    """

    def __init__(self, model: Module, optimizer=None, loss=None, regularizer=None, *,
                 dtype=None, seed: int | None = None, distributed=None):
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
        self.seed = next_seed() if seed is None else _SEED.check("Trainer: seed", seed)
        # -- data-parallel fits (nnjit.distributed) --
        from nnjit.distributed.mpi import MPI

        if distributed is not None and not isinstance(distributed, MPI):
            raise TypeError(f"Trainer: distributed must be nnjit.MPI() or None, got "
                            f"{type(distributed).__name__}")
        self.distributed = distributed
        self.program: Program | None = None
        self._walk = None  # the model's ModelWalk when it was last laid out
        self._layout_made = None  # (its structure key, input specs, rows: for fresh_fit)
        self.history_: "pd.DataFrame | None" = None
        self._state = np.zeros(fields.STATE_WIDTH, dtype=np.float64)  # the compiled loop's row
        self._run_state = RunState(self._state)
        self._dense_mode = dense_forward_mode()  # the BLAS kernels numba calls (every run's)
        self._options: RunOptions | None = None  # the last fit's
        self._last_fit: RepeatFit | None = None  # the last plain fit's set-up, for a repeat
        self._perm: np.ndarray | None = None
        self._pending_rng: np.ndarray | None = None
        self._inference_layout = False  # the program was laid out by predict/evaluate, not fit
        self.stop_training = False  # a callback may set it to stop after the current epoch
        self._graph_input = GraphInput()  # the graph structure being trained on (graph models)
        self._resume: dict | None = None  # fit state + callback states for initial_epoch
        self._plateau: np.ndarray | None = None
        self._fit_start = 0
        self.initial_epoch_ = 0

    # -- compilation -----------------------------------------------------------------------------
    def trace(self, n_features, graph=None) -> tuple[Tape, Tensor | tuple[Tensor, ...], Tensor]:
        """Record the model's ``forward`` on symbolic tensors, laying nothing out and compiling
        nothing: ``(tape, input, output)``, ``input`` a tuple of tensors for several inputs
        (:func:`nnjit.nn.trace.trace`, which :meth:`Module.summary` runs).

        Args:
            n_features: the input width (for a graph, its node features' width), or a sequence of
                :class:`~nnjit.data.inputs.InputSpec`, one per input of ``forward``.
            graph: for graph models, the :class:`~nnjit.data.graph.Graph` (or
                :class:`~nnjit.data.full_batch.FullBatch`) to trace on; None for array data.
        """
        self._use_graph(FullBatch(graph) if isinstance(graph, Graph) else graph)
        traced = trace(self.model, n_features, dtype=self.dtype, graph=self._graph, where="trace")
        return traced.tape, traced.input, traced.output

    def _compile(self, specs: tuple[InputSpec, ...], y, max_batch: int, where: str, *,
                 inference: bool = False, inputs: Inputs | None = None):
        """Lay the model out for inputs of ``specs`` if needed (:class:`Layout`: a cached layout
        or a trace); return ``y(n_outputs)`` (the targets in the arena dtype), or None without
        ``y``. ``inputs``: the arrays, named in the error when they do not fit a model already
        laid out.

        An inference call (predict, evaluate) lays out a program only when there is none, the
        graph changed or it holds fewer than ``max_batch`` rows (the chunk: INFERENCE_BATCH). A
        fit replaces a layout made for inference by the one a fresh trainer would make.
        """
        program, graph = self.program, self._graph
        if program is not None:
            self._rebind()
            if graph is None:
                self._check_inputs(specs, inputs, where)
            if inference and program.graph is graph and (graph is not None
                                                         or program.max_batch >= max_batch):
                return None if y is None else y(program.output_cols)
        # A fit's layout grows to the largest batch its fits need; an inference one does not.
        rows = (max_batch if program is None or self._inference_layout
                else max(max_batch, program.max_batch))
        new_layout = partial(Layout, self.model, self.loss, specs, rows, self.dtype, graph=graph,
                             where=where)
        layout = new_layout() if program is None else None
        n_outputs = program.output_cols if program is not None else layout.output_cols()
        Y = None if y is None else y(n_outputs)
        target_cols = Y.shape[1] if Y is not None else (
            program.target_cols if program is not None else (1 if self.loss.is_classification
                                                             and n_outputs > 1 else n_outputs))
        if program is not None and (program.target_cols != target_cols
                                    or program.max_batch < max_batch
                                    or (self._inference_layout and not inference
                                        and program.max_batch != max_batch)
                                    or program.graph is not graph):
            layout = new_layout()
        if layout is not None:
            self._install(layout.program(target_cols, self.seed), layout)
        self._inference_layout = inference  # a fit's layout stays one (and grows as fits need)
        return Y

    def _rebind(self) -> None:
        """Bind the parameters to the program again if they left it (another trainer, or
        ``model.predict``, bound them since)."""
        spans = rebind(self.program, self._walk)
        if spans is not None:
            self.param_spans = spans
            self.model.__dict__["_trainer"] = self

    def _check_inputs(self, specs: tuple[InputSpec, ...], inputs: Inputs | None,
                      where: str) -> None:
        """Reject inputs whose number, row shapes or kinds (integer, float) differ from those the
        model was traced with; a single table of the wrong width names the first layer."""
        program = self.program
        traced = program.input_specs
        problem = spec_mismatch(specs, traced, where)
        if problem is None:
            return
        if len(specs) == len(traced) == 1 and len(specs[0].dims) == len(traced[0].dims) == 1 \
                and specs[0].integer == traced[0].integer:
            first = next((n for n in program.nodes if program.input_slot in n.inputs), None)
            layer = first.owner if first is not None else type(self.model).__name__
            shape = inputs.arrays[0].shape if inputs is not None else (None, specs[0].cols)
            problem = (f"{where}: layer '{layer}' expects input with {traced[0].cols} "
                       f"features, got array of shape {shape}")
        raise ValueError(problem)

    @property
    def _graph(self):
        """The GraphStructure the model is traced on (None for array data)."""
        return self._graph_input.structure

    def _install(self, program: Program, layout: Layout, reg_spans=None) -> None:
        """Run on ``program`` (bound by ``layout``); the optimizer state and RNG position stay.
        ``reg_spans``: the regularizer's spans when the caller knows them (a fresh fit's record
        of the same layout and regularizer rule), else they are derived."""
        old = self.program
        if old is not None:
            program.rng[:] = old.rng
        elif self._pending_rng is not None:
            program.rng[:] = self._pending_rng
        self._walk, self.param_spans = layout.walk, layout.param_spans
        self._layout_made = (layout.key, layout.specs, layout.rows)  # (what fresh_fit records)
        self.optimizer.build(program.n_trainable, self.dtype)  # (the interpreter's step span)
        self._best = np.empty(program.n_params, dtype=self.dtype)
        if reg_spans is None:
            reg_spans = (self.regularizer.spans(self.param_spans) if self.regularizer
                         else _NO_SPANS)
            if reg_spans.dtype != np.int64 or not reg_spans.flags.c_contiguous:  # (a custom one)
                reg_spans = np.ascontiguousarray(reg_spans, dtype=np.int64)
        self._reg_spans = reg_spans
        self.program = program
        self.model.__dict__["_trainer"] = self  # (as Module.__setattr__ would store it)

    # -- data ------------------------------------------------------------------------------------
    def _use_graph(self, loader) -> None:
        """Trace graph models for ``loader`` (FullBatch, NeighborLoader), or not (other data)."""
        self._graph_input.use(loader)

    def _empty(self, cols: int) -> np.ndarray:
        """A (0, cols) array in the arena dtype (shared: it has nothing to write)."""
        return empty_rows(self.dtype, cols)

    # -- fitting ---------------------------------------------------------------------------------
    def fit(self, train, y=None, epochs: int = 100, val=None, *, batch_size: int | None = None,
            shuffle: bool | None = None, val_dataloader=None, tol: float = 1e-4,
            n_iter_no_change: int | None = 10, monitor: str | None = None,
            restore_best: bool = True, verbose=True, callbacks=None, scheduler=None,
            grad_clip_norm: float | None = None, accumulation_steps: int = 1,
            log_batches: bool = False, initial_epoch: int = 0,
            schedule_epochs=None, validation_data=None, validation_split=None) -> pd.DataFrame:
        """Train for up to ``epochs`` epochs; validate every epoch when ``val`` is given.

        Early stopping follows scikit-learn's rule: an epoch counts as *no improvement* unless
        the monitored value beats the best so far by more than ``tol``; training stops once that
        has happened more than ``n_iter_no_change`` times in a row (``None`` or 0 disables it).
        With validation data, the weights of the best epoch are restored at the end
        (``restore_best``) and when training diverges.

        Args:
            train: the inputs ``X`` (an array, or a tuple of arrays for a model with several
                inputs) with their targets ``y``, as Keras' ``fit(x, y)``; or a
                :class:`DataLoader`, ``(X, y)``, a Graph or a NeighborLoader, without ``y``.
            y: the targets of ``X`` (an array-like). For compatibility, a number here is
                ``epochs``: ``fit(loader, 50, val)`` is ``fit(loader, epochs=50, val=val)``.
            epochs: maximum number of epochs (>= 1).
            val (alias val_dataloader, and Keras' validation_data): validation data, a
                DataLoader or ``(X, y)``.
            validation_split: Keras' option for ``fit(X, y)``: this fraction of the rows, the
                last ones (before any shuffling, as Keras), validates instead of training.
            batch_size: rows per training batch of ``fit(X, y)`` (default 32, Keras'); a
                DataLoader has its own.
            shuffle: shuffle ``fit(X, y)``'s rows every epoch (default True, Keras').
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
                announced on stderr whatever ``verbose`` says (:mod:`nnjit.engine.compile_notice`).
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
        with exclusive(self, "fit", fit=True):  # (one run on a model at a time)
            # A plain fit that repeats the last one reuses its set-up (nnjit.train.repeat_fit).
            plain = (not (verbose or callbacks or log_batches) and scheduler is None
                     and type(initial_epoch) is int and initial_epoch == 0
                     and schedule_epochs is None and validation_data is None
                     and validation_split is None and val_dataloader is None)
            arguments = (epochs, batch_size, shuffle, tol, n_iter_no_change, monitor,
                         restore_best, grad_clip_norm, accumulation_steps)
            key = (fit_key(self, train, y, val, arguments) if plain and self._last_fit
                   else None)
            setup = self._last_fit.reuse(self, key, train, y, val) if key is not None else None
            if setup is not None:
                self._rebind()
            else:
                self._last_fit = None
                # A fresh trainer takes an earlier one's set-up for this form (fresh_fit).
                fresh = fresh_fit.fresh_key(self, train, y, val, arguments) if plain else None
                setup = (fresh_fit.take(self, fresh, train, y, val) if fresh is not None
                         else None)
                if setup is None:
                    setup = set_up_fit(self, train, y, epochs, val, batch_size, shuffle,
                                       val_dataloader, validation_data, validation_split, dict(
                        initial_epoch=initial_epoch, schedule_epochs=schedule_epochs, tol=tol,
                        n_iter_no_change=n_iter_no_change, monitor=monitor,
                        restore_best=restore_best, verbose=verbose, callbacks=callbacks,
                        scheduler=scheduler, grad_clip_norm=grad_clip_norm,
                        accumulation_steps=accumulation_steps, log_batches=log_batches))
                    if not isinstance(setup, FitSetup):  # (LBFGS fitted: its history)
                        return setup
                    if fresh is not None:
                        fresh_fit.record(self, fresh, setup)
                    key = fit_key(self, train, y, val, arguments) if plain else None
                else:  # (a record taken: the next fit's key from this one's parts)
                    key = fresh_fit.repeat_key(self, fresh, train, val)
                if key is not None:  # (the state the next fit finds if nothing changes)
                    self._last_fit = RepeatFit(key, setup)
            plan, options, program = setup.plan, setup.options, self.program
            self._options = options
            distributed = self.distributed is not None and self.distributed.size > 1

            # The run state starts (or continues).
            carried = self._start_run_state(plan, setup.steps_per_epoch, setup.plateau)
            # a fit paused every epoch grows its history as epochs run (epochs=10**12 with a
            # callback that stops it is fine); one compiled call needs every row up front
            rows = history_rows(plan, plan.initial_epoch + HISTORY_CHUNK if plan.per_epoch
                                 else plan.epochs, setup.n_batches)
            history = np.zeros((rows, len(fields.HISTORY_COLUMNS)), dtype=np.float64)
            self._batch_log = (np.zeros((rows * setup.n_batches, len(fields.BATCH_COLUMNS)))
                               if plan.log_batches else None)
            self.batch_history_ = None
            arrays = (setup.X, setup.Y, setup.Xv, setup.Yv, self._shuffle_order(len(setup.X)))
            step = self._step_arrays(plan, setup.lr_table, setup.plateau)
            stop = None  # (the plain single call: Ctrl-C is seen when it returns)
            try:
                if plan.per_epoch or plan.threaded:  # (Python runs alongside: compile first)
                    stop = StopRequest(self._run_state)
                    program.prepare(options, arrays, step(), self._state, self._best, history,
                                    self._empty(1), self._batch_log)
                self._begin_callbacks(plan, carried)
                status, interrupted = self._run(plan, options, arrays, step, history, stop)
            finally:
                if distributed:
                    self.distributed.record_fit(self._state)
            return self._end_fit(plan, status, interrupted)

    def _start_run_state(self, plan: FitPlan, steps_per_epoch: int, plateau: np.ndarray):
        """Reset the run state for ``plan``; a fit from ``initial_epoch`` continues early
        stopping, the plateau rule and the best snapshot from the fit state saved after that
        many epochs (a checkpoint's, or the previous fit's). Returns the saved states the
        callbacks continue from, or None."""
        initial_epoch, state = plan.initial_epoch, self._run_state
        saved = self._resume if initial_epoch else None  # (taken before the state is reset)
        if initial_epoch and saved is None:
            saved = {"fit": self.fit_state(), "callbacks": self.callback_states()}
            resume.warn_restored_weights(state, initial_epoch)
        state.start_fit(step=self.optimizer.iterations, lr=self.optimizer.lr,
                        maximize=plan.maximize, initial_epoch=initial_epoch,
                        fit_step=initial_epoch * steps_per_epoch)
        self._plateau, self._monitor_code = plateau, plan.monitor_code
        carried = (resume.carry_fit_state(saved, state, plateau, self._best, initial_epoch,
                                          plan.monitor_code) if initial_epoch else None)
        self._fit_start = self.initial_epoch_ = initial_epoch
        return carried

    def _shuffle_order(self, n_rows: int) -> np.ndarray:
        """The permutation the compiled loop shuffles in place. It carries over between fits (and
        checkpoints), so fitting 4 then 2 epochs is the same as fitting 6."""
        if self._perm is None or len(self._perm) != n_rows:
            self._perm = np.arange(n_rows, dtype=np.int64)
        return self._perm

    def _step_arrays(self, plan: FitPlan, lr_table: np.ndarray, plateau: np.ndarray):
        """``step()``: the fit's StepArrays, gathered at each call (a callback may replace them)."""
        opt_hyper = self.optimizer.hyper_vector()
        accum = (np.empty(self.program.n_trainable, self.dtype) if plan.accumulation_steps > 1
                 else empty_rows(self.dtype, None))

        def step():
            return StepArrays(opt_hyper, self.optimizer.state, self._reg_spans, lr_table, plateau,
                              accum)

        return step

    def _begin_callbacks(self, plan: FitPlan, carried) -> None:
        # model.training reads True while fitting (PyTorch's model.train() before the loop);
        # the modes the user set come back when the fit ends.
        self._modes_before_fit = modes = []
        for _, module in self._walk.modules:  # (one pass: the modes kept, then set)
            state = module.__dict__
            modes.append(state["training"])
            state["training"] = True
        self.stop_training = False
        self._callbacks = callbacks = plan.callbacks
        if callbacks:  # (hooks of an empty list still cost a fit's fixed set-up time)
            callbacks.on_train_begin(self, {"epochs": plan.epochs,
                                            "initial_epoch": plan.initial_epoch})
            if carried is not None:
                resume.load_callback_states(callbacks, carried)
            callbacks.on_epoch_begin(self, plan.initial_epoch + 1)
        # From here the live state is the fit state: checkpoints written during this fit (and a
        # later fit(initial_epoch=...)) carry it and the callbacks' states, not the loaded ones.
        self._resume = None

    def _run(self, plan: FitPlan, options: RunOptions, arrays, step, history: np.ndarray, stop):
        """Run the compiled fit: one call, one call per epoch (Python between epochs), or one
        call in a worker thread (progress). Returns ``(status, interrupted)``: a Ctrl-C stop
        request, or a KeyboardInterrupt between epochs, stops it cleanly."""
        state, callbacks, program = self._run_state, plan.callbacks, self.program
        classification = self.loss.is_classification
        rows = [history]  # the current history array (a per-epoch fit grows it)

        def on_epoch():
            self.optimizer.iterations = int(state.step)  # checkpoints see the real count
            self.history_ = frame = fit_history(rows[0], state, self._fit_start,
                                                plan.monitor, classification)
            self._batch_frame()
            logs = frame.iloc[-1].to_dict()
            if plan.verbose == 2:
                print(epoch_line(logs))
            epoch = int(state.epoch)  # absolute (1-based), as in Keras
            keep_going = callbacks.on_epoch_end(self, epoch, logs) is not False
            keep_going = keep_going and not self.stop_training and not stop.requested
            if keep_going and epoch < plan.epochs:
                callbacks.on_epoch_begin(self, epoch + 1)
            return keep_going

        # A chunked fit in the main thread runs long compiled calls in a helper thread, so that
        # a second Ctrl-C reaches the loop mid-epoch (Python ops return to Python every job).
        call = (EpochCaller(stop, len(arrays[0]) * program.n_params)
                if plan.per_epoch and in_main_thread() and not program.python_ops else None)

        def grow(args):  # (a paused fit: a longer history for the next epochs when needed)
            args, self._batch_log = grown_history(args, rows, self._batch_log, state.epoch, plan)
            return args

        def run():
            with single_threaded_blas():
                return program.run(options, arrays, step(), self._state, self._best, history,
                                   empty_rows(self.dtype, 1),
                                   on_pause=on_epoch if plan.per_epoch else None,
                                   batch_log=self._batch_log, call=call,
                                   grow=grow if plan.per_epoch else None)

        status = None
        interrupted = False
        try:
            if plan.threaded:
                status = run_with_progress(self, run, stop, history, plan)
            elif plan.per_epoch:
                with stop.on_sigint():  # Ctrl-C: stop after the current epoch
                    status = run()
            else:
                status = run()  # the plain single compiled call
        except KeyboardInterrupt:
            # A KeyboardInterrupt raised by a callback (or by Python code when no stop handler
            # could be installed) between epochs: stop cleanly, the epochs that ran are kept, the
            # best weights restored and the callbacks (a run folder) finish normally.
            if state.job >= 0:  # interrupted inside a Python op: the epoch is incomplete
                raise
            interrupted = True
        finally:
            self.optimizer.iterations = int(state.step)
            for (_, module), mode in zip(self._walk.modules, self._modes_before_fit):
                module.__dict__["training"] = mode
            requested = stop is not None and stop.requested
            if requested:
                state.clear_stop_request()  # a Ctrl-C is not early stopping: a resume goes on
            self.history_ = fit_history(rows[0], state, self._fit_start, plan.monitor,
                                        classification)
            self._batch_frame()
        return status, interrupted or requested

    def _end_fit(self, plan: FitPlan, status, interrupted: bool) -> pd.DataFrame:
        """Apply the best-weights rule to a fit stopped early, end the callbacks, report."""
        if status == st.PAUSED or interrupted:  # stopped early: apply the best-weights rule
            restore_best(self._options, self._run_state, self.program.params, self._best)
            self.history_.attrs["restored_best"] = bool(self._run_state.restored)
            self.history_.attrs["stop_reason"] = ("interrupted (KeyboardInterrupt)" if interrupted
                                                  else "stopped by a callback")
        if plan.callbacks:  # (building the logs costs pandas work a plain fit should not pay)
            plan.callbacks.on_train_end(self, self.history_.iloc[-1].to_dict()
                                        if len(self.history_) else {})
        if plan.verbose:
            print(summary_line(self.history_))
        return self.history_

    def _batch_frame(self) -> None:
        """``batch_history_`` from the compiled per-batch log, up to the last finished epoch."""
        if self._batch_log is not None:
            self.batch_history_ = batch_history(self._batch_log, self._run_state,
                                                self.loss.is_classification)

    # -- fit state (exact resume) ----------------------------------------------------------------
    def fit_state(self) -> dict | None:
        """What a checkpoint needs to continue this trainer's fit exactly, or None before any
        fit: ``epoch``, ``fit_step``, ``best``, ``best_epoch``, ``bad_epochs``, ``stopped``,
        ``lr``, ``monitor`` (scalars), ``plateau`` (ReduceLROnPlateau's parameters and state;
        empty without it) and ``best_params`` (the best-weights snapshot; empty when not kept).
        """
        if self.program is None or getattr(self, "_plateau", None) is None:
            return None
        return resume.fit_state(self._run_state, self._options, self._monitor_code,
                                self._plateau, self._best)

    def callback_states(self) -> dict:
        """``{key: state}`` of the current fit's callbacks that have a state (see
        :meth:`Callback.state`); keys are class names, with ``#2``, ``#3`` for repeats."""
        return resume.callback_states(getattr(self, "_callbacks", None))

    def __repr__(self) -> str:
        return (f"Trainer(model={type(self.model).__name__}, optimizer={self.optimizer!r}, "
                f"loss={self.loss!r}, regularizer={self.regularizer!r})")


JITCompiler = Trainer

_NO_SPANS = np.zeros((0, 2), dtype=np.int64)  # no regularizer: no penalised spans


def _inference_trainer(model: Module) -> Trainer:
    """``model.predict``'s trainer when none laid the model out: MSE (any width), seed 0."""
    return Trainer(model, loss=MSELoss(), seed=0)


provide("inference_trainer", _inference_trainer)

