"""One compiled function per kernel family, for the interpreter.

Numba's compile cost is mostly per compiled function (~150-300 ms each). The interpreter calls
each family through one function below, into which the family's kernels are inlined from their
single source (``inline="always"`` copies of the same Python functions). Activations: two
compiled functions instead of sixteen; optimizers and losses: one instead of three each (what
it saved: docs/performance.md, "Measurements behind the code"). The switch on
the kind sits outside the loops, which still vectorise. Tests and the parallel builds keep
using the kernels themselves.
"""

from nnjit.graph.opcodes import Opcode
from nnjit.kernels import elementwise as ke
from nnjit.kernels import loss as kl
from nnjit.kernels import optim as ko
from nnjit.kernels._jit import inlined, jit

OPT_SGD, OPT_ADAM, OPT_RMSPROP = 0, 1, 2
LOSS_SOFTMAX_CE, LOSS_MSE, LOSS_BCE = 0, 1, 2

_sgd, _adam, _rmsprop = (inlined(ko.sgd_update), inlined(ko.adam_update),
                         inlined(ko.rmsprop_update))
_softmax_ce, _mse, _bce = (inlined(kl.softmax_ce), inlined(kl.mse),
                           inlined(kl.bce_with_logits))
_counted_rows = inlined(kl.counted_rows)


@jit
def optimizer_step(kind, params, grads, opt_state, opt_hyper, lr, step):
    """One update of the flat parameter block (n,) with learning rate ``lr``.

    ``opt_state`` (2, n) holds the optimizer's buffers; ``opt_hyper`` its hyperparameters in the
    order of :meth:`nnjit.optim.Optimizer.hyper_vector` (entry 0, the base rate, is unused).
    """
    if kind == OPT_SGD:
        _sgd(params, grads, opt_state[0], lr, opt_hyper[1], opt_hyper[2], opt_hyper[3] != 0.0,
             opt_hyper[4], step)
    elif kind == OPT_ADAM:
        _adam(params, grads, opt_state[0], opt_state[1], lr, opt_hyper[1], opt_hyper[2],
              opt_hyper[3], opt_hyper[4], opt_hyper[5] != 0.0, step)
    else:
        _rmsprop(params, grads, opt_state[0], opt_state[1], lr, opt_hyper[1], opt_hyper[2],
                 opt_hyper[3], opt_hyper[4], step)


@jit
def loss_and_seed(kind, pred, target, dpred, target_is_index, write_grad):
    """(loss_sum, n_correct, n_counted) of ``pred`` (B, K) against ``target``; writes the
    gradient seed into ``dpred`` when ``write_grad`` (mean over the counted rows, over all their
    elements for MSE/BCE). Class-index rows below 0 are ignored (a graph's unmasked nodes)."""
    rows = pred.shape[0]
    if kind == LOSS_SOFTMAX_CE:
        counted = _counted_rows(target) if target_is_index else rows
        loss, correct = _softmax_ce(pred, target, dpred, target_is_index, 1.0 / max(counted, 1),
                                    write_grad)
        return loss, correct, counted
    if kind == LOSS_MSE:
        loss, correct = _mse(pred, target, dpred, 1.0 / (rows * pred.shape[1]), write_grad)
    else:
        loss, correct = _bce(pred, target, dpred, 1.0 / (rows * pred.shape[1]), write_grad)
    return loss, correct, rows


# -- activations (the opcodes RELU..GELU are contiguous) ----------------------------------
_RELU = int(Opcode.RELU)
_LEAKY_RELU = int(Opcode.LEAKY_RELU)
_ELU = int(Opcode.ELU)
_SELU = int(Opcode.SELU)
_TANH = int(Opcode.TANH)
_SIGMOID = int(Opcode.SIGMOID)
_SOFTPLUS = int(Opcode.SOFTPLUS)
_GELU = int(Opcode.GELU)


_fwd = {name: inlined(getattr(ke, f"{name}_forward"))
        for name in ("relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "gelu")}
_bwd = {name: inlined(getattr(ke, f"{name}_backward"))
        for name in ("relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "gelu")}
relu_f, leaky_relu_f, elu_f, selu_f = _fwd["relu"], _fwd["leaky_relu"], _fwd["elu"], _fwd["selu"]
tanh_f, sigmoid_f, softplus_f, gelu_f = (_fwd["tanh"], _fwd["sigmoid"], _fwd["softplus"],
                                         _fwd["gelu"])
relu_b, leaky_relu_b, elu_b, selu_b = _bwd["relu"], _bwd["leaky_relu"], _bwd["elu"], _bwd["selu"]
tanh_b, sigmoid_b, softplus_b, gelu_b = (_bwd["tanh"], _bwd["sigmoid"], _bwd["softplus"],
                                         _bwd["gelu"])


@jit
def activation_forward(op, x, y, alpha):
    """y (n,) = activation ``op`` (an Opcode value) of x (n,); ``alpha`` is its parameter.

    Returns False, writing nothing, when ``op`` is no activation (the interpreter stops the run).
    """
    if op == _RELU:
        relu_f(x, y)
    elif op == _LEAKY_RELU:
        leaky_relu_f(x, y, alpha)
    elif op == _ELU:
        elu_f(x, y, alpha)
    elif op == _SELU:
        selu_f(x, y)
    elif op == _TANH:
        tanh_f(x, y)
    elif op == _SIGMOID:
        sigmoid_f(x, y)
    elif op == _SOFTPLUS:
        softplus_f(x, y)
    elif op == _GELU:
        gelu_f(x, y)
    else:
        return False
    return True


@jit
def activation_backward(op, x, y, dy, dx, accumulate, alpha):
    """dx (n,) (+)= dy * activation ``op``'s derivative, from x and/or its output y.

    Returns False, writing nothing, when ``op`` is no activation (the interpreter stops the run).
    """
    if op == _RELU:
        relu_b(y, dy, dx, accumulate)
    elif op == _LEAKY_RELU:
        leaky_relu_b(x, dy, dx, accumulate, alpha)
    elif op == _ELU:
        elu_b(x, y, dy, dx, accumulate, alpha)
    elif op == _SELU:
        selu_b(x, y, dy, dx, accumulate)
    elif op == _TANH:
        tanh_b(y, dy, dx, accumulate)
    elif op == _SIGMOID:
        sigmoid_b(y, dy, dx, accumulate)
    elif op == _SOFTPLUS:
        softplus_b(x, dy, dx, accumulate)
    elif op == _GELU:
        gelu_b(x, dy, dx, accumulate)
    else:
        return False
    return True
