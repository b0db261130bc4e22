"""The Trainer's tasks that take no optimizer step: ``predict``, ``predict_proba``,
``predict_outputs``, ``evaluate`` and ``gradients``.

They need no fit: the first call lays the model out (:meth:`Trainer._compile`, through the layout
service; the forward of the same compiled build fit uses, so no new compile) on the parameters'
current values: fresh, loaded (load_weights, load_checkpoint) or trained. Each runs one task of
the compiled loop on the trainer's program.
"""

from __future__ import annotations

import functools

import numpy as np

from nnjit.data.adapt import as_loader
from nnjit.data.full_batch import FullBatch
from nnjit.data.graph import Graph
from nnjit.data.images import ImageDataset
from nnjit.data.sequences import SequenceDataset
from nnjit.data.inputs import Inputs
from nnjit.data.loader import DataLoader
from nnjit.engine import fields
from nnjit.engine.loop_arrays import StepArrays
from nnjit.engine.run_options import RunOptions
from nnjit.kernels import loss as kl
from nnjit.losses import CrossEntropyLoss
from nnjit.ops.normalization import check_batch_statistics
from nnjit.train.exclusive import exclusive
from nnjit.train.run_state import RunState
from nnjit.train.threads import single_threaded_blas

#: predict and evaluate read the rows in chunks of this many (a layout made for them holds
#: min(rows, INFERENCE_BATCH)): the dense products pick their kernels by the chunk's rows, so a
#: chunking fixed by the number of rows alone makes the outputs of the same weights on the same
#: rows independent of the batch sizes the model was fit with.
INFERENCE_BATCH = 256
_NONE = np.zeros(0, dtype=np.float64)  # (no schedule, no plateau rule: never written)
_NO_ORDER = np.zeros(0, dtype=np.int64)  # (inference reads the rows in order)


@functools.lru_cache(maxsize=64)
def inference_options(task: int, batch: int, dense_mode: int) -> RunOptions:
    """The options of a run of ``task`` that takes no optimizer step (predict, evaluate,
    gradients) in batches of ``batch`` rows (the program's largest), made once per kind."""
    return RunOptions(task=task, batch=batch, eval_batch=batch, dense_mode=dense_mode)


class InferenceMethods:
    """:class:`~nnjit.train.trainer.Trainer`'s predict, evaluate and gradients (a mixin: it runs
    on the trainer's ``model``, ``loss``, ``dtype``, ``optimizer``, ``program`` and the layout
    its ``_compile`` makes)."""

    def _graph_features(self, data, what: str):
        """For a Graph (or its FullBatch): trace on it if needed and return the batch input;
        None for other data."""
        if isinstance(data, Graph):
            data = FullBatch(data)
        if not isinstance(data, FullBatch):
            return None
        self._use_graph(data)
        X = data.features(self.dtype)
        self._compile(data.input_specs, None, data.batch_size, what, inference=True)
        return X

    def _inference_input(self, data, what: str, targets=None) -> np.ndarray:
        """``data`` (an array, a tuple of arrays (one per input), their checked
        :class:`~nnjit.data.inputs.Inputs`, an Image- or SequenceDataset, a Graph or a
        FullBatch) as the batch input in the arena dtype, with the model laid out for it if it
        is not yet; ``targets(n_outputs)``, when given, sets the target width of a first layout
        (evaluate)."""
        graph_x = self._graph_features(data, what)
        if graph_x is not None:
            return graph_x
        if isinstance(data, ImageDataset):  # (its labels are not an input)
            data = data.images
        elif isinstance(data, SequenceDataset):
            data = data.inputs
        inputs = data if isinstance(data, Inputs) else Inputs(data, f"{what}: X")
        if self.program is None:
            self._use_graph(None)  # (a graph model's trace refuses the array, saying so)
        else:
            self._check_inputs(inputs.specs, inputs, what)
        X = inputs.packed(self.dtype)
        self._compile(inputs.specs, targets, max(1, min(len(X), INFERENCE_BATCH)), what,
                      inference=True, inputs=inputs)
        return X

    def _inference_chunk(self) -> int:
        """Rows per chunk of predict and evaluate: INFERENCE_BATCH whatever batch the layout
        holds (it holds at least the chunk), a graph's nodes all at once."""
        program = self.program
        return program.max_batch if program.graph is not None else INFERENCE_BATCH

    def _run_simple(self, task, X, Y, out, perm=None, chunk=None):
        """Run ``task`` (no optimizer step) on all rows of ``(X, Y)`` in batches of ``chunk``
        rows (default: the layout's largest); its run state."""
        state = RunState.for_task()
        batch = min(self.program.max_batch, chunk or self.program.max_batch)
        options = inference_options(task, batch, self._dense_mode)
        with single_threaded_blas():
            self.program.run(options, (X, Y, X, Y, _NO_ORDER if perm is None else perm),
                             self._no_step(), state.row, self._best, np.zeros((1, 7)), out)
        return state

    def _no_step(self) -> StepArrays:
        """The step arrays of a task that takes no optimizer step."""
        return StepArrays(self.optimizer.hyper_vector(), self.optimizer.state, self._reg_spans,
                          _NONE, _NONE, self._empty(None))

    def _outputs(self, data, what: str) -> np.ndarray:
        """The raw outputs of ``data``; ``what`` (the method called) names it in errors."""
        with exclusive(self, what):
            X = self._inference_input(data, what)
            out = np.empty((len(X), self.program.output_cols), dtype=self.dtype)
            self._run_simple(fields.TASK_PREDICT, X, self._empty(self.program.target_cols), out,
                             chunk=self._inference_chunk())
            return out

    def predict_outputs(self, X) -> np.ndarray:
        """Raw network outputs ``(N, out_features)`` (logits for classification losses).

        Needs no fit: the first call traces the model and lays it out for the parameters'
        current values (fresh initial weights, :meth:`Module.load_weights`,
        :meth:`load_checkpoint`, or a fit). Evaluation mode (dropout off, batch norm on its
        running statistics), whatever ``model.training`` says; it is not changed.

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
        with exclusive(self, "evaluate"):
            loader = (FullBatch(data, y) if isinstance(data, Graph)
                      else as_loader(data, y, "evaluate"))
            if isinstance(loader, FullBatch):
                X = self._inference_input(loader, "evaluate")
            else:
                X = self._inference_input(loader.inputs if loader.inputs is not None else loader.X,
                                          "evaluate", lambda k: loader.targets(self.loss, k,
                                                                               self.dtype))
            Y = loader.targets(self.loss, self.program.output_cols, self.dtype)
            if Y.shape[1] != self.program.target_cols:
                raise ValueError(f"evaluate: y has {Y.shape[1]} columns, the model was laid out for "
                                 f"{self.program.target_cols}")
            state = self._run_simple(fields.TASK_EVALUATE, X, Y, self._empty(1),
                                     chunk=self._inference_chunk())
            n = state.val_n
            result = {"loss": state.val_loss / n}
            if self.loss.is_classification:
                result["accuracy"] = state.val_correct / n
            return result

    def gradients(self, X, y=None) -> dict[str, np.ndarray]:
        """Loss gradients of every parameter on ``(X, y)`` as one batch (no update).

        Training mode, as a PyTorch forward after ``model.train()``: dropout is active and batch
        norm normalises with the batch's statistics and updates its running ones. Returns copies
        keyed by dotted parameter name (buffers take no gradient and are not listed).
        """
        with exclusive(self, "gradients"):
            if isinstance(X, Graph):  # y: the mask whose nodes the loss counts (default: all)
                loader = FullBatch(X, y)
                self._use_graph(loader)
            else:
                inputs = Inputs(X, "gradients: X")
                loader = DataLoader(inputs, y, batch_size=inputs.n_rows, shuffle=False)
                self._use_graph(None)
            Xa = loader.features(self.dtype)
            Y = self._compile(loader.input_specs, lambda k: loader.targets(self.loss, k, self.dtype),
                              len(Xa), "gradients", inputs=loader.inputs)
            check_batch_statistics(self.program, len(Xa), len(Xa), False, "gradients")
            state = self._run_simple(fields.TASK_GRADIENT, Xa, Y, self._empty(1),
                                     np.arange(len(Xa)))
            self.last_loss_ = state.batch_loss / max(state.batch_count, 1.0)
            return {n: np.array(p.grad, copy=True) for n, p in self.model.named_parameters()}
