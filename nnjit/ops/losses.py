"""The loss family: losses fused with their gradient seed, ``in0`` prediction (B, K), ``in1``
targets (B, T) -> a (1, 1) slot.

A loss is the last forward record. Its forward adds (loss sum, correct, counted rows) to the
job's statistics and, in a training batch, writes the prediction's gradient (the mean over the
counted rows); its backward has nothing left to do. :func:`loss_and_seed` holds the three
kernels of :mod:`nnjit.kernels.loss` inlined in one compiled function (as the activations).
"""

import numpy as np

from nnjit.kernels import loss as kl
from nnjit.kernels._jit import inlined, jit
from nnjit.ops.context import (
    CTX_GRADS,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SLOTS,
    CTX_STATS,
    CTX_TRAINING,
    CTX_VALUES,
    dispatcher,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpSpec
from nnjit.tape.records import R_AUX1, R_IN0, R_IN1
from nnjit.tape.slot_views import slot_view

FIRST_OPCODE = 40
_SOFTMAX_CE, _MSE, _BCE, _POISSON = range(FIRST_OPCODE, FIRST_OPCODE + 4)

#: aux1 of loss records: scikit-learn's MLP losses. The loss sums over the outputs (BCE,
#: scikit-learn's ``binary_log_loss``) or is half the mean square (MSE, its ``squared_loss``),
#: the gradient seed is (prediction - target) / rows whatever the number of outputs, as
#: scikit-learn's ``delta = activations[-1] - y`` divided by the batch size, and the log losses
#: (BCE; cross-entropy of class indices) count p clipped to [eps, 1 - eps] as scikit-learn does.
SKLEARN_SCALING = 2
#: aux1 of loss records: scikit-learn's scaling with ``sample_weight``: the targets' last column
#: holds each row's weight. A training batch's loss is its weighted mean times its rows, its
#: gradient seed ``w (prediction - target) / sum(w)``; evaluation sums the weighted loss and
#: correct count and counts the weight sum as the rows (scikit-learn's weighted scores).
#: The compiled loop's L2 penalty divides alpha by the batch's weight sum for such a record.
SKLEARN_WEIGHTED = 3


def softmax_ce(prediction, target):
    """Record softmax cross-entropy of logits ``prediction`` (B, K) against class indices
    (B, 1) or probability rows (B, K)."""
    return prediction.tape.loss(_SOFTMAX_CE, prediction, target,
                                aux=(1 if target.cols == 1 else 0,))


def mse(prediction, target):
    """Record the mean squared error over all elements."""
    return prediction.tape.loss(_MSE, prediction, target)


def bce_with_logits(prediction, target):
    """Record binary cross-entropy of logits against 0/1 targets, over all elements."""
    return prediction.tape.loss(_BCE, prediction, target)


def poisson(prediction, target):
    """Record the Poisson loss of log-rates ``prediction`` against counts, over all elements."""
    return prediction.tape.loss(_POISSON, prediction, target)


def _softmax_ce(logits, targets):
    """Mean cross-entropy under softmax(``logits``) (N, C) of class indices (N,) or (N, 1), or
    of probability rows (N, C)."""
    z = logits - logits.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    targets = np.asarray(targets)
    if targets.ndim == 2 and targets.shape[1] == logits.shape[1] and logits.shape[1] > 1:
        return -np.mean((targets * log_p).sum(axis=1))
    return -np.mean(log_p[np.arange(len(targets)), targets.reshape(-1).astype(int)])


def _class_targets(rng, dims):
    """Class indices (B, 1)."""
    return {1: rng.integers(0, dims["K"], (dims["B"], 1))}


def _count_targets(rng, dims):
    return {1: rng.poisson(2.0, (dims["B"], dims["K"])).astype(np.float64)}


def _binary_targets(rng, dims):
    return {1: rng.integers(0, 2, (dims["B"], dims["K"])).astype(np.float64)}


# Targets have the prediction's shape; cross-entropy's signature names its class-index form
# (probability rows (B, K) are its other form: tests/kernels/test_loss.py).
_LOSS = "(B,K),(B,K)->(1,1)"
_LOSS_AUX = {"aux0": "unused (-1)"}
_SCALED_LOSS_AUX = {**_LOSS_AUX, "aux1": f"{SKLEARN_SCALING}: scikit-learn's MLP scaling "
                                         "(SKLEARN_SCALING), else PyTorch's mean"}

SPECS = (
    OpSpec("SOFTMAX_CE", 2, "(B,K),(B,1)->(1,1)", _softmax_ce, softmax_ce, grad_inputs=(0,),
           aux={**_LOSS_AUX, "aux1": "1 when targets hold class indices (T == 1), 0 for "
                                     "probability rows (T == K), SKLEARN_SCALING for class "
                                     "indices with scikit-learn's clipped log_loss"},
           sample_inputs=_class_targets),
    OpSpec("MSE", 2, _LOSS, lambda p, t: np.mean((p - t) ** 2), mse, grad_inputs=(0,),
           aux=_SCALED_LOSS_AUX),
    OpSpec("BCE_WITH_LOGITS", 2, _LOSS, lambda z, t: np.mean(np.logaddexp(0.0, z) - z * t),
           bce_with_logits, grad_inputs=(0,), aux=_SCALED_LOSS_AUX,
           sample_inputs=_binary_targets),
    OpSpec("POISSON", 2, _LOSS, lambda z, t: np.mean(np.exp(z) - t * z), poisson,
           grad_inputs=(0,), aux=_SCALED_LOSS_AUX, input_domain=(-2.0, 2.0),
           sample_inputs=_count_targets),
)
_END = FIRST_OPCODE + len(SPECS)

_softmax_ce_k, _mse_k, _bce_k, _poisson_k = (inlined(kl.softmax_ce), inlined(kl.mse),
                                             inlined(kl.bce_with_logits), inlined(kl.poisson))
_counted_rows = inlined(kl.counted_rows)


@jit
def loss_and_seed(op, pred, target, dpred, mode, write_grad):
    """(loss_sum, n_correct, n_counted) of loss ``op`` (its opcode) of ``pred`` (B, K) against
    ``target``; writes the gradient seed into ``dpred`` when ``write_grad`` (mean over the
    counted rows, over all their elements for MSE/BCE unless ``mode`` is SKLEARN_SCALING).
    ``mode`` is the record's aux1: for cross-entropy 1 when the targets are class indices
    (SKLEARN_SCALING: class indices, scikit-learn's clipped loss; SKLEARN_WEIGHTED: the same
    with the weights in the targets' last column, see there).
    Class-index rows below 0 are ignored (a graph's unmasked nodes). ``n_counted`` is -1,
    nothing computed, when ``op`` is no loss."""
    rows = pred.shape[0]
    weighted = mode == SKLEARN_WEIGHTED
    sklearn = mode == SKLEARN_SCALING or weighted
    wcol = target.shape[1] - 1 if weighted else -1
    weights = 0.0
    if weighted:
        for i in range(rows):
            weights += float(target[i, wcol])
    # (scikit-learn divides the weighted sums by the weight sum where it divides by the rows)
    per = weights if weighted else float(rows)
    if op == _SOFTMAX_CE:
        target_is_index = mode == 1 or sklearn
        counted = _counted_rows(target) if target_is_index else rows
        loss, correct = _softmax_ce_k(pred, target, dpred, target_is_index,
                                      1.0 / (per if weighted else max(counted, 1)),
                                      write_grad, sklearn, wcol)
    else:
        k = pred.shape[1]
        counted = rows
        if op == _MSE:  # (the kernel's gradient is 2 * scale * (p - t): half of 1/rows)
            loss, correct = _mse_k(pred, target, dpred,
                                   0.5 / per if sklearn else 1.0 / (rows * k), write_grad, wcol)
            if sklearn:
                loss *= 0.5
        elif op == _BCE:
            loss, correct = _bce_k(pred, target, dpred, 1.0 / per if sklearn else 1.0 / (rows * k),
                                   write_grad, sklearn, wcol)
            if sklearn:
                loss *= k
        elif op == _POISSON:  # (scikit-learn's: summed over the outputs, its deviance terms)
            loss, correct = _poisson_k(pred, target, dpred,
                                       1.0 / per if sklearn else 1.0 / (rows * k), write_grad,
                                       sklearn, wcol)
            if sklearn:
                loss *= k
        else:
            return 0.0, 0.0, -1.0
    if not weighted:
        return loss, correct, float(counted)
    if write_grad:  # scikit-learn's batch loss (a weighted mean) counted for each row
        return loss / weights * rows, correct, float(rows)
    return loss, correct, weights


@dispatcher
def forward(op, i, ctx):
    handled = (op >= _SOFTMAX_CE) & (op < _END)
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        rows = ctx[CTX_ROWS]
        a = records[i, R_IN0]
        loss, correct, counted = loss_and_seed(
            op, slot_view(ctx[CTX_VALUES], slots, a, rows),
            slot_view(ctx[CTX_VALUES], slots, records[i, R_IN1], rows),
            slot_view(ctx[CTX_GRADS], slots, a, rows), records[i, R_AUX1], ctx[CTX_TRAINING])
        stats = ctx[CTX_STATS]
        stats[0] += loss
        stats[1] += correct
        stats[2] += counted
        handled = counted >= 0
    return handled


@dispatcher
def backward(op, i, ctx):
    # the forward wrote the gradient seed
    return (op >= _SOFTMAX_CE) & (op < _END)


FAMILY = register(OpFamily("losses", SPECS, forward, backward, core=True,
                           first_opcode=FIRST_OPCODE))
