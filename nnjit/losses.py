"""Loss functions. Each describes itself to the tape (its opcode) and prepares targets.

The maths lives in :mod:`nnjit.kernels.loss`; every loss is fused with its gradient seed.
"""

from __future__ import annotations

import numpy as np

from nnjit.data.loader import all_finite, to_arena
from nnjit.ops.losses import SKLEARN_SCALING, SKLEARN_WEIGHTED
from nnjit.ops.opcodes import Opcode
from nnjit.tape.tape import Tape, Tensor


class Loss:
    """Base class: ``opcode`` names the fused kernel; ``prepare_targets`` validates ``y``."""

    opcode: Opcode
    is_classification = False

    def record(self, tape: Tape, prediction: Tensor, target: Tensor) -> Tensor:
        return tape.loss(self.opcode, prediction, target)

    def prepare_targets(self, y: np.ndarray, n_outputs: int, dtype, where: str) -> np.ndarray:
        """Check ``y`` against the model's output width; return a 2-D C-contiguous arena array."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _finite(y: np.ndarray, where: str) -> None:
    if not all_finite(y):
        bad = int(np.flatnonzero(~np.isfinite(y.reshape(len(y), -1)).any(axis=1))[0])
        raise ValueError(f"{where}: y contains NaN or inf (first at row {bad})")


class CrossEntropyLoss(Loss):
    """Softmax cross-entropy over logits, fused with log-sum-exp; mean over the batch.

    Targets: class indices ``(N,)`` (integers in ``[0, C)``) or one-hot / probability rows
    ``(N, C)`` (soft labels, as PyTorch's class probabilities: entries in [0, 1], each row
    summing to 1 within ``PROBABILITY_TOLERANCE``; other rows are an error naming the first).
    Predictions: logits ``(N, C)``.
    """

    opcode = Opcode.SOFTMAX_CE
    is_classification = True

    def record(self, tape, prediction, target):
        return tape.loss(self.opcode, prediction, target, aux=(1 if target.cols == 1 else 0,))

    def prepare_targets(self, y, n_outputs, dtype, where):
        y = np.asarray(y)
        if y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1 and n_outputs > 1):
            y = y.reshape(-1)
            if y.dtype.kind not in "iub":
                _finite(y, where)
                if y.dtype.kind != "f" or not np.array_equal(y, np.round(y)):
                    raise ValueError(
                        f"{where}: class labels must be integers in [0, {n_outputs}), "
                        f"got dtype {y.dtype} with non-integer values"
                    )
            if y.size and not _labels_in_range(y, n_outputs):
                bad = y[(y < 0) | (y >= n_outputs)][0].item()
                raise ValueError(
                    f"{where}: label {bad!r} out of range for a model with {n_outputs} outputs "
                    f"(expected integers in [0, {n_outputs}))"
                )
            return np.ascontiguousarray(y.reshape(-1, 1), dtype=dtype)
        if y.ndim == 2 and y.shape[1] == n_outputs:
            _finite(y, where)
            _check_probabilities(y, where)
            return to_arena(y, dtype, where)
        raise ValueError(
            f"{where}: targets must be class indices of shape (N,) or one-hot rows (N, {n_outputs}),"
            f" got shape {y.shape}"
        )


SoftmaxCrossEntropyLoss = CrossEntropyLoss

#: How far a probability target row's sum may be from 1 (float32 softmax outputs and label
#: smoothing round to within ~1e-6 of it).
PROBABILITY_TOLERANCE = 1e-3


def _check_probabilities(y: np.ndarray, where: str) -> None:
    """Reject target rows that are not probabilities: an entry outside [0, 1], or a row
    whose sum is not 1 (cross-entropy of such a row is no loss a model can minimise)."""
    if y.size == 0:
        return
    if y.item(y.argmin()) < 0 or y.item(y.argmax()) > 1:
        row = int(np.flatnonzero(((y < 0) | (y > 1)).any(axis=1))[0])
        raise ValueError(f"{where}: one-hot / probability targets must lie in [0, 1]; row {row} "
                         f"is {y[row].tolist()!r} (pass class indices, or class probabilities)")
    sums = y.sum(axis=1, dtype=np.float64)
    off = np.abs(sums - 1.0) > PROBABILITY_TOLERANCE
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise ValueError(f"{where}: one-hot / probability target rows must sum to 1; row {row} "
                         f"sums to {sums[row]:.6g} ({y[row].tolist()!r})")


def _labels_in_range(y: np.ndarray, n: int) -> bool:
    """All of the (non-empty, NaN-free) labels ``y`` lie in ``[0, n)``: two elements looked up
    with argmin/argmax (no ufunc reduction: see :func:`nnjit.data.loader.all_finite`)."""
    return y.item(y.argmin()) >= 0 and y.item(y.argmax()) < n


class MSELoss(Loss):
    """Mean squared error over all elements (PyTorch's ``reduction='mean'``)."""

    opcode = Opcode.MSE

    def prepare_targets(self, y, n_outputs, dtype, where):
        y = np.asarray(y)
        if y.ndim == 1 and n_outputs == 1:
            y = y.reshape(-1, 1)
        if y.ndim != 2 or y.shape[1] != n_outputs:
            raise ValueError(f"{where}: targets must have shape (N, {n_outputs}), got {y.shape}")
        if y.dtype.kind not in "iufb":
            raise ValueError(f"{where}: targets must be numeric, got dtype {y.dtype}")
        _finite(y, where)
        return to_arena(y, dtype, where)


class BCEWithLogitsLoss(Loss):
    """Sigmoid + binary cross-entropy over logits, computed stably; mean over all elements.

    Targets in [0, 1] with the prediction's shape (``(N,)`` allowed for one output).
    """

    opcode = Opcode.BCE_WITH_LOGITS
    is_classification = True

    def prepare_targets(self, y, n_outputs, dtype, where):
        y = MSELoss.prepare_targets(self, y, n_outputs, dtype, where)
        if y.size and (y.min() < 0 or y.max() > 1):
            raise ValueError(f"{where}: binary targets must lie in [0, 1], got range "
                             f"[{y.min()}, {y.max()}]")
        return y


class _SklearnScaled:
    """scikit-learn's MLP losses: ``weighted`` when the targets' last column holds each row's
    ``sample_weight`` (the loss, its gradient and the L2 penalty weighted as scikit-learn's)."""

    def __init__(self, weighted: bool = False):
        self.weighted = bool(weighted)

    def record(self, tape, prediction, target):
        return tape.loss(self.opcode, prediction, target,
                         aux=(SKLEARN_WEIGHTED if self.weighted else SKLEARN_SCALING,))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(weighted={self.weighted})"


class SklearnLogLoss(_SklearnScaled, CrossEntropyLoss):
    """scikit-learn's ``log_loss`` of ``MLPClassifier``'s softmax outputs (class indices): the
    cross-entropy of each row with p clipped to [eps, 1 - eps] (the float's machine epsilon) as
    scikit-learn counts it; the gradient is the unclipped ``softmax - one_hot`` over N."""


class SklearnSquaredError(_SklearnScaled, MSELoss):
    """scikit-learn's ``MLPRegressor`` loss: half the mean squared error, ``0.5 * mean((p -
    t)^2)``, with its gradient seed ``(p - t) / N`` (not divided by the number of outputs, as
    scikit-learn's backpropagation)."""


class SklearnBinaryLogLoss(_SklearnScaled, BCEWithLogitsLoss):
    """scikit-learn's ``binary_log_loss`` of ``MLPClassifier``'s logistic outputs (binary and
    multi-label targets): binary cross-entropy summed over the outputs, averaged over the rows,
    each element's p clipped to [eps, 1 - eps] as scikit-learn counts it, gradient seed
    ``(sigmoid(z) - t) / N``."""


class PoissonLoss(MSELoss):
    """Poisson loss of log-rates (the model outputs log(rate)): mean over all elements of
    ``exp(z) - t z`` (PyTorch's ``PoissonNLLLoss(log_input=True)``); targets are counts >= 0."""

    opcode = Opcode.POISSON

    def prepare_targets(self, y, n_outputs, dtype, where):
        y = MSELoss.prepare_targets(self, y, n_outputs, dtype, where)
        if y.size and y.min() < 0:
            raise ValueError(f"{where}: Poisson targets must be >= 0, got minimum {y.min()}")
        return y


class SklearnPoissonLoss(_SklearnScaled, PoissonLoss):
    """scikit-learn's ``MLPRegressor(loss="poisson")`` loss of its log-link output: half the
    Poisson deviance summed over the outputs, averaged over the rows (its ``poisson_loss``),
    gradient seed ``(exp(z) - t) / N``."""


LOSSES = {
    "cross_entropy": CrossEntropyLoss,
    "softmax_cross_entropy": CrossEntropyLoss,
    "mse": MSELoss,
    "bce_with_logits": BCEWithLogitsLoss,
}


def get_loss(identifier) -> Loss:
    """A loss from an instance, a class or a name (``"cross_entropy"``, ``"mse"``, ...)."""
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, Loss):
        return identifier()
    if isinstance(identifier, str) and identifier.lower() in LOSSES:
        return LOSSES[identifier.lower()]()
    raise ValueError(
        f"Could not interpret loss identifier: {identifier!r}; valid names: {', '.join(LOSSES)}"
    )
